// Relief before harm (gateway/decide/relief.ts): which unprotected pods to
// evict when a node's memory crosses the relief line, and how many.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { DEFAULT_RELIEF, planRelief, type ReliefCandidate, reliefOrder } from '../../../gateway/decide/relief.js';

const GiB = 1024 ** 3;
const pod = (name: string, over: Partial<ReliefCandidate> = {}): ReliefCandidate => ({
  namespace: 'default', name, uid: `uid-${name}`, tier: { tier: 'unprotected' }, priority: 0, memoryUsageBytes: 1 * GiB, memoryRequestBytes: 1 * GiB, startedAtMs: 0, ...over,
});
const plan = (used: number, candidates: ReliefCandidate[], over: { skip?: string[]; allowance?: number } = {}) =>
  planRelief({ memoryCapacityBytes: 100 * GiB, memoryWorkingSetBytes: used, candidates, skip: new Set(over.skip ?? []), allowance: over.allowance ?? 10, policy: DEFAULT_RELIEF });

describe('reliefOrder: who pays first', () => {
  it('lowest priority, then most usage over request, then youngest', () => {
    const pods = [
      pod('high', { priority: 1000 }),
      pod('old-over', { memoryUsageBytes: 3 * GiB, startedAtMs: 1 }),
      pod('young-under', { memoryUsageBytes: 0.5 * GiB, startedAtMs: 9 }),
      pod('young-over', { memoryUsageBytes: 3 * GiB, startedAtMs: 5 }),
      pod('low', { priority: -10 }),
    ];
    assert.deepEqual([...pods].sort(reliefOrder).map((p) => p.name), ['low', 'young-over', 'old-over', 'young-under', 'high']);
  });
});

describe('planRelief', () => {
  it('under the relief line: nothing', () => assert.deepEqual(plan(95 * GiB, [pod('a')]), { needBytes: 0, victims: [] }));

  it('past it: just enough pods to reach the calm line, in order, never a protected one', () => {
    const r = plan(96 * GiB, [
      pod('db', { tier: { tier: 'protected', because: 'Guaranteed QoS' }, priority: -100, memoryUsageBytes: 50 * GiB }),
      pod('batch-1', { memoryUsageBytes: 4 * GiB }),
      pod('batch-2', { memoryUsageBytes: 3 * GiB }),
      pod('web', { priority: 100, memoryUsageBytes: 2 * GiB }),
    ]);
    assert.equal(r.needBytes, 6 * GiB, '96 GiB used, calm at 90');
    assert.deepEqual(r.victims.map((v) => v.name), ['batch-1', 'batch-2'], '7 GiB freed by the two lowest, web and the protected db untouched');
    assert.equal(r.short, undefined);
  });

  it('a pod whose eviction a PodDisruptionBudget refused is skipped: the next one is taken', () => {
    const r = plan(96 * GiB, [pod('first', { memoryUsageBytes: 8 * GiB }), pod('next', { priority: 1, memoryUsageBytes: 8 * GiB })], { skip: ['uid-first'] });
    assert.deepEqual(r.victims.map((v) => v.name), ['next']);
  });

  it('only protected pods left: says so, evicts none', () => {
    const r = plan(99 * GiB, [pod('db', { tier: { tier: 'protected', because: 'Guaranteed QoS' }, memoryUsageBytes: 50 * GiB })]);
    assert.deepEqual(r.victims, []);
    assert.match(r.short ?? '', /no unprotected pod with usage reported left to relieve/);
  });

  it('a pod with no usage reported frees nothing: never taken, however it ranks', () => {
    const r = plan(96 * GiB, [pod('unknown', { priority: -100, memoryUsageBytes: 0 }), pod('known', { memoryUsageBytes: 8 * GiB })]);
    assert.deepEqual(r.victims.map((v) => v.name), ['known']);
    assert.deepEqual(plan(96 * GiB, [pod('unknown', { memoryUsageBytes: 0 })]).victims, []);
  });

  it('the rate limit stops relief, and says how short', () => {
    const r = plan(99 * GiB, [pod('a'), pod('b'), pod('c')], { allowance: 2 });
    assert.equal(r.victims.length, 2);
    assert.match(r.short ?? '', /rate limit/);
  });

  it('no capacity or NaN usage: nothing (bad data never evicts)', () => {
    assert.deepEqual(planRelief({ memoryCapacityBytes: 0, memoryWorkingSetBytes: 1, candidates: [pod('a')], skip: new Set(), allowance: 1, policy: DEFAULT_RELIEF }).victims, []);
    assert.deepEqual(planRelief({ memoryCapacityBytes: 100, memoryWorkingSetBytes: Number.NaN, candidates: [pod('a')], skip: new Set(), allowance: 1, policy: DEFAULT_RELIEF }).victims, []);
  });
});
