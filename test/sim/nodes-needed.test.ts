import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { katalystAllocator, noneAllocator, oversellAllocator, policyEntry, staticAllocator, DEFAULT_OVERSELL, type Allocator, type NodeShape } from '../../sim/allocators.js';
import { runPolicy } from '../../sim/cluster.js';
import { limitAllocator } from '../../sim/limit.js';
import { nodesNeeded } from '../../sim/nodes-needed.js';
import { parseScenario, rawAllocatable } from '../../sim/scenario.js';
import { simulate } from '../../sim/simulate.js';
import { buildWorkload } from '../../sim/workload.js';

// The workload of 6 nodes around its daily peak, run on other node counts.
const s = parseScenario({ warmupHours: 0, nodes: 6, hours: 3, tickSeconds: 30, usage: { diurnal: { peakHour: 2 } } });
const workload = buildWorkload(s);
const shapesOf = (k: number): NodeShape[] => new Array(k).fill({ raw: rawAllocatable(s), capacity: s.node.capacity, systemUsage: s.node.systemUsage });
const waiting = (k: number, make: (sh: NodeShape[]) => Allocator) => {
  const sh = shapesOf(k);
  return runPolicy({ scenario: s, workload, allocator: make(sh), shapes: sh, targets: { cpu: 0.6, memory: 0.8 }, seriesEverySteps: 1 }).peakPending;
};
const policies: [string, (sh: NodeShape[]) => Allocator][] = [
  ['none', noneAllocator],
  ['static', (sh) => staticAllocator(sh, s.policies.static)],
  ['katalyst', (sh) => katalystAllocator(sh, s.policies.katalyst)],
  ['limit', (sh) => limitAllocator(sh, s, workload)],
  ['oversell', (sh) => oversellAllocator(sh, policyEntry(DEFAULT_OVERSELL))],
];

describe('nodes needed', () => {
  it('the search returns the fewest nodes that fit, for any threshold, starting above or below it', () => {
    for (const need of [1, 2, 7, 64, 100, 101, 399]) {
      for (const start of [1, 50, 100, 400]) {
        const r = nodesNeeded((k) => k >= need, start, 400);
        assert.equal(r.nodes, need, `need ${need} from ${start}`);
        assert.ok(r.probes.length <= 2 * Math.log2(400) + 2, `${r.probes.length} probes`);
      }
    }
    assert.equal(nodesNeeded((k) => k >= 500, 100, 400).nodes, undefined, 'past the maximum: not found');
  });

  it('more nodes never leave more pods waiting, for each policy on the same workload', () => {
    for (const [name, make] of policies) {
      let before = Infinity;
      for (let k = 3; k <= 12; k++) {
        const w = waiting(k, make);
        assert.ok(w <= before, `${name}: ${w} waiting on ${k} nodes, ${before} on ${k - 1}`);
        before = w;
      }
      // Katalyst's formula drops allocatable below raw once usage passes its target: it needs more than 12.
      if (name !== 'katalyst') assert.equal(before, 0, `${name}: 12 nodes are enough`);
    }
  });

  it('each policy\'s result is the minimum: no pod waits on that many nodes, some do on one fewer', () => {
    const r = simulate(s, undefined, undefined, { nodesNeeded: true });
    assert.ok(r.nodesNeeded && r.nodesNeeded.runs > 0);
    for (const [name, make] of policies) {
      const k = r.policies.find((p) => p.name === name)!.nodesNeeded!;
      assert.equal(typeof k, 'number', name);
      assert.equal(waiting(k, make), 0, `${name} on ${k} nodes`);
      assert.ok(waiting(k - 1, make) > 0, `${name} on ${k - 1} nodes`);
    }
    const none = r.policies[0]!.nodesNeeded!;
    assert.ok(r.policies.find((p) => p.name === 'limit')!.nodesNeeded! < none, 'the limit needs fewer nodes than none');
  });
});
