// lib/quantity.ts against Kubernetes' own parser (k8s.io/apimachinery, built
// from test/apimachinery-quantity): every quantity the gateway can write is
// one the API server keeps as written, at most int64 in its unit, and the
// gateway reads quantities to the same value the API server does.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { formatBytes, formatMilli, parseBytes, parseMilli } from '../lib/quantity.js';
import { decide, DEFAULT_POLICY } from '../gateway/decide/policy.js';
import { UsageWindow } from '../gateway/store/usage-window.js';
import { apimachineryQuantities } from './helpers/apimachinery-quantity.js';

const MAX = 2n ** 63n - 1n;
const edges = [1n, 7n, 999n, 1000n, 1001n, 1023n, 1024n, 1025n, 1536n, 10n ** 9n, 2n ** 30n, 10n ** 15n, 10n ** 18n, 2n ** 53n, 2n ** 53n + 1n, 2n ** 60n, MAX - 1024n, (MAX / 1024n) * 1024n, MAX - 1n, MAX];
const arbInt64 = fc.oneof(fc.bigInt({ min: 1n, max: MAX }), fc.bigInt({ min: 1n, max: 10n ** 7n }), fc.bigInt({ min: 1n, max: 2n ** 45n }).map((n) => n * 1024n), fc.bigInt({ min: 1n, max: 9_223_372n }).map((n) => n * 10n ** 12n));

/** Checks written quantities with the real parser: kept as written, through JSON too, value and int64 as the unit needs. */
function assertKeptAsWritten(values: readonly bigint[], format: (v: bigint) => string, unit: 'milli' | 'unit'): void {
  const written = values.map(format);
  const answers = apimachineryQuantities(written);
  answers.forEach((a, i) => {
    const v = values[i]!;
    assert.ok(a.ok, `${a.in} (${v}) refused: ${a.err}`);
    assert.equal(a.canonical, a.in, `${v} written as ${a.in} is stored as ${a.canonical}`);
    assert.equal(a.roundTrip, a.in, `${a.in} changes through JSON`);
    assert.equal(unit === 'milli' ? a.milliFitsInt64 : a.unitFitsInt64, true, `${a.in} is beyond int64 in ${unit}s`);
    assert.equal(unit === 'milli' ? a.milli : a.unit, v.toString(), `${a.in} reads back as another value`);
  });
}

describe('quantities, by Kubernetes\' own parser', () => {
  it('every CPU value the gateway can write (millicores, 1 to int64) is kept as written and reads back exact', () => {
    const values = [...edges, ...fc.sample(arbInt64, 3000)];
    assertKeptAsWritten(values, formatMilli, 'milli');
  });

  it('every memory value the gateway can write (whole KiB or bytes, up to int64) is kept as written and reads back exact', () => {
    const values = [...edges, ...edges.map((e) => (e / 1024n) * 1024n).filter((e) => e > 0n), ...fc.sample(arbInt64, 3000)];
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

  it('the gateway reads any quantity to the value the API server reads, and refuses what it refuses', () => {
    const exotic = ['0', '-1', '1e308', '1e-308', '9'.repeat(80), '0.000000000001', '1E', '1Ei', '16Ei', '1.5Ki', '+7910m', '.5', '1.', 'NaN', '', ' ', '1Gb', '0x10',
      '7910m', '3778260Ki', '1.5', '1500M', '99999999999999999999Ei', '1e60', '2k', '0.1m', '1n', '123456789012345678901234567890', '1e18', '1e19', '8Ei', '7Ei'];
    const generated = fc.sample(fc.tuple(fc.oneof(fc.nat(), fc.integer({ min: 0, max: 10 ** 7 }).map((n) => (n / 1000).toFixed(3)), fc.bigInt({ min: 0n, max: 10n ** 20n }).map(String), fc.double({ min: 0, max: 1e25, noNaN: true })), fc.constantFrom('', 'm', 'Ki', 'Mi', 'Gi', 'Ti', 'Pi', 'Ei', 'e3', 'E6', 'k', 'M', 'G', 'T', 'P', 'E', 'n', 'u')).map(([n, s]) => `${n}${s}`), 5000);
    const all = [...exotic, ...generated];
    const answers = apimachineryQuantities(all);
    let compared = 0;
    answers.forEach((a, i) => {
      const text = all[i]!;
      let milli: bigint | undefined;
      let unit: bigint | undefined;
      try {
        milli = parseMilli(text, 'q');
        unit = parseBytes(text, 'q');
      } catch {
        milli = undefined;
      }
      if (milli === undefined) return; // stricter than the API server is allowed (length, exponent bounds)
      assert.ok(a.ok, `the gateway accepts ${JSON.stringify(text)}, the API server does not: ${a.err}`);
      // The API server clamps what passes int64 and so would we never patch it; compare where it keeps the value.
      if (!a.milliFitsInt64 || !a.unitFitsInt64) return;
      assert.equal(milli.toString(), a.milli, `${text}: millis`);
      assert.equal(unit!.toString(), a.unit, `${text}: units`);
      compared += 1;
    });
    assert.ok(compared > 1000, `only ${compared} quantities compared`);
  });
});
