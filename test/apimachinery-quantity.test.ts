// lib/quantity.ts against Kubernetes' own parser (k8s.io/apimachinery, built
// from test/apimachinery-quantity): every quantity the gateway can write is
// one the API server keeps as written, at most int64 in its unit, and the
// gateway reads quantities to the same value the API server does.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { formatBytes, formatMilli, parseBytes, parseMilli, QuantityError } from '../lib/quantity.js';
import { decide, DEFAULT_POLICY } from '../gateway/decide/policy.js';
import { UsageWindow } from '../lib/usage/usage-window.js';
import { apimachineryQuantities } from './helpers/apimachinery-quantity.js';

const MAX = 2n ** 63n - 1n;
const edges = [
  1n, 7n, 999n, 1000n, 1001n, 1023n, 1024n, 1025n, 1536n, 999_999n, 10n ** 6n, 1_048_575n, 2n ** 20n, 2n ** 20n + 1n, 1023n * 1024n,
  10n ** 9n - 1n, 10n ** 9n, 10n ** 9n + 1n, 2n ** 30n, 2n ** 30n - 1024n, 1_500_000_000n, 10n ** 15n, 10n ** 18n - 1n, 10n ** 18n, 10n ** 18n + 1n,
  2n ** 53n, 2n ** 53n + 1n, 2n ** 60n, 2n ** 60n + 1024n, 2n ** 62n, 9n * 10n ** 18n, MAX - 1024n, (MAX / 1024n) * 1024n, MAX - 1n, MAX,
];
const arbInt64 = fc.oneof(fc.bigInt({ min: 1n, max: MAX }), fc.bigInt({ min: 1n, max: 10n ** 7n }), fc.bigInt({ min: 1n, max: 2n ** 45n }).map((n) => n * 1024n), fc.bigInt({ min: 1n, max: 9_223_372n }).map((n) => n * 10n ** 12n));

/** Checks written quantities with the real parser: kept as written, through JSON too, and read back to the value by Go's own MilliValue()/Value(). */
function assertKeptAsWritten(values: readonly bigint[], format: (v: bigint) => string, unit: 'milli' | 'unit'): void {
  const written = values.map(format);
  const answers = apimachineryQuantities(written);
  answers.forEach((a, i) => {
    const v = values[i]!;
    assert.ok(a.ok, `${a.in} (${v}) refused: ${a.err}`);
    assert.equal(a.canonical, a.in, `${v} written as ${a.in} is stored as ${a.canonical}`);
    assert.equal(a.roundTripErr, undefined, `${a.in} refused through JSON`);
    assert.equal(a.roundTrip, a.in, `${a.in} changes through JSON`);
    assert.equal(unit === 'milli' ? a.milliFitsInt64 : a.unitFitsInt64, true, `${a.in} is beyond int64 in ${unit}s`);
    assert.equal(unit === 'milli' ? a.milli : a.unit, v.toString(), `${a.in} is another value`);
    assert.equal(unit === 'milli' ? a.milliValue : a.value, v.toString(), `${a.in}: Go's ${unit === 'milli' ? 'MilliValue' : 'Value'}() reads another value`);
  });
}

/**
 * Strings as the fuzz suite's exoticQuantity generator makes them (test/fuzz.test.ts;
 * a test file cannot be imported without running it), plus quantities in every
 * suffix family, so most of them parse.
 */
const EXOTIC = ['0', '-1', '-1Gi', '1e308', '1e-308', '9'.repeat(80), '0.000000000001', '1E', '1Ei', '16Ei', '1.5Ki', '+7910m', '.5', '1.', 'NaN', 'Infinity', '', ' ', '1Gb', '0x10', '7910m\u0000',
  '7910m', '3778260Ki', '1.5', '1500M', '99999999999999999999Ei', '1e60', '2k', '0.1m', '1n', '123456789012345678901234567890', '1e18', '1e19', '7Ei', '8Ei', '9Ei', '8E',
  '9223372036854775807', '9223372036854775808', '9223372036854775807Ki', '9223372036854775807m', '9223372036854775808m', '-9223372036854775808m', '-9223372036854775809m',
  '1.0000000001', '0.0000000001', '-0.0000000001', '1.00000000000000000001', '-1.0000000000000000005', '0.5Ki', '1023.5Ki', '1e-9', '1e-10', '1E-3', '+1e3', '-0', '+0', '00', '007', '0.0', '1.000', '1000m', '1024Ki', '1.5e3m'];
