// Harm counted by pool and tier (gateway/metrics/harm-meter.ts), from what the
// pod watch hands the store.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { meterHarm } from '../../../gateway/metrics/harm-meter.js';
import { DEFAULT_POLICY } from '../../../gateway/decide/policy.js';
import { flagsPolicySource } from '../../../gateway/policies/policy-source.js';
import { PodFactsStore, type PodFacts } from '../../../gateway/store/pod-facts.js';
import { POOL_HARM_WINDOW_MS, PoolHarmLedger } from '../../../gateway/decide/pool-harm.js';
import { silentLog } from '../../helpers/plugin-app.js';

const pod = (over: Partial<PodFacts> = {}): PodFacts => ({
  uid: 'u', node: 'node-a', namespace: 'apps', name: 'web', priority: 0, qos: 'Burstable', exclusiveCpus: 0, cpuRequestMillicores: 0, memoryRequestBytes: 0, startedAtMs: 0, finished: false, evicted: false, oomKills: [], oomKillsWithoutLimit: [], ...over,
});

describe('meterHarm', () => {
  const setup = (namespaces: Record<string, Record<string, string>> = { apps: {}, db: { 'oversell.io/protect': 'true' } }) => {
    const pods = new PodFactsStore();
    const counted: string[] = [];
    const ledger = new PoolHarmLedger();
    meterHarm({
      ledger, now: () => 1_000_000,
      pods, policies: flagsPolicySource(DEFAULT_POLICY), log: silentLog,
      nodes: { get: (n) => (n === 'node-a' || n === 'node-b' ? { metadata: { labels: {} } } : undefined) },
      namespaceLabels: async (ns) => {
        const l = namespaces[ns];
        if (!l) throw new Error('no such namespace');
        return l;
      },
      metrics: { harm: (pool, tier, by, count = 1) => counted.push(`${pool} ${tier} ${by} ${count}`) },
    });
    return { pods, counted, ledger };
  };
  const settle = () => new Promise((r) => setTimeout(r, 20));

  it('counts a kubelet eviction and OOM kills by tier, in the node\'s pool', async () => {
    const { pods, counted } = setup();
    pods.set(pod({ uid: 'a' }));
    pods.set(pod({ uid: 'a', oomKills: ['app@1'] }));
    pods.set(pod({ uid: 'b', namespace: 'db', qos: 'Burstable' }));
    pods.set(pod({ uid: 'b', namespace: 'db', finished: true, evicted: true }));
    pods.set(pod({ uid: 'c', qos: 'Guaranteed' }));
    pods.set(pod({ uid: 'c', qos: 'Guaranteed', oomKills: ['app@1', 'app@2'] }));
    await settle();
    assert.deepEqual(counted.sort(), ['flags protected kubelet-eviction 1', 'flags protected oom-kill 2', 'flags unprotected oom-kill 1']);
  });

  it('harm for lack of memory (kubelet evictions, OOM kills without a limit) is kept against the pool\'s budget for an hour; a kill at a container\'s own limit is not', async () => {
    const { pods, ledger } = setup();
    pods.set(pod({ uid: 'a' }));
    pods.set(pod({ uid: 'a', oomKills: ['app@1'] })); // a limit killed it
    await settle();
    assert.deepEqual(ledger.of('flags', 1_000_000), { memoryOverloads: 0, untilMs: 0, cpuObservedSeconds: 0, cpuOverSeconds: 0 });
    pods.set(pod({ uid: 'a', oomKills: ['app@1', 'app@2'], oomKillsWithoutLimit: ['app@2'] }));
    pods.set(pod({ uid: 'b' }));
    pods.set(pod({ uid: 'b', finished: true, evicted: true }));
    await settle();
    assert.deepEqual(ledger.of('flags', 1_000_000), { memoryOverloads: 2, untilMs: 1_000_000 + POOL_HARM_WINDOW_MS, cpuObservedSeconds: 0, cpuOverSeconds: 0 });
    assert.equal(ledger.of('flags', 1_000_000 + POOL_HARM_WINDOW_MS).memoryOverloads, 0, 'an hour later, spent no more');
  });

  it('a node oversell does not govern: not counted', async () => {
    const { pods, counted } = setup();
    pods.set(pod({ uid: 'x', node: 'elsewhere' }));
    pods.set(pod({ uid: 'x', node: 'elsewhere', oomKills: ['app@1'] }));
    await settle();
    assert.deepEqual(counted, []);
  });

  it('a namespace that cannot be read: counted as protected, where it matters most', async () => {
    const { pods, counted } = setup({});
    pods.set(pod({ uid: 'y', namespace: 'gone' }));
    pods.set(pod({ uid: 'y', namespace: 'gone', oomKills: ['app@1'] }));
    await settle();
    assert.deepEqual(counted, ['flags protected oom-kill 1']);
  });
});
