import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { noneAllocator, staticAllocator, type Allocator, type NodeShape } from '../../sim/allocators.js';
import { feasibleNodesToFind, runPolicy } from '../../sim/cluster.js';
import { parseScenario, rawAllocatable, type Scenario } from '../../sim/scenario.js';
import { buildWorkload } from '../../sim/workload.js';

const run = (s: Scenario, allocator: (shapes: NodeShape[]) => Allocator) => {
  const shapes = new Array<NodeShape>(s.nodes).fill({ raw: rawAllocatable(s), capacity: s.node.capacity, systemUsage: s.node.systemUsage });
  return runPolicy({ scenario: s, workload: buildWorkload(s), allocator: allocator(shapes), shapes, targets: { cpu: 0.6, memory: 0.8 }, seriesEverySteps: 1 });
};

describe('one policy over the workload', () => {
  it('the scheduler places what fits in allocatable and leaves the rest pending', () => {
    // 15.5 cores allocatable, pods of 4 cores: three fit, two wait.
    const s = parseScenario({ nodes: 1, hours: 0.1, classes: [{ name: 'big', requests: { cpu: '4', memory: '1Gi' }, replicasPerNode: { min: 5, max: 5 } }] });
    const none = run(s, noneAllocator);
    assert.deepEqual([none.series.placed.at(-1), none.series.pending.at(-1)], [3, 2]);
    const doubled = run(s, (shapes) => staticAllocator(shapes, { cpu: 2, memory: 1 }));
    assert.deepEqual([doubled.series.placed.at(-1), doubled.series.pending.at(-1)], [5, 0]);
    const fewPods = run(parseScenario({ node: { maxPods: 4 } }, s), (shapes) => staticAllocator(shapes, { cpu: 2, memory: 1 }));
    assert.deepEqual([fewPods.series.placed.at(-1), fewPods.series.pending.at(-1)], [4, 1], 'maxPods caps a node whatever its allocatable');
  });

  it('memory past the eviction threshold evicts pods, counted as hit, and the Deployment replaces them', () => {
    // Pods using 3x their memory requests, on a node that admits 1.5x its memory.
    const s = parseScenario({
      nodes: 1, hours: 0.5, usage: { scale: 3, memoryGrowth: { swing: 0 } },
      classes: [{ name: 'hog', requests: { cpu: '100m', memory: '4Gi' }, replicasPerNode: { min: 20, max: 20 } }],
    });
    const r = run(s, (shapes) => staticAllocator(shapes, { cpu: 1, memory: 1.5 }));
    assert.ok(r.podsHitByMemoryOverload > 0);
    assert.ok(r.memoryOverloadNodeSeconds > 0);
    assert.ok(r.riskNodeSeconds >= r.memoryOverloadNodeSeconds);
    assert.equal(run(s, noneAllocator).belowRequestsNodeSeconds, 0);
  });

  it('scores as many feasible nodes as kube-scheduler does before picking one', () => {
    assert.deepEqual([50, 100, 1000, 5000, 10_000].map(feasibleNodesToFind), [50, 100, 420, 500, 500]);
  });
});
