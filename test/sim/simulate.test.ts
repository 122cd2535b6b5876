import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { parseScenario, type Scenario } from '../../sim/scenario.js';
import { simulate, type PolicyResult } from '../../sim/simulate.js';

// Small enough for the unit suite: 12 nodes over 6 hours around the daily peak.
// No warm-up day unless a test asks: the tests reason about the whole run.
const small = (o: Record<string, unknown> = {}): Scenario => parseScenario({ nodes: 12, hours: 6, warmupHours: 0, ...o, usage: { diurnal: { peakHour: 3 }, ...(o.usage as object) } });
const byName = (policies: PolicyResult[], name: string) => {
  const p = policies.find((x) => x.name === name);
  assert.ok(p, `policy ${name} in the result`);
  return p;
};

describe('oversell simulate', () => {
  const base = simulate(small());

  it('runs every policy on the same workload: none, the anchors, the limit, oversell', () => {
    assert.deepEqual(base.policies.map((p) => p.name), ['none', 'static', 'seaiii', 'katalyst', 'koordinator', 'crane', 'peak-predictor', 'limit', 'oversell']);
    assert.equal(byName(base.policies, 'none').densityVsNone, 1);
    assert.equal(byName(base.policies, 'limit').gainCaptured, 1);
    assert.equal(base.limit.podsPlaced, byName(base.policies, 'limit').podsPlaced);
    const o = byName(base.policies, 'oversell');
    assert.equal(o.gainCaptured, Math.round(((o.podsPlaced - base.policies[0]!.podsPlaced) / (base.limit.podsPlaced - base.policies[0]!.podsPlaced)) * 1e4) / 1e4);
  });

  it('saturating demand: pods never run out, so every policy leaves some waiting at every step and the limit places more than none', () => {
    const r = simulate(small({ hours: 2 }), undefined, undefined, { demand: 'saturating' });
    assert.equal(r.demand, 'saturating');
    for (const p of r.policies) {
      assert.ok(p.series.pending.every((x) => x > 0), `${p.name}: a step with no pod waiting`);
      assert.ok(p.podsPending >= 1, p.name);
    }
    const none = byName(r.policies, 'none');
    assert.ok(r.limit.podsPlaced > none.podsPlaced * 1.2, `limit ${r.limit.podsPlaced} against none ${none.podsPlaced}`);
    // The scenario's own demand is met at this size and hour: saturating is what makes policies differ.
    const quiet = simulate(small({ hours: 2, usage: { diurnal: { peakHour: 14 } } }));
    assert.equal(byName(quiet.policies, 'none').podsPending, 0);
  });

  it('runs the warm-up day first and measures only after it: with it, oversell\'s risk budget has a history and decides', () => {
    const cold = simulate(small({ hours: 3 }), undefined, undefined, { demand: 'saturating', only: ['oversell'] });
    const warm = simulate(small({ hours: 3, warmupHours: 24 }), undefined, undefined, { demand: 'saturating', only: ['oversell'] });
    assert.equal(warm.steps, cold.steps, 'the warm-up steps are not measured');
    assert.equal(warm.policies[0]!.series.placed.length, cold.policies[0]!.series.placed.length);
    const budget = (r: typeof cold) => Object.keys(r.policies[0]!.changesByBound ?? {}).filter((k) => k.includes(' budget '));
    assert.deepEqual(budget(cold), [], 'three hours of history: the targets decide');
    assert.ok(budget(warm).length > 0, `after a day of history the budget decides: ${JSON.stringify(warm.policies[0]!.changesByBound)}`);
  });

  it('is deterministic: the same seed gives the same JSON, another seed another', () => {
    assert.equal(JSON.stringify(simulate(small())), JSON.stringify(base));
    assert.notEqual(JSON.stringify(simulate(small({ seed: 2 })).policies), JSON.stringify(base.policies));
  });

  it('demand exceeds the cluster without oversell, and inflating places more', () => {
    const none = byName(base.policies, 'none');
    assert.ok(none.podsPending > 10, `pods pending without oversell: ${none.podsPending}`);
    assert.ok(byName(base.policies, 'static').podsPlaced > none.podsPlaced);
    assert.ok(byName(base.policies, 'oversell').podsPlaced > none.podsPlaced);
  });

  it('usage grows as pods land: with no daily swing, slack of running pods is near the 46 % anchor', () => {
    const flat = simulate(parseScenario({ nodes: 6, hours: 2, usage: { diurnal: { cpuSwing: 0, memorySwing: 0 } } }));
    for (const p of flat.policies) {
      assert.ok(Math.abs(p.memorySlack - 0.46) < 0.05, `${p.name} memory slack ${p.memorySlack}`);
      assert.ok(Math.abs(p.cpuSlack - 0.46) < 0.05, `${p.name} cpu slack ${p.cpuSlack}`);
    }
  });

  it('calls the real decision: an OversellPolicy capped at 1x places what none places, and never goes below requests', () => {
    const r = simulate(small({ policies: { oversell: [{ name: 'capped', spec: { cpu: { maxRatio: 1 }, memory: { maxRatio: 1 } } }, { name: 'wide', spec: { cpu: { maxRatio: 3 } } }] } }));
    const none = byName(r.policies, 'none');
    const capped = byName(r.policies, 'capped');
    assert.equal(capped.podsPlaced, none.podsPlaced);
    assert.equal(capped.allocatableChangesPerNodeHour, 0);
    assert.ok(byName(r.policies, 'wide').podsPlaced > none.podsPlaced);
    for (const p of r.policies.filter((x) => x.kind === 'oversell')) assert.equal(p.belowRequestsNodeSeconds, 0, p.name);
  });

  it('counts the risks: a static ratio on a busier cluster overloads memory; katalyst drops below requests', () => {
    // x1.5: Guaranteed pods (the caches) are held at their requests, so it takes more than x1.3 to overload these nodes.
    const r = simulate(small({ policies: { static: { cpu: 2, memory: 2 } }, usage: { step: { atHour: 3, factor: 1.5 } } }));
    const st = byName(r.policies, 'static');
    assert.ok(st.podsHitByMemoryOverload > 0, `static hits ${st.podsHitByMemoryOverload}`);
    assert.ok(st.memoryOverloadNodeSeconds > 0);
    assert.ok(st.cpuOverCapacityNodeSeconds > 0);
    assert.equal(byName(r.policies, 'none').podsHitByMemoryOverload, 0);
    assert.ok(byName(r.policies, 'katalyst').belowRequestsNodeSeconds > 0);
    assert.equal(byName(r.policies, 'oversell').belowRequestsNodeSeconds, 0);
  });

  it('says why oversell changed allocatable, from its decisions\' bounds', () => {
    const o = byName(base.policies, 'oversell');
    const causes = Object.values(o.changesByBound ?? {});
    assert.ok(causes.length > 0);
    const sum = causes.reduce((a, b) => a + b, 0);
    // A change of both resources at one step is one change of allocatable and two causes.
    assert.ok(sum >= o.allocatableChangesPerNodeHour - 0.01 && sum <= 2 * o.allocatableChangesPerNodeHour + 0.01, `${sum} against ${o.allocatableChangesPerNodeHour}`);
    assert.equal(byName(base.policies, 'katalyst').changesByBound, undefined);
  });

  it('refuses two policies of one name', () => {
    assert.throws(() => simulate(small({ policies: { oversell: [{ name: 'static', spec: {} }] } })), /two policies are named "static"/);
    assert.throws(() => simulate(small({ policies: { oversell: [{ name: 'limit', spec: {} }] } })), /two policies are named "limit"/);
  });

  it('only: runs the named policies alone, with the same figures as in the full run; density needs none, the share of gain the limit', () => {
    const some = simulate(small(), undefined, undefined, { only: ['static', 'oversell'] });
    assert.deepEqual(some.policies.map((p) => p.name), ['static', 'oversell']);
    for (const p of some.policies) {
      const full = byName(base.policies, p.name);
      assert.deepEqual([p.podsPlaced, p.riskNodeSeconds], [full.podsPlaced, full.riskNodeSeconds], p.name);
      assert.deepEqual([p.densityVsNone, p.gainCaptured], [null, null], `${p.name}: nothing to compare with`);
    }
    const withNone = simulate(small(), undefined, undefined, { only: ['none', 'static'] });
    assert.equal(byName(withNone.policies, 'static').densityVsNone, byName(base.policies, 'static').densityVsNone);
    assert.equal(byName(withNone.policies, 'static').gainCaptured, null, 'no limit run: no share of its gain');
    assert.throws(() => simulate(small(), undefined, undefined, { only: ['statik'] }), /no policy is named "statik"/);
  });
});
