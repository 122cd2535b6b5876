// How much the gateway slows its agents (gateway/ingest/shed.ts): the pure
// step from measured loop delays to the interval announced, as tables.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { initialShedState, isShedding, sendingAt, shedLimits, shedStep, type LoopDelays, type ShedState } from '../../../gateway/ingest/shed.js';

// Calm 5 s, at most 20 s, overloaded over 50 ms (two periods in a row), calm under 25 ms.
const limits = shedLimits(5000, 20_000, 50);

/** Steps once per second from startMs through the delays given, under `lim` (default `limits`); the interval announced after each, and when the last step was. */
function run(delays: LoopDelays[], start?: ShedState, startMs = 0, lim = limits): { intervals: number[]; states: ShedState[]; endMs: number } {
  const states: ShedState[] = [];
  let s = start ?? initialShedState(lim, 0);
  delays.forEach((d, i) => {
    s = shedStep(s, d, startMs + (i + 1) * 1000, lim);
    states.push(s);
  });
  return { intervals: states.map((x) => x.sendEveryMs), states, endMs: startMs + delays.length * 1000 };
}
const main = (ms: number, n = 1): LoopDelays[] => Array.from({ length: n }, () => ({ mainMs: ms }));

describe('shedStep: the interval announced to agents', () => {
  it('calm: the base interval, nothing shed', () => {
    const { intervals, states } = run(main(3, 60));
    assert.deepEqual(new Set(intervals), new Set([5000]));
    assert.equal(states.filter((s) => isShedding(s, limits)).length, 0);
  });

  it('one pause (a collection, a large list) is not overload; two periods in a row are', () => {
    assert.deepEqual(run([...main(300), ...main(3, 5)]).intervals, [5000, 5000, 5000, 5000, 5000, 5000]);
    const { intervals, states } = run(main(80, 2));
    assert.deepEqual(intervals, [5000, 10_000], 'slowed at once on the second period');
    assert.equal(states[1]!.mainOverloaded, true);
  });

  it('long tasks on a mostly idle loop are not overload: one caller cannot make the gateway shed (issue 43, finding 4)', () => {
    // Two 1.5 MiB pod reviews a second: 80 ms of parsing each, the loop busy a
    // fifth of the time; its 99th percentile of delay is 80 ms all the same.
    const { intervals, states } = run(Array.from({ length: 30 }, () => ({ mainMs: 80, mainBusy: 0.2 })));
    assert.deepEqual(new Set(intervals), new Set([5000]), 'agents never slowed');
    assert.equal(states.some((s) => s.mainOverloaded), false, 'queries never refused');
    // A loop that cannot keep up is busy nearly all the time: that is overload.
    assert.deepEqual(run(Array.from({ length: 2 }, () => ({ mainMs: 80, mainBusy: 0.95 }))).intervals, [5000, 10_000]);
    // Busy but on time is not overload either.
    assert.deepEqual(run(Array.from({ length: 5 }, () => ({ mainMs: 3, mainBusy: 1 }))).intervals, [5000, 5000, 5000, 5000, 5000]);
  });

  it('doubles at most every 10 s while overloaded, up to the max and no further', () => {
    const { intervals } = run(main(80, 40));
    assert.equal(intervals[1], 10_000);
    assert.equal(intervals[10], 10_000, 'not again before agents heard the last');
    assert.equal(intervals[11], 20_000);
    assert.deepEqual(new Set(intervals.slice(11)), new Set([20_000]), 'capped at the max');
  });

  it('hysteresis: an overloaded thread stays so until under half the limit, and calm 30 s before each step down', () => {
    const overloaded = run(main(80, 12));
    const slowed = overloaded.states.at(-1)!;
    assert.equal(slowed.sendEveryMs, 20_000);
    // Between the two thresholds: still overloaded, nothing sped up.
    const between = run(main(40, 40), slowed, overloaded.endMs);
    assert.deepEqual(between.states.filter((s) => !s.mainOverloaded || s.sendEveryMs !== 20_000), [], 'overloaded at 20 s throughout');
    // Calm: queries are served at once, agents sped up one step per 30 s.
    const calm = run(main(5, 70), slowed, overloaded.endMs);
    assert.equal(calm.states[0]!.mainOverloaded, false);
    assert.equal(calm.intervals[28], 20_000);
    assert.equal(calm.intervals[29], 20_000);
    assert.equal(calm.intervals[30], 10_000, 'a step down after 30 s calm');
    assert.equal(calm.intervals[59], 10_000);
    assert.equal(calm.intervals[60], 5000, 'back at the base after another 30 s');
    assert.equal(isShedding(calm.states.at(-1)!, limits), false);
    assert.equal(isShedding(calm.states[30]!, limits), true, 'still shedding while agents are slowed');
  });

  it('a delay under the overload limit but over the calm one holds the interval: no further slowing, no step down', () => {
    const overloaded = run(main(80, 2));
    const { intervals } = run(main(30, 60), overloaded.states.at(-1)!, overloaded.endMs);
    assert.deepEqual(new Set(intervals), new Set([10_000]));
  });

  it('the ingest thread slows agents but refuses no queries', () => {
    const { states } = run([{ mainMs: 2, ingestMs: 90 }, { mainMs: 2, ingestMs: 90 }]);
    assert.equal(states[1]!.sendEveryMs, 10_000);
    assert.equal(states[1]!.ingestOverloaded, true);
    assert.equal(states[1]!.mainOverloaded, false);
  });

  it('a limit of 0 never sheds', () => {
    const off = shedLimits(5000, 20_000, 0);
    const s = run(Array.from({ length: 20 }, () => ({ mainMs: 5000, ingestMs: 5000 })), undefined, 0, off).states.at(-1)!;
    assert.equal(s.sendEveryMs, 5000);
    assert.equal(s.mainOverloaded, false);
  });

  it('a max at the base (agents without batches) refuses queries but never slows', () => {
    const fixed = shedLimits(5000, 5000, 50);
    const s = run(main(100, 20), undefined, 0, fixed).states.at(-1)!;
    assert.equal(s.sendEveryMs, 5000);
    assert.equal(s.mainOverloaded, true);
  });

  it('a base of 0 (every sample at once) is slowed to 1 s first, and comes back to 0', () => {
    const zero = shedLimits(0, 4000, 50);
    const slowed = run(main(100, 25), undefined, 0, zero);
    assert.deepEqual([slowed.intervals[1], slowed.intervals[11], slowed.intervals[21]], [1000, 2000, 4000]);
    assert.equal(run(main(1, 175), slowed.states.at(-1), slowed.endMs, zero).states.at(-1)!.sendEveryMs, 0);
  });
});

