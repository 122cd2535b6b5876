import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { staticAllocator, type Allocator, type NodeShape } from '../../sim/allocators.js';
import { runPolicy, type Demand } from '../../sim/cluster.js';
import { limitAllocator, ReservedUsage } from '../../sim/limit.js';
import { Rng } from '../../sim/random.js';
import { parseScenario, rawAllocatable, type Scenario } from '../../sim/scenario.js';
import { gainCaptured, simulate } from '../../sim/simulate.js';
import { buildWorkload } from '../../sim/workload.js';

const run = (s: Scenario, make: (shapes: NodeShape[], s: Scenario) => Allocator, demand: Demand) => {
  const shapes = new Array<NodeShape>(s.nodes).fill({ raw: rawAllocatable(s), capacity: s.node.capacity, systemUsage: s.node.systemUsage });
  const workload = buildWorkload(s);
  const allocator = make(shapes, s);
  return runPolicy({ scenario: s, workload, allocator, shapes, targets: { cpu: 0.6, memory: 0.8 }, seriesEverySteps: 1, demand });
};
const limit = (shapes: NodeShape[], s: Scenario) => limitAllocator(shapes, s, buildWorkload(s));

/** A small random cluster whose pods use more than they ask at times: every fit check matters. */
function randomScenario(rng: Rng): Scenario {
  const pick = (lo: number, hi: number) => lo + rng.next() * (hi - lo);
  return parseScenario({ warmupHours: 0,
    seed: Math.floor(rng.next() * 1e6),
    nodes: 1 + Math.floor(rng.next() * 3),
    hours: pick(0.3, 1.5),
    tickSeconds: 30,
    node: { capacity: { cpu: '4', memory: '8Gi' }, reserved: { cpu: '200m', memory: '512Mi' }, systemUsage: { cpu: '100m', memory: '256Mi' } },
    usage: {
      cpuSlack: pick(0.05, 0.7), memorySlack: pick(0.05, 0.7), scale: pick(0.8, 2), concentration: pick(2, 20),
      diurnal: { peakHour: pick(0, 2), cpuSwing: pick(0, 0.4), memorySwing: pick(0, 0.3) },
      bursts: { share: pick(0, 0.2), factor: pick(1, 3), seconds: 60 },
      memoryGrowth: { swing: pick(0, 0.4), periodHours: pick(0.2, 2) },
      startSeconds: Math.floor(pick(0, 60)),
    },
    classes: [
      { name: 'svc', requests: { cpu: `${Math.floor(pick(100, 900))}m`, memory: `${Math.floor(pick(128, 1024))}Mi` }, replicasPerNode: { min: pick(2, 8), max: pick(8, 20) } },
      { name: 'job', kind: 'job', requests: { cpu: `${Math.floor(pick(100, 900))}m`, memory: `${Math.floor(pick(128, 1024))}Mi` }, arrivalsPerNodeHour: pick(2, 20), durationMinutes: pick(5, 40) },
    ],
  });
}

