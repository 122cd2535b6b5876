import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { LoadHistory } from '../../../gateway/decide/load-history.js';
import { DEFAULT_POLICY, type Policy } from '../../../gateway/decide/policy.js';
import { poolLoads } from '../../../gateway/decide/pool-load.js';
import { PoolLoadKeeper } from '../../../gateway/policies/pool-load-keeper.js';

const HOUR = 3_600_000;
/** `hours` of one record per 10 s at the given factors. */
function history(hours: number, cpu: number, memory: number): LoadHistory {
  const h = new LoadHistory(24 * HOUR);
  for (let i = 0; i <= (hours * HOUR) / 10_000; i++) h.record(i * 10_000, cpu, memory);
  return h;
}
const other: Policy = { ...DEFAULT_POLICY, name: 'other' };
/** The bucket a factor falls in, by its upper edge (load-history.ts). */
const factor = (x: number) => (Math.floor(x * 128) + 1) / 128;

describe("a pool's typical predicted peak", () => {
  it("is the median of its nodes' own, at each resource's overShare, over nodes whose history spans the policy's minimum", () => {
    const loads = poolLoads([
      { policy: DEFAULT_POLICY, history: history(25, 0.2, 0.5) },
      { policy: DEFAULT_POLICY, history: history(25, 0.6, 0.3) },
      // Too short a history: not yet a node's peak.
      { policy: DEFAULT_POLICY, history: history(5, 0.9, 0.9) },
      // Not opted in, or no history: not counted.
      { policy: undefined, history: history(25, 0.9, 0.9) },
      { policy: DEFAULT_POLICY, history: undefined },
      { policy: other, history: history(25, 0.4, 0.4) },
    ]);
    const flags = loads.get('flags');
    assert.equal(flags?.nodes, 2);
    // Two nodes: the median is their mean.
    assert.ok(Math.abs(flags.cpu - (factor(0.2) + factor(0.6)) / 2) < 1e-12);
    assert.ok(Math.abs(flags.memory - (factor(0.5) + factor(0.3)) / 2) < 1e-12);
    assert.deepEqual(loads.get('other'), { cpu: factor(0.4), memory: factor(0.4), nodes: 1 });
    assert.equal(poolLoads([]).size, 0);
  });

  it('is the median: one node reporting far above the rest does not move it', () => {
    const honest = [0.2, 0.25, 0.3, 0.35].map((f) => ({ policy: DEFAULT_POLICY, history: history(25, f, f) }));
    const liar = { policy: DEFAULT_POLICY, history: history(25, 1.99, 1.99) };
    assert.equal(poolLoads([...honest, liar]).get('flags')?.cpu, factor(0.3));
    assert.equal(poolLoads([...honest, liar, liar]).get('flags')?.cpu, (factor(0.3) + factor(0.35)) / 2);
  });

  it('leaves out a node whose factors are not finite numbers', () => {
    const broken = { spanMs: () => 30 * HOUR, quantile: (r: 'cpu' | 'memory') => (r === 'cpu' ? Number.NaN : 0.5) };
    const loads = poolLoads([{ policy: DEFAULT_POLICY, history: broken }, { policy: DEFAULT_POLICY, history: history(25, 0.3, 0.3) }]);
    assert.deepEqual(loads.get('flags'), { cpu: factor(0.3), memory: factor(0.3), nodes: 1 });
  });

  it("the keeper computes it from the store's nodes with the policy their labels select, again on each refresh", () => {
    const nodes = [{ labels: { pool: 'a' }, history: history(25, 0.2, 0.2) as LoadHistory | undefined }, { labels: { pool: 'b' }, history: history(25, 0.6, 0.6) }];
    const keeper = new PoolLoadKeeper({ nodes: () => nodes, policyOf: (labels) => (labels.pool === 'a' ? DEFAULT_POLICY : other) });
    assert.equal(keeper.of('flags'), undefined, 'nothing before the first refresh');
    keeper.refresh();
    assert.equal(keeper.of('flags')?.cpu, factor(0.2));
    assert.equal(keeper.of('other')?.cpu, factor(0.6));
    nodes[0]!.history = undefined;
    keeper.refresh();
    assert.equal(keeper.of('flags'), undefined);
  });
});