describe('sendingAt: what agents are told at an interval', () => {
  const base = { maxBatchSamples: 10, sendEveryMs: 5000 };
  it('the base as it is', () => assert.deepEqual(sendingAt(5000, base), { ...base, minSampleIntervalMs: 0 }));
  it('a batch grows with the interval, so it does not fill and go before its time', () => {
    assert.deepEqual(sendingAt(10_000, base), { maxBatchSamples: 20, sendEveryMs: 10_000, minSampleIntervalMs: 0 });
    assert.deepEqual(sendingAt(20_000, base), { maxBatchSamples: 40, sendEveryMs: 20_000, minSampleIntervalMs: 0 });
  });
  it('never past what the gateway accepts in one message (256)', () => assert.equal(sendingAt(600_000, base).maxBatchSamples, 256));
  it('no batches stays no batches', () => assert.deepEqual(sendingAt(20_000, { maxBatchSamples: 0, sendEveryMs: 5000 }), { maxBatchSamples: 0, sendEveryMs: 20_000, minSampleIntervalMs: 0 }));
  it('the sampling interval shed is said as it is', () => assert.equal(sendingAt(20_000, base, 4000).minSampleIntervalMs, 4000));
});

describe('shedStep: samples shed once sending is as seldom as allowed', () => {
  // Calm 5 s, at most 20 s, overloaded over 50 ms; samples shed up to every 4 s.
  const sampling = shedLimits(5000, 20_000, 50, 4000);
  const steps = (delayMs: number, n: number, from: ShedState, fromMs: number) => run(main(delayMs, n), from, fromMs, sampling).states;

  it('no sample is shed while sending can still slow; then every 2 s, then 4 s, and no further', () => {
    const over = steps(80, 60, initialShedState(sampling, 0), 0);
    const at = (sec: number) => [over[sec - 1]!.sendEveryMs, over[sec - 1]!.sampleEveryMs];
    assert.deepEqual(at(2), [10_000, 0], 'first: send less often');
    assert.deepEqual(at(12), [20_000, 0], 'the longest send interval');
    assert.deepEqual(at(22), [20_000, 2000], 'still overloaded 10 s later: every other sample');
    assert.deepEqual(at(32), [20_000, 4000]);
    assert.deepEqual(at(60), [20_000, 4000], 'capped at --shed-max-sample-every');
    assert.equal(over.filter((s) => s.sampleEveryMs > 0 && s.sendEveryMs < 20_000).length, 0, 'samples are shed only at the longest send interval');
  });

  it('calm: every sample again first, step by step, then timely sending; shedding until both are back', () => {
    const slowed = steps(80, 40, initialShedState(sampling, 0), 0).at(-1)!;
    assert.deepEqual([slowed.sendEveryMs, slowed.sampleEveryMs], [20_000, 4000]);
    const calm = steps(5, 150, slowed, 40_000);
    const at = (sec: number) => [calm[sec - 1]!.sendEveryMs, calm[sec - 1]!.sampleEveryMs];
    assert.deepEqual(at(30), [20_000, 4000]);
    assert.deepEqual(at(31), [20_000, 2000], 'a step down after 30 s calm: samples first');
    assert.deepEqual(at(61), [20_000, 0], 'every sample again');
    assert.deepEqual(at(91), [10_000, 0], 'then sending');
    assert.deepEqual(at(121), [5000, 0]);
    assert.equal(isShedding(calm[60]!, sampling), true, 'agents still slowed');
    assert.equal(isShedding(calm[120]!, sampling), false);
  });

  it('a max of 0 never sheds samples', () => {
    const never = shedLimits(5000, 20_000, 50, 0);
    const s = run(main(80, 100), undefined, 0, never).states.at(-1)!;
    assert.deepEqual([s.sendEveryMs, s.sampleEveryMs], [20_000, 0]);
  });

  it('agents without batches (max send interval at the base) are shed samples directly', () => {
    const noBatches = shedLimits(0, 0, 50, 4000);
    const seen = run(main(80, 25), undefined, 0, noBatches).states.map((s) => s.sampleEveryMs);
    assert.deepEqual([seen[1], seen[11], seen[21]], [2000, 4000, 4000]);
  });
});
