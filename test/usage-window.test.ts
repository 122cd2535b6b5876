import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { COLUMN, UsageWindow, type WindowPoint } from '../lib/usage/usage-window.js';

const pt = (timestampMs: number, cpuMillicores = timestampMs / 10): WindowPoint => ({
  timestampMs, cpuMillicores, memoryBytes: timestampMs * 2, cpuPressure: timestampMs % 7, memoryPressure: timestampMs % 3,
});

describe('UsageWindow', () => {
  it('keeps points in timestamp order, a late one placed where it belongs', () => {
    const w = UsageWindow.of([pt(1000), pt(3000), pt(4000)]);
    w.add(pt(2000));
    assert.deepEqual(w.points().map((p) => p.timestampMs), [1000, 2000, 3000, 4000]);
    assert.deepEqual(w.point(1), pt(2000));
    assert.equal(w.get(3, COLUMN.memoryBytes), 8000);
    assert.equal(w.newestMs(), 4000);
  });

  it('drops the points at or before a cut, and an emptied window starts over', () => {
    const w = UsageWindow.of([pt(1000), pt(2000), pt(3000)]);
    w.dropThrough(2000);
    assert.deepEqual(w.points(), [pt(3000)]);
    w.dropThrough(5000);
    assert.equal(w.length, 0);
    assert.equal(w.newestMs(), undefined);
    w.add(pt(6000));
    assert.deepEqual(w.points(), [pt(6000)]);
  });

  it('holds the same points as a sorted array through any run of adds and cuts (growth and compaction included)', () => {
    const step = fc.oneof(
      fc.record({ add: fc.integer({ min: 0, max: 500 }) }),
      fc.record({ cut: fc.integer({ min: 0, max: 500 }) }),
    );
    fc.assert(
      fc.property(fc.array(step, { maxLength: 400 }), (steps) => {
        const w = new UsageWindow();
        let oracle: WindowPoint[] = [];
        for (const s of steps) {
          if ('add' in s) {
            w.add(pt(s.add));
            // Stable: an equal timestamp goes after the ones already there.
            const at = oracle.findLastIndex((p) => p.timestampMs <= s.add) + 1;
            oracle.splice(at, 0, pt(s.add));
          } else {
            w.dropThrough(s.cut);
            oracle = oracle.filter((p) => p.timestampMs > s.cut);
          }
        }
        assert.deepEqual(w.points(), oracle);
      }),
      { numRuns: 500 },
    );
  });

  it('a steady minute of 1 Hz points settles at room for a quarter more, not double', () => {
    const w = new UsageWindow();
    const sizes = new Set<number>();
    for (let t = 1; t <= 600; t++) {
      w.dropThrough((t - 60) * 1000);
      w.add(pt(t * 1000));
      sizes.add(w.capacity);
    }
    assert.equal(w.length, 60);
    assert.ok(w.capacity >= 60 && w.capacity <= 80, `capacity ${w.capacity}`);
    // Once settled it stops growing: the last 500 adds only moved points to the front.
    assert.equal(Math.max(...sizes), w.capacity);
  });
});