describe('the physical limit', () => {
  it('never overloads a node: no pod hit by memory overload and no CPU demand over capacity, over random small workloads', () => {
    const rng = new Rng(31);
    let staticHarm = 0;
    let gained = 0;
    for (let trial = 0; trial < 30; trial++) {
      const s = randomScenario(rng);
      const demand: Demand = trial % 2 === 0 ? 'saturating' : 'scenario';
      const r = run(s, limit, demand);
      assert.equal(r.podsHitByMemoryOverload, 0, `trial ${trial} (${demand}): pods hit`);
      assert.equal(r.memoryOverloadNodeSeconds, 0, `trial ${trial} (${demand}): memory overloaded`);
      assert.equal(r.cpuOverCapacityNodeSeconds, 0, `trial ${trial} (${demand}): CPU over capacity`);
      const none = run(s, (sh) => staticAllocator(sh, { cpu: 1, memory: 1 }), demand);
      if (r.podsPlaced > none.podsPlaced) gained += 1;
      const wide = run(s, (sh) => staticAllocator(sh, { cpu: 4, memory: 4 }), demand);
      if (wide.podsHitByMemoryOverload > 0 || wide.cpuOverCapacityNodeSeconds > 0) staticHarm += 1;
    }
    // The workloads are ones where placing without the check overloads, and the limit places past requests.
    assert.ok(staticHarm >= 10, `a 4x static ratio overloaded ${staticHarm} of 30`);
    assert.ok(gained >= 10, `the limit placed more than none in ${gained} of 30`);
  });

  it('places at least as many pods as any policy that overloads nothing, where usage is flat and one node makes FIFO placement a prefix', () => {
    for (const seed of [1, 2, 3]) {
      const s = parseScenario({ warmupHours: 0,
        seed, nodes: 1, hours: 1,
        usage: { concentration: 50, diurnal: { cpuSwing: 0, memorySwing: 0 }, bursts: { share: 0 }, memoryGrowth: { swing: 0 } },
        classes: [
          { name: 'web', requests: { cpu: '500m', memory: '1Gi' }, replicasPerNode: { min: 10, max: 10 } },
          { name: 'api', requests: { cpu: '1', memory: '3Gi' }, replicasPerNode: { min: 5, max: 5 } },
        ],
        policies: { static: { cpu: 1.6, memory: 1.6 } },
      });
      const r = simulate(s, undefined, undefined, { demand: 'saturating' });
      const lim = r.policies.find((p) => p.kind === 'limit')!;
      assert.ok(lim.podsPlaced > r.policies[0]!.podsPlaced, `seed ${seed}: the limit places more than none`);
      for (const p of r.policies) {
        const harmless = p.podsHitByMemoryOverload === 0 && p.cpuOverCapacityNodeSeconds === 0;
        if (harmless) assert.ok(p.podsPlaced <= lim.podsPlaced, `seed ${seed}: ${p.name} placed ${p.podsPlaced} without harm, the limit ${lim.podsPlaced}`);
      }
      assert.ok(r.policies.some((p) => p.kind !== 'limit' && p.kind !== 'none' && p.podsPlaced > r.policies[0]!.podsPlaced), 'some policy gains over none');
    }
  });

  it('a deleted pod hands its reserved future back: the second daily peak holds as many pods as the first', () => {
    const s = parseScenario({ warmupHours: 0,
      nodes: 1, hours: 36, tickSeconds: 60,
      // Pods alike (a narrow share), more wanted at each peak than the node physically holds.
      usage: { concentration: 1000, diurnal: { peakHour: 6, cpuSwing: 0, memorySwing: 0 }, bursts: { share: 0 }, memoryGrowth: { swing: 0 } },
      classes: [{ name: 'web', requests: { cpu: '500m', memory: '1Gi' }, replicasPerNode: { min: 2, max: 100 } }],
    });
    const r = run(s, limit, 'scenario');
    const at = (hour: number) => r.series.placed[hour * 60]!;
    assert.ok(at(6) > run(s, (sh) => staticAllocator(sh, { cpu: 1, memory: 1 }), 'scenario').series.placed[6 * 60]!, 'past what requests allow');
    assert.ok(at(18) < at(6) / 2, 'scaled down in between');
    assert.ok(at(6) < 100, `the node is full at the first peak: ${at(6)}`);
    assert.ok(Math.abs(at(30) - at(6)) <= 1, `${at(30)} pods at the second peak, ${at(6)} at the first`);
  });

  it('ReservedUsage finds the one step where a pod would not fit, wherever it is', () => {
    const u = new ReservedUsage(1000);
    u.values.fill(10);
    u.values[777] = 60;
    u.refresh(0, 1000);
    const pod = (t: number) => (t === 777 ? 41 : 1);
    assert.equal(u.exceeds(0, 1000, 100, 41, pod), true);
    assert.equal(u.exceeds(0, 777, 100, 41, pod), false, 'not in the range');
    assert.equal(u.exceeds(778, 1000, 100, 41, pod), false);
    assert.equal(u.exceeds(0, 1000, 100, 41, (t) => (t === 777 ? 40 : 41)), false, 'exactly at the limit fits');
  });

  it('gainCaptured is the share of the limit\'s gain over none, and null when the limit gains nothing', () => {
    assert.equal(gainCaptured(150, 100, 200), 0.5);
    assert.equal(gainCaptured(100, 100, 100), null);
    assert.equal(gainCaptured(120, 100, 90), null, 'a limit below none is no reference either');
    // Demand the nodes hold without oversell: nothing for the limit to add.
    const s = parseScenario({ warmupHours: 0, nodes: 2, hours: 0.5, classes: [{ name: 'few', requests: { cpu: '1', memory: '1Gi' }, replicasPerNode: { min: 2, max: 2 } }] });
    const r = simulate(s);
    assert.equal(r.limit.podsPlaced, r.policies[0]!.podsPlaced);
    for (const p of r.policies) assert.equal(p.gainCaptured, null, p.name);
  });
});
