import assert from 'node:assert/strict';
import { test } from 'node:test';
import { flushSoon, type Timers } from '../../../gateway/ingest/flush-soon.js';

/** Timers that only record: a test fires them by hand. */
function recordingTimers() {
  const pending = new Map<number, { fn: () => void; ms: number }>();
  let next = 1;
  let armedEver = 0;
  let cleared = 0;
  const timers: Timers = {
    setTimeout(fn, ms) {
      armedEver += 1;
      pending.set(next, { fn, ms });
      return next++;
    },
    clearTimeout(handle) {
      cleared += 1;
      pending.delete(handle as number);
    },
  };
  const fire = () => {
    const due = [...pending];
    pending.clear();
    for (const [, t] of due) t.fn();
  };
  return { timers, pending, fire, armedEver: () => armedEver, cleared: () => cleared };
}

/** A flusher on recording timers, and how many times it flushed. */
function counted() {
  const t = recordingTimers();
  let n = 0;
  const f = flushSoon(() => n++, 5, t.timers);
  return { t, f, flushes: () => n };
}

test('an idle thread arms no timer: nothing queued, nothing wakes it', () => {
  const { t, flushes } = counted();
  assert.equal(t.armedEver(), 0);
  assert.equal(flushes(), 0);
});

test('ops queued within one period share one timer and one flush, everyMs after the first', () => {
  const { t, f, flushes } = counted();
  f.soon();
  f.soon();
  f.soon();
  assert.equal(t.armedEver(), 1);
  assert.equal([...t.pending.values()][0]?.ms, 5);
  t.fire();
  assert.equal(flushes(), 1);
  // The next op after a flush arms a fresh timer.
  f.soon();
  assert.equal(t.armedEver(), 2);
  t.fire();
  assert.equal(flushes(), 2);
  assert.equal(t.pending.size, 0);
  assert.equal(t.cleared(), 0, 'a timer that fired is not cleared again');
});

test('now() flushes at once and disarms the timer, so the batch is not handed over twice', () => {
  const { t, f, flushes } = counted();
  f.soon();
  f.now();
  assert.equal(flushes(), 1);
  assert.equal(t.pending.size, 0);
  f.soon();
  assert.equal(t.pending.size, 1, 'an op after now() arms again');
});

test('stop() disarms without flushing: a closing thread leaves no timer behind', () => {
  const { t, f, flushes } = counted();
  f.soon();
  f.stop();
  assert.equal(t.pending.size, 0);
  assert.equal(flushes(), 0);
});

test('with the real timers, a queued op is flushed within a few periods', async () => {
  const flushed = new Promise<number>((resolve) => {
    const start = performance.now();
    flushSoon(() => resolve(performance.now() - start), 5).soon();
  });
  // Generous: a loaded CI machine delays timers; the bound is that it comes, not when.
  assert.ok((await flushed) < 1000);
});
