// Harm counted by pool and tier (gateway/metrics/harm-meter.ts), from what the
// pod watch hands the store.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { meterHarm } from '../../../gateway/metrics/harm-meter.js';
import { DEFAULT_POLICY } from '../../../gateway/decide/policy.js';
import { flagsPolicySource } from '../../../gateway/policies/policy-source.js';
import { PodFactsStore, type PodFacts } from '../../../gateway/store/pod-facts.js';
import { silentLog } from '../../helpers/plugin-app.js';

const pod = (over: Partial<PodFacts> = {}): PodFacts => ({
  uid: 'u', node: 'node-a', namespace: 'apps', name: 'web', priority: 0, qos: 'Burstable', exclusiveCpus: 0, cpuRequestMillicores: 0, memoryRequestBytes: 0, startedAtMs: 0, finished: false, evicted: false, oomKills: [], ...over,
});

describe('meterHarm', () => {
  const setup = (namespaces: Record<string, Record<string, string>> = { apps: {}, db: { 'oversell.io/protect': 'true' } }) => {
    const pods = new PodFactsStore();
    const counted: string[] = [];
    meterHarm({
      pods, policies: flagsPolicySource(DEFAULT_POLICY), log: silentLog,
      nodes: { get: (n) => (n === 'node-a' || n === 'node-b' ? { metadata: { labels: {} } } : undefined) },
      namespaceLabels: async (ns) => {
        const l = namespaces[ns];
        if (!l) throw new Error('no such namespace');
        return l;
      },
      metrics: { harm: (pool, tier, by, count = 1) => counted.push(`${pool} ${tier} ${by} ${count}`) },
    });
    return { pods, counted };
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
