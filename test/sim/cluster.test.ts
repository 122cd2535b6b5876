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
    const s = parseScenario({ warmupHours: 0, nodes: 1, hours: 0.1, classes: [{ name: 'big', requests: { cpu: '4', memory: '1Gi' }, replicasPerNode: { min: 5, max: 5 } }] });
    const none = run(s, noneAllocator);
    assert.deepEqual([none.series.placed.at(-1), none.series.pending.at(-1)], [3, 2]);
    const doubled = run(s, (shapes) => staticAllocator(shapes, { cpu: 2, memory: 1 }));
    assert.deepEqual([doubled.series.placed.at(-1), doubled.series.pending.at(-1)], [5, 0]);
    const fewPods = run(parseScenario({ warmupHours: 0, node: { maxPods: 4 } }, s), (shapes) => staticAllocator(shapes, { cpu: 2, memory: 1 }));
    assert.deepEqual([fewPods.series.placed.at(-1), fewPods.series.pending.at(-1)], [4, 1], 'maxPods caps a node whatever its allocatable');
  });

  it('memory past the eviction threshold evicts pods, counted as hit, and the Deployment replaces them', () => {
    // Pods using 3x their memory requests, on a node that admits 1.5x its memory.
    const s = parseScenario({ warmupHours: 0,
      nodes: 1, hours: 0.5, usage: { scale: 3, memoryGrowth: { swing: 0 } },
      classes: [{ name: 'hog', requests: { cpu: '100m', memory: '4Gi' }, replicasPerNode: { min: 20, max: 20 } }],
    });
    const r = run(s, (shapes) => staticAllocator(shapes, { cpu: 1, memory: 1.5 }));
    assert.ok(r.podsHitByMemoryOverload > 0);
    assert.ok(r.memoryOverloadNodeSeconds > 0);
    assert.ok(r.riskNodeSeconds >= r.memoryOverloadNodeSeconds);
    assert.equal(run(s, noneAllocator).belowRequestsNodeSeconds, 0);
  });

  it('a pod uses nothing for startSeconds after it is bound, while its requests count at once', () => {
    const s = parseScenario({ warmupHours: 0,
      nodes: 1, hours: 0.05, usage: { startSeconds: 30 },
      classes: [{ name: 'app', requests: { cpu: '1', memory: '1Gi' }, replicasPerNode: { min: 4, max: 4 } }],
    });
    const seen: { memory: number; bound: number }[] = [];
    const watching = (shapes: NodeShape[]): Allocator => {
      const none = noneAllocator(shapes);
      const allocate: Allocator['allocate'] = (node, sample, out) => {
        seen.push({ memory: sample.memory, bound: sample.boundMemory });
        none.allocate(node, sample, out);
      };
      return { name: 'watch', kind: 'none', allocate };
    };
    run(s, watching);
    const system = s.node.systemUsage.memory;
    // Bound at the end of step 0: requests from step 1, usage only from step 1 + 3 (30 s of 10 s steps).
    assert.deepEqual(seen.slice(0, 5).map((x) => [x.bound / 2 ** 30, x.memory === system]), [[0, true], [4, true], [4, true], [4, true], [4, false]]);
    seen.length = 0;
    run(parseScenario({ warmupHours: 0, usage: { startSeconds: 0 } }, s), watching);
    assert.equal(seen[1]!.memory > system, true, 'without a start delay usage shows at the first sample after binding');
  });

  it('scores as many feasible nodes as kube-scheduler does before picking one', () => {
    assert.deepEqual([50, 100, 1000, 5000, 10_000].map(feasibleNodesToFind), [50, 100, 420, 500, 500]);
  });
});
