import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { decodeLoadHistory, encodeLoadHistory, MAX_ENCODED_BYTES, MAX_LOAD_FACTOR } from '../../../gateway/decide/load-history-codec.js';
import { LoadHistory, type LoadResource } from '../../../gateway/decide/load-history.js';

const HOUR = 3_600_000;
const SHARES = [0, 1e-6, 0.0001, 0.001, 0.01, 0.05, 0.1, 0.5, 0.9, 1];
const RESOURCES: LoadResource[] = ['cpu', 'memory'];

/** A history from (gap, cpu, memory) steps starting at startMs. */
function historyOf(startMs: number, steps: ReadonlyArray<readonly [number, number, number]>, halfLifeMs = 24 * HOUR): LoadHistory {
  const h = new LoadHistory(halfLifeMs);
  let t = startMs;
  for (const [gap, cpu, memory] of steps) h.record((t += gap), cpu, memory);
  return h;
}

function assertSame(a: LoadHistory, b: LoadHistory): void {
  assert.equal(b.spanMs(), a.spanMs());
  for (const r of RESOURCES) for (const s of SHARES) assert.equal(b.quantile(r, s), a.quantile(r, s), `${r} quantile at share ${s}`);
}

function decoded(bytes: Uint8Array): LoadHistory {
  const d = decodeLoadHistory(bytes);
  if ('error' in d) assert.fail(`refused: ${d.error}`);
  return d.history;
}

const refusal = (bytes: Uint8Array): string => {
  const d = decodeLoadHistory(bytes);
  assert.ok('error' in d, 'decoded where it should be refused');
  return d.error;
};

/** A day of 10 s samples: quiet nights, a noon peak, a few seconds over 2x. */
function aDay(): LoadHistory {
  const steps: Array<[number, number, number]> = [];
  for (let i = 0; i < 8640; i++) {
    const hour = (i / 360) % 24;
    steps.push([10_000, 0.2 + 0.5 * Math.exp(-((hour - 12) ** 2) / 8) + (i % 997 === 0 ? 2.3 : 0), 0.6 + 0.1 * Math.sin(i / 500)]);
  }
  return historyOf(1.7e12, steps);
}

