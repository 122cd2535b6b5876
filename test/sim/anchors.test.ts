import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { NodeSample, NodeShape, PodRef } from '../../sim/allocators.js';
import { craneAllocator, koordinatorAllocator, peakPredictorAllocator } from '../../sim/anchors.js';
import type { PodProfile } from '../../sim/workload.js';

const GiB = 1024 ** 3;
const MiB = 1024 ** 2;
const shape: NodeShape = { raw: { cpu: 8000, memory: 30 * GiB }, capacity: { cpu: 16_000, memory: 32 * GiB }, systemUsage: { cpu: 200, memory: GiB } };
const sample = (o: Partial<NodeSample>): NodeSample => ({
  tMs: 0, cpu: 0, memory: 0, boundCpu: 0, boundMemory: 0, newestPodAgeMs: Infinity, cpuPressure: 0, memoryPressure: 0, serviceCpu: 0, serviceMemory: 0, ...o,
});
const profile = (requestCpu: number, requestMemory: number, runSteps: number): PodProfile => ({
  classIndex: 0, requestCpu, requestMemory, cpuShare: 0.5, memoryShare: 0.5, key: 1, memoryPhase: 0, runSteps, peakCpu: 0, peakMemory: 0, cpuBase: 0, memoryBase: 0,
});
const pod = (id: number, p: PodProfile): PodRef => ({ id, profile: p, boundAt: 0 });
type Allocate = { allocate(n: number, s: NodeSample, out: { cpu: number; memory: number }): void };
const allocate = (a: Allocate, s: NodeSample) => {
  const out = { cpu: -1, memory: -1 };
  a.allocate(0, s, out);
  return out;
};

