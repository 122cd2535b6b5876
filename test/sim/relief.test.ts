import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { DEFAULT_RELIEF } from '../../gateway/decide/relief.js';
import { staticAllocator, type Allocator, type NodeShape } from '../../sim/allocators.js';
import { runPolicy } from '../../sim/cluster.js';
import { NodeRelief, type ReliefSubject } from '../../sim/relief.js';
import { parseScenario, rawAllocatable, type Scenario } from '../../sim/scenario.js';
import { buildWorkload } from '../../sim/workload.js';

const GiB = 1024 ** 3;
const CAPACITY = 64 * GiB;
const subject = (order: number, usage: number, request: number, o: Partial<ReliefSubject> = {}): ReliefSubject & { name: string } => ({
  name: `p${order}`, order, usage: usage * GiB, request: request * GiB, priority: 0, qos: 'Burstable', protected: false, boundAt: 0, ...o,
});

describe("oversell's relief in the simulator", () => {
  it('never takes a protected pod, and takes just enough to bring the node under the calm line', () => {
    const relief = new NodeRelief(1, DEFAULT_RELIEF, 60_000, 10_000);
    const pods = [
      subject(0, 20, 4, { protected: true, priority: 2_000_000_000 }), // the most over its requests, but protected
      subject(1, 12, 8, { protected: true, qos: 'Guaranteed' }),
      subject(2, 6, 4),
      subject(3, 5, 4),
      subject(4, 9, 8, { priority: 1000 }),
      subject(5, 0, 4), // still starting: frees nothing
    ];
    const used = pods.reduce((a, p) => a + p.usage, 0) + 10 * GiB; // 62 GiB: past 0.95 x 64 = 60.8
    const victims = relief.plan(0, 0, used, CAPACITY, pods);
    // To the calm line, 57.6 GiB: 4.4 GiB to free. p2 (2 GiB over, priority 0) frees 6: enough.
    assert.deepEqual(victims.map((v) => v.name), ['p2']);
    assert.ok(victims.every((v) => !v.protected));
    const freed = victims.reduce((a, v) => a + v.usage, 0);
    assert.ok(used - freed <= 0.9 * CAPACITY, 'under the calm line');
    assert.ok(used - freed + victims.at(-1)!.usage > 0.9 * CAPACITY, 'one victim fewer would not have been');
  });

  it('with only protected pods to take, takes none; under the relief line, takes none and does not hold', () => {
    const relief = new NodeRelief(2, DEFAULT_RELIEF, 60_000, 10_000);
    assert.deepEqual(relief.plan(0, 0, 62 * GiB, CAPACITY, [subject(0, 30, 4, { protected: true }), subject(1, 20, 20, { protected: true })]), []);
    assert.equal(relief.held[0], 1, 'past the line: held even with nothing to relieve');
    assert.deepEqual(relief.plan(1, 0, 60 * GiB, CAPACITY, [subject(0, 30, 4)]), []);
    assert.equal(relief.held[1], 0);
  });

  it('at most two evictions per node per minute, then holds the node until it has been calm for the calm period', () => {
    const relief = new NodeRelief(1, DEFAULT_RELIEF, 30_000, 10_000);
    const pods = [1, 2, 3, 4, 5].map((k) => subject(k, 1, 1));
    assert.equal(relief.plan(0, 0, 63 * GiB, CAPACITY, pods).length, 2, 'five wanted, two allowed');
    assert.equal(relief.plan(0, 3, 63 * GiB, CAPACITY, pods).length, 0, 'the same minute');
    assert.equal(relief.plan(0, 6, 63 * GiB, CAPACITY, pods).length, 2, 'a minute later');
    const calm = 50 * GiB;
    assert.deepEqual([7, 8, 9, 10].map((t) => relief.holds(0, t, t === 8 ? 58 * GiB : calm, CAPACITY)), [true, true, true, true], 'calm from step 9 only');
    assert.equal(relief.holds(0, 11, calm, CAPACITY), false, 'three calm samples: 30 s');
  });
});

describe('relief in a run', () => {
  // One node, pods using half their 4 GiB requests under a 1.5x memory ratio:
  // 23 pods, 47.5 GiB used with the system's. From hour 0.2 usage is 1.3x: about
  // 61.3 GiB, past the relief line (60.8 GiB), below the kubelet's threshold (63.9 GiB).
  const s: Scenario = parseScenario({
    warmupHours: 0, nodes: 1, hours: 0.5,
    usage: { memorySlack: 0.5, cpuSlack: 0.5, concentration: 1000, memoryGrowth: { swing: 0 }, diurnal: { memorySwing: 0, cpuSwing: 0 }, bursts: { share: 0 }, step: { atHour: 0.2, factor: 1.3 } },
    classes: [{ name: 'app', requests: { cpu: '100m', memory: '4Gi' }, replicasPerNode: { min: 40, max: 40 } }],
  });
  const shapes: NodeShape[] = [{ raw: rawAllocatable(s), capacity: s.node.capacity, systemUsage: s.node.systemUsage }];
  const relieving = (calmPeriodMs: number) => (): Allocator => ({ ...staticAllocator(shapes, { cpu: 1, memory: 1.5 }), relief: { policy: DEFAULT_RELIEF, calmPeriodMs } });
  const run = (make: () => Allocator) => runPolicy({ scenario: s, workload: buildWorkload(s), allocator: make(), shapes, targets: { cpu: 0.6, memory: 0.8 }, seriesEverySteps: 1 });

  it('evicts unprotected pods before the kubelet or the kernel must, counts them as relieved and as risk', () => {
    const r = run(relieving(600_000));
    assert.ok(r.podsRelieved >= 2, `relieved ${r.podsRelieved}`);
    assert.equal(r.protectedPodsRelieved, 0);
    assert.equal(r.protectedPodsHit, 0);
    assert.equal(r.podsHitByMemoryOverload, 0, 'the kubelet and the kernel had nothing to do');
    assert.ok(r.reliefNodeSeconds > 0 && r.riskNodeSeconds >= r.reliefNodeSeconds, 'relief counts as risk');
    const without = run(() => staticAllocator(shapes, { cpu: 1, memory: 1.5 }));
    assert.equal(without.podsRelieved, 0, 'no relief but oversell\'s');
    assert.equal(without.heldNodeSeconds, 0);
  });

  it('an evicted pod is not placed back on the hot node while it is held; once calm, it is', () => {
    const step = Math.round((0.2 * 3600) / s.tickSeconds);
    const held = run(relieving(600_000)); // 60 steps of calm before the hold ends
    const placedBefore = held.series.placed[step - 1]!;
    const during = held.series.placed.slice(step + 1, step + 55);
    // The replacements wait, though the node is under its calm line and its inflated allocatable has room.
    assert.deepEqual([...new Set(during)], [placedBefore - 2], `placed ${placedBefore} before, then ${[...new Set(during)].join(', ')}: two relieved and not replaced`);
    assert.ok(held.series.pending.slice(step + 1, step + 55).every((p) => p >= 2), 'the evicted pods wait');
    assert.equal(Math.max(...held.series.placed.slice(step + 55)), placedBefore, 'once calm for the calm period, the node takes them back');
    // Without the hold (a calm period of one sample), they are placed straight back and relieved again: the loop the hold prevents.
    const short = run(relieving(10_000));
    assert.equal(short.series.placed[step + 3], placedBefore, 'straight back');
    assert.ok(short.podsRelieved > held.podsRelieved, `relieved again: ${short.podsRelieved} against ${held.podsRelieved}`);
  });
});
