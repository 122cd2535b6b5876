import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import {
  formatBytes, formatMilli, formatQuantity, milliValue, parseQuantity, QuantityError, value,
} from '../lib/quantity.js';

// Expected canonical forms are the API server's (resource.Quantity.String()),
// taken from k8s.io/apimachinery/pkg/api/resource quantity_test.go cases.
const CANONICAL: Array<[string, string]> = [
  ['0', '0'],
  ['7910m', '7910m'],
  ['8000m', '8'],
  ['1.5', '1500m'],
  ['0.1', '100m'],
  ['.5', '500m'],
  ['1.', '1'],
  ['+2', '2'],
  ['-0.5', '-500m'],
  ['2e3', '2e3'],
  ['1.5e3', '1500'],
  ['1E3', '1e3'],
  ['1000', '1k'],
  ['1500', '1500'],
  ['500M', '500M'],
  ['1G', '1G'],
  ['1E', '1E'],
  ['100u', '100u'],
  ['0.0001', '100u'],
  ['1n', '1n'],
  ['0.0000000001', '1n'], // rounded up to the API server's nano precision
  ['1Gi', '1Gi'],
  ['1024Ki', '1Mi'],
  ['3778260Ki', '3778260Ki'],
  ['1.5Gi', '1536Mi'],
  ['0.5Ki', '512'], // binary below 1024 falls back to decimal
  ['1536', '1536'],
  ['1Ei', '1Ei'],
  ['1e-3', '1e-3'],
];

describe('parseQuantity / formatQuantity', () => {
  for (const [input, canonical] of CANONICAL) {
    it(`${input} is stored as ${canonical}`, () => {
      assert.equal(formatQuantity(parseQuantity(input)), canonical);
    });
  }

  it('reads exact milli and unit values without float drift', () => {
    assert.equal(milliValue(parseQuantity('7910m')), 7910n);
    assert.equal(milliValue(parseQuantity('0.1')), 100n);
    assert.equal(milliValue(parseQuantity('2e3')), 2_000_000n);
    assert.equal(value(parseQuantity('3778260Ki')), 3778260n * 1024n);
    assert.equal(value(parseQuantity('500M')), 500_000_000n);
    assert.equal(value(parseQuantity('1Gi')), 1073741824n);
    // 0.1 + 0.2 style drift would show here
    assert.equal(milliValue(parseQuantity('0.3')), 300n);
    // Binary quantities are capped at int64 units by the API server's parser; decimal ones are not.
    assert.equal(value(parseQuantity('16Ei')), 2n ** 63n - 1n);
    assert.equal(formatQuantity(parseQuantity('8Ei')), '9223372036854775807');
    assert.equal(value(parseQuantity('16E')), 16n * 10n ** 18n);
  });

  it('rounds up to whole milli and whole units like MilliValue()/Value()', () => {
    assert.equal(milliValue(parseQuantity('1u')), 1n);
    assert.equal(milliValue(parseQuantity('1500u')), 2n);
    assert.equal(value(parseQuantity('1500m')), 2n);
    assert.equal(value(parseQuantity('-1500m')), -2n);
  });

  for (const bad of ['', ' 1', '1 ', '1.2.3', 'abc', '1Kb', '1ki', '1e', '--1', '1e1000', '.', '1i', 'Infinity', 'NaN', '0x10', '1_000', 'x'.repeat(65)]) {
    it(`refuses ${JSON.stringify(bad)} with a QuantityError`, () => {
      assert.throws(() => parseQuantity(bad), QuantityError);
    });
  }

  it('refuses non-strings with a QuantityError, not a TypeError', () => {
    for (const v of [1, null, undefined, {}, []]) {
      assert.throws(() => parseQuantity(v as unknown as string), QuantityError);
    }
  });

  it('formats cpu millicores and memory bytes canonically', () => {
    assert.equal(formatMilli(15820n), '15820m');
    assert.equal(formatMilli(4000), '4');
    assert.equal(formatMilli(0), '0');
    assert.equal(formatBytes(3778260n * 1024n), '3778260Ki');
    assert.equal(formatBytes(1_500_000_000), '1500M');
    assert.equal(formatBytes(34359738368n), '32Gi');
  });

  it('canonical output is a fixed point: parse(format(q)) formats to the same string with the same value', () => {
    const suffix = fc.constantFrom('', 'n', 'u', 'm', 'k', 'M', 'G', 'T', 'Ki', 'Mi', 'Gi', 'Ti', 'e3', 'e-3', 'E', 'e0');
    const text = fc
      .tuple(fc.constantFrom('', '-', '+'), fc.bigInt({ min: 0n, max: 10n ** 15n }), fc.option(fc.stringMatching(/^[0-9]{1,6}$/)), suffix)
      .map(([s, whole, frac, suf]) => `${s}${whole}${frac === null ? '' : `.${frac}`}${suf}`);
    fc.assert(
      fc.property(text, (t) => {
        const q = parseQuantity(t);
        const once = formatQuantity(q);
        const again = parseQuantity(once);
        assert.equal(again.nanos, q.nanos, `${t} -> ${once} changed value`);
        const twice = formatQuantity(again);
        // As in Go's CanonicalizeBytes: a binary quantity that is no multiple of
        // 1024 prints as a bare integer, which reads back as decimal; the decimal
        // form is then the fixed point (formatBytes never emits the bare form).
        const bareFromBinary = q.format === 'BinarySI' && /^-?[0-9]+$/.test(once);
        if (!bareFromBinary) assert.equal(twice, once, `${t} -> ${once} is not stable`);
        assert.equal(formatQuantity(parseQuantity(twice)), twice, `${t} -> ${once} -> ${twice} is not stable`);
        assert.equal(parseQuantity(twice).nanos, q.nanos, `${t} -> ${twice} changed value`);
      }),
      { numRuns: 2000 },
    );
  });

  it('formatBytes and formatMilli round-trip every integer', () => {
    fc.assert(
      fc.property(fc.bigInt({ min: 0n, max: 2n ** 62n }), (n) => {
        assert.equal(value(parseQuantity(formatBytes(n))), n);
        assert.equal(milliValue(parseQuantity(formatMilli(n))), n);
        // What we write is what the API server stores: re-reading changes nothing.
        assert.equal(formatQuantity(parseQuantity(formatBytes(n))), formatBytes(n));
        assert.equal(formatQuantity(parseQuantity(formatMilli(n))), formatMilli(n));
      }),
      { numRuns: 2000 },
    );
  });
});