const exoticGenerated = fc.oneof(
  fc.bigInt({ min: -(2n ** 80n), max: 2n ** 80n }).map((n) => `${n}`),
  fc.tuple(fc.double({ noNaN: false }), fc.constantFrom('', 'm', 'Ki', 'Mi', 'Gi', 'e3', 'k', 'n')).map(([d, s]) => `${d}${s}`),
  fc.string({ maxLength: 20 }),
  fc.stringMatching(/^[+-]?\d{0,25}(\.\d{0,25})?([numkMGTPE]|[KMGTPE]i|[eE][+-]?\d{1,3})?$/),
  fc.tuple(
    fc.oneof(fc.nat(), fc.integer({ min: 0, max: 10 ** 7 }).map((n) => (n / 1000).toFixed(3)), fc.bigInt({ min: 0n, max: 10n ** 20n }).map(String), fc.double({ min: 0, max: 1e25, noNaN: true })),
    fc.constantFrom('', 'm', 'Ki', 'Mi', 'Gi', 'Ti', 'Pi', 'Ei', 'e3', 'E6', 'k', 'M', 'G', 'T', 'P', 'E', 'n', 'u'),
  ).map(([n, s]) => `${n}${s}`),
);

/** lib/quantity.ts's reading, or the QuantityError it refuses with. */
function gatewayReads(text: string): { milli: bigint; unit: bigint } | QuantityError {
  try {
    return { milli: parseMilli(text, 'q'), unit: parseBytes(text, 'q') };
  } catch (err) {
    if (err instanceof QuantityError) return err;
    throw err;
  }
}

