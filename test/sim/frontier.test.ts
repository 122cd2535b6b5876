import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { frontierJson } from '../../sim/frontier-report.js';
import { dominance, FAMILIES, frontierOf, levels, oversellSweep, RISK_SHARES, runFrontier, type Family, type FrontierPoint, type Sweep } from '../../sim/frontier.js';
import { parseScenario } from '../../sim/scenario.js';

// Small and saturating: every setting is bound by what 3 nodes hold, in a second or two per run.
const small = parseScenario({ nodes: 3, hours: 1 });
const EMPTY: Sweep = { static: [], katalyst: [], koordinator: [], crane: [], peakPredictor: [], oversell: [] };

const point = (family: Family, label: string, podsPlaced: number, riskNodeSeconds: number): FrontierPoint => ({
  family, label, podsPlaced, densityVsNone: podsPlaced / 100, gainCaptured: null, podsHitByMemoryOverload: 0, protectedPodsHit: 0, podsRelieved: 0, cpuOverCapacityShare: 0, belowRequestsNodeSeconds: 0, riskNodeSeconds,
});

describe('frontier sweep', () => {
  const sweep: Sweep = { ...EMPTY, static: [1, 1.25, 1.5].map((r) => ({ cpu: r, memory: r })), oversell: oversellSweep().slice(0, 2) };
  const progress: string[] = [];
  const f = runFrontier(small, sweep, { demand: 'saturating', onProgress: (p) => progress.push(`${p.done}/${p.total} ${p.family}`) });

  it("static's density rises with its ratio; at 1x it places what none places", () => {
    const st = f.points.filter((p) => p.family === 'static');
    assert.deepEqual(st.map((p) => p.label), ['1x', '1.25x', '1.5x']);
    assert.equal(st[0]!.podsPlaced, f.none.podsPlaced, 'ratio 1 is raw allocatable: none');
    assert.equal(st[0]!.densityVsNone, 1);
    for (let i = 1; i < st.length; i++) assert.ok(st[i]!.podsPlaced > st[i - 1]!.podsPlaced, `${st[i]!.label} ${st[i]!.podsPlaced} > ${st[i - 1]!.label} ${st[i - 1]!.podsPlaced}`);
    assert.equal(st[2]!.densityVsNone, Math.round((st[2]!.podsPlaced / f.none.podsPlaced) * 1e4) / 1e4);
    assert.ok(f.limit.podsPlaced > f.none.podsPlaced, 'the limit ran once as the reference');
  });

  it('runs each setting once, seaiii once, after one reference run, and says so as it goes', () => {
    assert.deepEqual(f.points.map((p) => p.family), ['static', 'static', 'static', 'seaiii', 'oversell', 'oversell']);
    assert.deepEqual(f.points.filter((p) => p.family === 'oversell').map((p) => p.label), oversellSweep().slice(0, 2).map((p) => p.name));
    assert.deepEqual(progress, ['1/7 reference', '2/7 static', '3/7 static', '4/7 static', '5/7 seaiii', '6/7 oversell', '7/7 oversell']);
    assert.equal(f.nodeSeconds, 3 * 3600);
  });

  it('prints JSON with the sweep, every point, a row per risk level keyed by family, and the dominance check', () => {
    const j = JSON.parse(frontierJson(f)) as Record<string, unknown> & { points: Record<string, unknown>[]; levels: { riskShare: number; best: Record<string, unknown>; most: string[] }[]; dominance: Record<string, unknown>[] };
    assert.deepEqual(Object.keys(j).sort(), ['demand', 'dominance', 'dominatesEveryAnchor', 'levels', 'limit', 'points', 'nodeSeconds', 'none', 'scenario', 'sweep'].sort());
    assert.equal(j.demand, 'saturating');
    assert.deepEqual(j.sweep, JSON.parse(JSON.stringify(sweep)));
    for (const p of j.points) {
      for (const k of ['podsPlaced', 'densityVsNone', 'gainCaptured', 'podsHitByMemoryOverload', 'cpuOverCapacityShare', 'belowRequestsNodeSeconds', 'riskNodeSeconds']) assert.equal(typeof p[k], 'number', `${p.label}.${k}`);
    }
    assert.deepEqual(j.levels.map((l) => l.riskShare), [...RISK_SHARES]);
    for (const l of j.levels) assert.deepEqual(Object.keys(l.best), [...FAMILIES]);
    assert.equal(j.dominance.length, 4, 'one row per anchor point: three static, one seaiii');
    assert.equal(typeof j.dominatesEveryAnchor, 'boolean');
  });
});

describe('frontier table', () => {
  const points = [
    point('static', '1.5x', 150, 0),
    point('static', '2x', 200, 36),
    point('static', '3x', 180, 3600),
    point('katalyst', 'a', 120, 0),
    point('katalyst', 'b', 260, 360),
    point('oversell', 'x', 150, 0),
    point('oversell', 'y', 170, 10),
  ];
  // 1 node-hour: the levels are 0, 0.36, 3.6, 36, 360 and 3600 node-seconds.
  const rows = levels(points, 3600);

  it("picks each family's most pods at no more than the level's risk, and who places most", () => {
    const at = (k: number, f: Family) => rows[k]!.best[f]?.label ?? null;
    assert.deepEqual(rows.map((r) => r.riskNodeSeconds), [0, 0.36, 3.6, 36, 360, 3600]);
    assert.deepEqual([at(0, 'static'), at(0, 'katalyst'), at(0, 'oversell'), at(0, 'crane')], ['1.5x', 'a', 'x', null]);
    assert.deepEqual(rows[0]!.most, ['static', 'oversell'], 'a tie names both');
    assert.deepEqual([at(3, 'static'), at(3, 'oversell'), rows[3]!.most], ['2x', 'y', ['static']], 'risk exactly at the level counts');
    assert.deepEqual([at(4, 'katalyst'), rows[4]!.most], ['b', ['katalyst']]);
    assert.deepEqual([at(5, 'static'), rows[5]!.best.static?.podsPlaced], ['2x', 200], 'a riskier setting with fewer pods is never the best');
  });

  it('has no winner at a level no point reaches', () => {
    assert.deepEqual(levels([point('static', '2x', 200, 36)], 3600)[0]!.most, []);
  });
});

describe('frontier dominance', () => {
  it('flags an anchor setting oversell does not match at its risk, and one where every oversell setting is riskier', () => {
    const d = dominance([
      point('static', 'beaten', 140, 100),
      point('static', 'beats', 200, 100),
      point('static', 'safe', 100, 0),
      point('oversell', 'x', 150, 50),
      point('oversell', 'y', 300, 1000),
    ]);
    assert.deepEqual(d.map((x) => [x.anchor.label, x.oversell?.label ?? null, x.atLeastAsMany]), [
      ['beaten', 'x', true],
      ['beats', 'x', false],
      ['safe', null, false],
    ]);
  });

  it('says the frontier dominates only when every anchor point is matched', () => {
    const base = { scenario: small, demand: 'saturating' as const, nodeSeconds: 3600, none: { podsPlaced: 100 }, limit: { podsPlaced: 300 }, sweep: EMPTY };
    assert.equal(frontierOf({ ...base, points: [point('static', 's', 150, 10), point('oversell', 'o', 150, 10)] }).dominatesEveryAnchor, true);
    assert.equal(frontierOf({ ...base, points: [point('static', 's', 150, 10), point('oversell', 'o', 149, 10)] }).dominatesEveryAnchor, false);
  });
});
