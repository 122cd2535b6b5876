import assert from 'node:assert/strict';
import { test } from 'node:test';
import { flushSoon, type Timers } from '../../../gateway/ingest/flush-soon.js';

/** Timers that only record: a test fires them by hand. */
function recordingTimers() {
  const pending = new Map<number, { fn: () => void; ms: number }>();
  let next = 1;
  let armedEver = 0;
  let cleared = 0;
  let clock = 0;
  const timers: Timers = {
    now: () => clock,
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
  return { timers, pending, fire, armedEver: () => armedEver, cleared: () => cleared, advance: (ms: number) => (clock += ms) };
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

test('an op that may wait longer waits longer; one that may not brings the hand-over forward, never back', () => {
  const t = recordingTimers();
  let n = 0;
  const f = flushSoon(() => n++, 50, t.timers);
  f.soon(500); // a summary on its agent's beat
  assert.deepEqual([...t.pending.values()].map((p) => p.ms), [500]);
  t.advance(100);
  f.soon(); // a rise, sent at once: within 50 ms, not the 400 left
  assert.deepEqual([...t.pending.values()].map((p) => p.ms), [50]);
  assert.equal(t.cleared(), 1);
  f.soon(500); // another beat: the earlier hand-over stands
  f.soon();
  assert.deepEqual([...t.pending.values()].map((p) => p.ms), [50]);
  assert.equal(t.armedEver(), 2);
  t.fire();
  assert.equal(n, 1, 'one hand-over for all four');
  f.soon(500);
  assert.deepEqual([...t.pending.values()].map((p) => p.ms), [500], 'after a flush, the next op arms its own wait');
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