describe('load history codec', () => {
  it('a day round-trips exactly: the same span and every quantile, in about 1 KiB', () => {
    const h = aDay();
    const bytes = encodeLoadHistory(h);
    assert.ok(bytes);
    assert.ok(bytes.length < 1500, `${bytes.length} bytes`);
    const back = decoded(bytes);
    assertSame(h, back);
    assert.ok(back.spanMs() > 23 * HOUR);
    // It goes on learning where it left off, as the original does.
    h.record(1.7e12 + 8641 * 10_000, 0.9, 0.9);
    back.record(1.7e12 + 8641 * 10_000, 0.9, 0.9);
    assertSame(h, back);
  });

  it('a history with no record has nothing to encode', () => {
    assert.equal(encodeLoadHistory(new LoadHistory(HOUR)), undefined);
  });

  it('round-trips any history, rescaled ones included (property)', () => {
    const step = fc.tuple(fc.integer({ min: 1, max: 3 * HOUR }), fc.double({ min: 0, max: 5, noNaN: true }), fc.double({ min: 0, max: 5, noNaN: true }));
    fc.assert(fc.property(
      fc.integer({ min: 0, max: 2e12 }), fc.array(step, { minLength: 1, maxLength: 300 }), fc.constantFrom(60_000, HOUR, 24 * HOUR),
      (start, steps, halfLife) => {
        const h = historyOf(start, steps, halfLife);
        const bytes = encodeLoadHistory(h);
        assert.ok(bytes && bytes.length <= MAX_ENCODED_BYTES);
        assertSame(h, decoded(bytes));
      },
    ), { numRuns: 300 });
  });

  it('the largest possible history (every bucket set) fits MAX_ENCODED_BYTES', () => {
    const steps: Array<[number, number, number]> = [];
    for (let b = 0; b <= 256; b++) steps.push([10_000, (b + 0.5) / 128, (256 - b + 0.5) / 128]);
    steps.push([10_000, 3, 3]);
    const bytes = encodeLoadHistory(historyOf(0, steps));
    assert.ok(bytes);
    assert.equal(bytes.length, MAX_ENCODED_BYTES);
    decoded(bytes);
  });

  it('refuses malformed entries, saying why', () => {
    const good = encodeLoadHistory(aDay())!;
    const f64 = (bytes: Uint8Array, field: number, value: number) => {
      const copy = bytes.slice();
      new DataView(copy.buffer).setFloat64(1 + 8 * field, value, true);
      return copy;
    };
    assert.match(refusal(new Uint8Array()), /empty/);
    assert.match(refusal(Uint8Array.from([2, ...good.subarray(1)])), /version 2, this gateway reads version 1/);
    assert.match(refusal(good.subarray(0, 50)), /truncated/);
    assert.match(refusal(good.subarray(0, good.length - 8)), /bitmaps name \d+ weights/);
    assert.match(refusal(new Uint8Array(MAX_ENCODED_BYTES + 1).fill(1)), /over the \d+ a load history can take/);
    assert.match(refusal(f64(good, 0, Number.NaN)), /half-life NaN/);
    assert.match(refusal(f64(good, 0, 1)), /half-life 1 ms/);
    assert.match(refusal(f64(good, 2, -5)), /times out of order or range/); // first before 0
    assert.match(refusal(f64(good, 3, 1e12)), /times out of order or range/); // last before first
    assert.match(refusal(f64(good, 3, 1.7e12 + 100 * 24 * HOUR)), /past the 40 half-lives/);
    assert.match(refusal(f64(good, 4, -1)), /total weight -1/);
    assert.match(refusal(f64(good, 4, Number.POSITIVE_INFINITY)), /total weight Infinity/);
    assert.match(refusal(f64(good, 5, 1.5)), /cpu overflow maximum 1.5/);
    assert.match(refusal(f64(good, 6, MAX_LOAD_FACTOR * 2)), /memory overflow maximum/);
    // A weight changed: the sums no longer agree with the total.
    const weight = good.slice();
    new DataView(weight.buffer).setFloat64(weight.length - 8, 1e9, true);
    assert.match(refusal(weight), /memory weights sum to/);
    const negative = good.slice();
    new DataView(negative.buffer).setFloat64(negative.length - 8, -1, true);
    assert.match(refusal(negative), /memory bucket \d+ has weight -1/);
  });

  it('a garbled entry is refused or decodes to a history within bounds, never throws (property)', () => {
    const good = encodeLoadHistory(aDay())!;
    const edit = fc.oneof(
      fc.tuple(fc.constant('flip' as const), fc.nat(), fc.integer({ min: 0, max: 7 })),
      fc.tuple(fc.constant('byte' as const), fc.nat(), fc.integer({ min: 0, max: 255 })),
      fc.tuple(fc.constant('cut' as const), fc.nat(), fc.constant(0)),
    );
    fc.assert(fc.property(fc.array(edit, { minLength: 1, maxLength: 6 }), (edits) => {
      let bytes = good.slice();
      for (const [kind, at, v] of edits) {
        const i = at % bytes.length;
        if (kind === 'flip') bytes[i]! ^= 1 << v;
        else if (kind === 'byte') bytes[i] = v;
        else bytes = bytes.slice(0, i);
        if (bytes.length === 0) break;
      }
      const d = decodeLoadHistory(bytes);
      if ('error' in d) {
        assert.ok(d.error.length > 0);
        return;
      }
      const span = d.history.spanMs();
      assert.ok(Number.isFinite(span) && span >= 0, `span ${span}`);
      for (const r of RESOURCES) {
        for (const s of SHARES) {
          const q = d.history.quantile(r, s);
          assert.ok(Number.isFinite(q) && q >= 0 && q <= MAX_LOAD_FACTOR, `${r} quantile ${q} at share ${s}`);
        }
      }
    }), { numRuns: 2000 });
    // Random bytes of any length, too.
    fc.assert(fc.property(fc.uint8Array({ maxLength: 5000 }), (bytes) => {
      const d = decodeLoadHistory(bytes);
      if (!('error' in d)) for (const r of RESOURCES) assert.ok(d.history.quantile(r, 0) <= MAX_LOAD_FACTOR);
    }), { numRuns: 500 });
  });
});
