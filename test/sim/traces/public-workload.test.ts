import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { GapCounter, peak, type Recorded, recorded, resample, samplingInterval, SeriesBuilder, usageAt } from '../../../sim/traces/public-workload.js';

// Samples at 0, 300, 600, 900 s holding 300 s each: the pod runs [0, 1200).
const series = (rows: [number, number, number][], origin = 0): Recorded => {
  const b = new SeriesBuilder();
  for (const [t, c, m] of rows) b.add(t, c, m);
  return recorded(b.build(origin), 300);
};
const pod = series([[0, 500, 10], [300, 1000, 20], [600, 2000, 30], [900, 1500, 5]]);

describe('the public workload model', () => {
  it('sorts samples out of time order and keeps one per time with the higher of each resource', () => {
    const b = new SeriesBuilder();
    for (const [t, c, m] of [[1300, 1, 9], [1000, 5, 1], [1300, 4, 2], [1600, 2, 2]] as const) b.add(t, c, m);
    const s = b.build(1000);
    assert.deepEqual([...s.t], [0, 300, 600]);
    assert.deepEqual([...s.cpu], [5, 4, 2]);
    assert.deepEqual([...s.memory], [1, 9, 2]);
    assert.equal(b.unordered, true);
    assert.equal(b.duplicates, 1);
  });

  it('usage at a time holds the last sample at or before it, and is zero outside the pod\'s life', () => {
    assert.deepEqual(usageAt(pod, 0), { cpu: 500, memory: 10 });
    assert.deepEqual(usageAt(pod, 299.9), { cpu: 500, memory: 10 });
    assert.deepEqual(usageAt(pod, 300), { cpu: 1000, memory: 20 });
    assert.deepEqual(usageAt(pod, 1199), { cpu: 1500, memory: 5 }, 'the last sample holds one interval');
    assert.deepEqual(usageAt(pod, 1200), { cpu: 0, memory: 0 });
    assert.deepEqual(usageAt(pod, -1), { cpu: 0, memory: 0 });
    assert.deepEqual(peak(pod), { cpu: 2000, memory: 30 });
  });

  it('resamples to a coarser grid by the peak of each step, never hiding one', () => {
    const r = resample(pod, 0, 600, 3);
    assert.deepEqual([...r.cpu], [1000, 2000, 0]);
    assert.deepEqual([...r.memory], [20, 30, 0]);
  });

  it('resamples to a finer grid by repeating each sample, zero before the start and after the end', () => {
    const late = series([[600, 7, 1], [900, 9, 2]]);
    const r = resample(late, 0, 150, 12);
    assert.deepEqual([...r.cpu], [0, 0, 0, 0, 7, 7, 9, 9, 0, 0, 0, 0]);
    // A grid not aligned with the samples: [500, 700) sees the start at 600, [700, 900) still 600's sample,
    // [1100, 1300) the last sample until the end at 1200, [1300, 1500) nothing.
    assert.deepEqual([...resample(late, 500, 200, 5).cpu], [7, 7, 9, 9, 0]);
  });

  it('resamples an empty series to zeros and refuses a grid that is not one', () => {
    assert.deepEqual([...resample(recorded(new SeriesBuilder().build(0), 10), 0, 10, 2).cpu], [0, 0]);
    assert.throws(() => resample(pod, 0, 0, 2), /need a positive step/);
    assert.throws(() => resample(pod, 0, 10, 1.5), /whole number of steps/);
  });

  it('takes the most common gap as the sampling interval, or says what to give when there is none', () => {
    const gaps = new GapCounter();
    gaps.addSeries(pod.usage);
    gaps.addSeries(series([[0, 1, 1], [10, 1, 1]]).usage);
    assert.equal(samplingInterval('bitbrains', gaps, undefined), 300);
    assert.equal(samplingInterval('bitbrains', gaps, 60), 60);
    assert.throws(() => samplingInterval('bitbrains', new GapCounter(), undefined), /^TraceFormatError: bitbrains: every series has a single sample, so the sampling interval is unknown: give sampleSeconds$/);
    assert.throws(() => samplingInterval('alibaba-2018', gaps, 0), /sampleSeconds must be a positive number/);
  });
});