describe('the anchors, as published', () => {
  it('koordinator: batch = capacity x threshold - max(system, reserved) - high-priority usage, from a 60 s metric, written past 10 % or after 300 s', () => {
    const k = koordinatorAllocator([shape], { cpuThreshold: 0.6, memoryThreshold: 0.65 }, { cpu: 500, memory: 2 * GiB }, 10);
    // 16000 x 0.6 - max(200, 500) - 3000 = 6100; memory 32Gi x 0.65 - max(1Gi, 2Gi) - 8Gi.
    const memoryPool = Math.floor(32 * GiB * 0.65 - 2 * GiB - 8 * GiB);
    assert.deepEqual(allocate(k, sample({ serviceCpu: 3000, serviceMemory: 8 * GiB })), { cpu: 8000 + 6100, memory: 30 * GiB + memoryPool });
    for (let t = 1; t < 6; t++) assert.equal(allocate(k, sample({ serviceCpu: 0, serviceMemory: 8 * GiB })).cpu, 14_100, 'between metrics, nothing moves');
    assert.equal(allocate(k, sample({ serviceCpu: 3300, serviceMemory: 8 * GiB })).cpu, 14_100, '5800 is within 10 % of 6100: not written');
    for (let t = 7; t < 12; t++) allocate(k, sample({ serviceCpu: 3300, serviceMemory: 8 * GiB }));
    assert.equal(allocate(k, sample({ serviceCpu: 5000, serviceMemory: 8 * GiB })).cpu, 8000 + 4100, 'a 33 % move is written');
    for (let t = 13; t < 42; t++) allocate(k, sample({ serviceCpu: 5050, serviceMemory: 8 * GiB }));
    assert.equal(allocate(k, sample({ serviceCpu: 5050, serviceMemory: 8 * GiB })).cpu, 8000 + 4050, '300 s after the last write, any change is written');

    // High-priority pods fit against raw, batch pods against the pool, each apart.
    const fits = k.placement!;
    const job = profile(4050, GiB, 60);
    assert.equal(fits.fits(0, job, 42), true);
    assert.equal(fits.fits(0, profile(4051, GiB, 60), 42), false);
    fits.bound(0, pod(1, profile(8000, 30 * GiB, 0)), 42);
    assert.equal(fits.fits(0, job, 42), true, 'raw full of high-priority requests: the batch pool is untouched');
    assert.equal(fits.fits(0, profile(1, 1, 0), 42), false, 'raw is full');
    fits.bound(0, pod(2, job), 42);
    assert.equal(fits.belowRequests!(0), false);
    fits.bound(0, pod(3, profile(10, 1, 60)), 42);
    assert.equal(fits.belowRequests!(0), true, 'batch requests past the pool');
    fits.removed(0, pod(3, profile(10, 1, 60)), 43);
    assert.equal(fits.belowRequests!(0), false);
  });

  it('crane: elastic = raw x (1 - reserve) - max(usage it cannot reclaim, forecast), every 20 s, changes of 10 % or less skipped', () => {
    const c = craneAllocator([shape], { cpuReserve: 0.1, memoryReserve: 0, forecastPercentile: 0.5, forecastWindowMinutes: 3 }, 10);
    const at = (serviceCpu: number) => allocate(c, sample({ serviceCpu, serviceMemory: 4 * GiB })).cpu - 8000;
    // 8000 x 0.9 - max(1800 + 200, forecast 2000) = 5200.
    assert.equal(at(1800), 5200);
    assert.equal(at(800), 5200, 'not a refresh step');
    assert.equal(at(800), 5200, 'usage 1000, but the forecast (2000) is higher');
    for (let t = 3; t < 6; t++) at(800);
    // A minute: history [2000, 6000], median (nearest rank) 2000; usage 6000 wins: 7200 - 6000.
    assert.equal(at(5800), 1200);
    at(5900);
    assert.equal(at(5900), 1200, '1100 is within 10 % of 1200: skipped');
    // Memory: 30Gi x 1 - max(4Gi + 1Gi, forecast 5Gi).
    assert.equal(allocate(c, sample({ serviceCpu: 5900, serviceMemory: 4 * GiB })).memory, 30 * GiB + 25 * GiB);
  });

  it('peak predictor: allocatable = bound + capacity - max(mean + N x sd of node usage, sum of per-pod percentiles)', () => {
    const p = peakPredictorAllocator([shape], { n: 2, percentile: 1, windowMinutes: 60 }, 100 * MiB, 10);
    // One sample of 1000: N-sigma 1000; no pods: 200 (the system). Memory: 32Gi - 100Mi - 2Gi.
    assert.deepEqual(allocate(p, sample({ cpu: 1000, memory: 2 * GiB })), { cpu: 15_000, memory: 32 * GiB - 100 * MiB - 2 * GiB });
    // 1000, 3000: mean 2000, sd 1000: 2000 + 2 x 1000.
    assert.equal(allocate(p, sample({ cpu: 3000, memory: 2 * GiB })).cpu, 16_000 - 4000);
    // A pod bound: counted at its requests (6000) until its usage is seen; 200 + 6000 beats N-sigma.
    const web = pod(7, profile(6000, GiB, 0));
    p.observer!.bound(0, web);
    assert.equal(allocate(p, sample({ cpu: 2000, memory: 2 * GiB, boundCpu: 6000 })).cpu, 6000 + 16_000 - 6200);
    // Seen at 1500: pods 1700; N-sigma of 1000, 3000, 2000, 2000: 2000 + 2 x sqrt(500000).
    p.observer!.pod(0, web, 1500, GiB / 2, 4);
    assert.equal(allocate(p, sample({ cpu: 2000, memory: 2 * GiB, boundCpu: 6000 })).cpu, Math.floor(6000 + 16_000 - (2000 + 2 * Math.sqrt(500_000))));
    p.observer!.removed(0, web);
    assert.equal(allocate(p, sample({ cpu: 2000, memory: 2 * GiB })).cpu, Math.floor(16_000 - (2000 + 2 * Math.sqrt(0.4 * 1e6))), 'gone: only N-sigma remains');
  });
});