describe('quantities, by Kubernetes\' own parser', () => {
  it('every CPU value the gateway can write (millicores, 0 to int64, suffix boundaries) is kept as written and reads back exact', () => {
    const values = [0n, ...edges, ...fc.sample(arbInt64, 3000)];
    assertKeptAsWritten(values, formatMilli, 'milli');
  });

  it('every memory value the gateway can write (whole KiB or bytes, 0 to int64, suffix boundaries) is kept as written and reads back exact', () => {
    const values = [0n, ...edges, ...edges.map((e) => (e / 1024n) * 1024n).filter((e) => e > 0n), ...fc.sample(arbInt64, 3000)];
    assertKeptAsWritten(values, formatBytes, 'unit');
  });

  it('decisions at the edges (raw near int64, ratios up to 10) patch only values Kubernetes keeps', () => {
    const window = UsageWindow.of([{ timestampMs: 1000, cpuMillicores: 1, memoryBytes: 1, cpuPressure: 0, memoryPressure: 0 }]);
    const raws = fc.sample(fc.record({ cpu: fc.oneof(fc.bigInt({ min: 1n, max: MAX }), fc.constantFrom(...edges)), mem: fc.oneof(fc.bigInt({ min: 1n, max: MAX }), fc.constantFrom(...edges)), ratio: fc.double({ min: 1, max: 10, noNaN: true }) }), 1500);
    const cpu: bigint[] = [];
    const mem: bigint[] = [];
    for (const r of raws) {
      const policy = { ...DEFAULT_POLICY, cpu: { ...DEFAULT_POLICY.cpu, maxRatio: r.ratio }, memory: { ...DEFAULT_POLICY.memory, maxRatio: r.ratio } };
      const d = decide({
        raw: { cpuMillicores: r.cpu, memoryBytes: r.mem }, policy,
        usage: { ageMs: 0, window, capacityMemoryBytes: 0, requests: { cpuMillicores: 9e18, memoryBytes: 9e18, known: true } },
      });
      cpu.push(d.cpu.applied);
      mem.push(d.memory.applied);
    }
    assertKeptAsWritten(cpu, formatMilli, 'milli');
    assertKeptAsWritten(mem, formatBytes, 'unit');
  });

  it('the gateway reads any quantity, and its canonical form, to the value the API server reads, and refuses what it refuses', () => {
    const all = [...new Set([...EXOTIC, ...fc.sample(exoticGenerated, 8000)])];
    const answers = apimachineryQuantities(all);
    const canonicals = answers.flatMap((a) => (a.ok && a.canonical !== a.in ? [a.canonical!] : []));
    const canonicalAnswers = new Map(apimachineryQuantities(canonicals).map((a) => [a.in, a]));
    let compared = 0;
    let positive = 0;
    answers.forEach((a) => {
      const read = gatewayReads(a.in);
      if (read instanceof QuantityError) {
        // Stricter than the API server only by its stated bounds (text length, exponent) and for numbers
        // without a digit ("-", ".", "E", "Ki", "+.e10"), which the API server reads as 0.
        if (a.ok && !/\d/.test(/^[+-]?[\d.]*/.exec(a.in)![0])) assert.equal(a.milli, '0', `the API server reads ${JSON.stringify(a.in)} as ${a.milli}m`);
        else if (a.ok) assert.match(read.message, /must be 1 to 64 characters|has exponent/, `the API server accepts ${JSON.stringify(a.in)}, the gateway does not: ${read.message}`);
        return;
      }
      assert.ok(a.ok, `the gateway accepts ${JSON.stringify(a.in)}, the API server does not: ${a.err}`);
      for (const text of [a.in, a.canonical!]) {
        const r: ReturnType<typeof gatewayReads> = text === a.in ? read : gatewayReads(text);
        assert.ok(!(r instanceof QuantityError), `the gateway refuses ${text}, the API server's canonical form of ${a.in}: ${(r as Error).message}`);
        if (a.milliFitsInt64) assert.equal(r.milli.toString(), a.milli, `${text} (from ${a.in}): millis`);
        if (a.unitFitsInt64) assert.equal(r.unit.toString(), a.unit, `${text} (from ${a.in}): units`);
        // For negative values MilliValue()/Value() round away from zero on their int64 path and land one above
        // the ceiling on their big-decimal one ("-1.0000000000000000005" reads as -999m); nothing negative is ever
        // a node's allocatable, so Go's own methods are compared where the value is not.
        if (a.milliFitsInt64 && r.milli >= 0n) assert.equal(r.milli.toString(), a.milliValue, `${text} (from ${a.in}): Go's MilliValue()`);
        if (a.unitFitsInt64 && r.unit >= 0n) assert.equal(r.unit.toString(), a.value, `${text} (from ${a.in}): Go's Value()`);
      }
      // Go's canonical form is not always a fixed point: a binary quantity off a 1024 multiple prints as a plain
      // integer, which reads back as decimal ("314558264970531.25Ki" -> "322107663329824000" -> "322107663329824k").
      // Only then may it change again, and only to the same value.
      const c = canonicalAnswers.get(a.canonical!);
      if (c && c.canonical !== a.canonical) {
        assert.match(a.in, /[KMGTPE]i$/, `the API server's canonical ${a.canonical} of ${a.in} is rewritten again as ${c.canonical}`);
        assert.equal(c.milli, a.milli, `the API server's canonical ${a.canonical} of ${a.in} is another value`);
      }
      if (a.unitFitsInt64) compared += 1;
      if (read.milli > 0n) positive += 1;
    });
    assert.ok(compared > 1500 && positive > 1500, `only ${compared} quantities compared, ${positive} positive`);
  });

  it('the checker sees what the API server changes or refuses, so the checks above can fail', () => {
    const [rewritten, beyondMilli, beyondUnit, capped, refused, trimmed, offBinary, offBinaryCanonical] = apimachineryQuantities(['1024Ki', '9223372036854775808m', '9223372036854775808', '8Ei', '1Gb', ' 1', '314558264970531.25Ki', '322107663329824000']);
    assert.equal(rewritten!.canonical, '1Mi');
    assert.deepEqual([offBinary!.canonical, offBinaryCanonical!.canonical], ['322107663329824000', '322107663329824k'], 'a canonical form can be rewritten again');
    assert.deepEqual([beyondMilli!.milliFitsInt64, beyondMilli!.unitFitsInt64], [false, true]);
    assert.deepEqual([beyondUnit!.unitFitsInt64, beyondUnit!.value], [false, '-9223372036854775808'], 'Value() overflows without a word');
    assert.deepEqual([capped!.canonical, capped!.unit], ['9223372036854775807', '9223372036854775807'], 'binary quantities are capped at int64');
    assert.deepEqual([refused!.ok, refused!.err !== undefined], [false, true]);
    assert.deepEqual([trimmed!.ok, trimmed!.roundTrip], [false, '1'], 'JSON decoding trims what ParseQuantity refuses');
  });
});
