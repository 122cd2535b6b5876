// Relief's and the harm count's view of bound pods (gateway/store/pod-facts.ts):
// reduced from pod objects, indexed by node, and the harm a pod's status shows
// told once, as it happens.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { V1Pod } from '@kubernetes/client-node';
import { type Harm, podFacts, PodFactsStore } from '../../../gateway/store/pod-facts.js';
import { silentLog } from '../../helpers/plugin-app.js';

const pod = (over: { phase?: string; reason?: string; oom?: Array<{ name: string; finishedAt: string; last?: boolean }>; priority?: number } = {}): V1Pod => ({
  metadata: { uid: 'u1', name: 'web', namespace: 'apps', creationTimestamp: new Date('2026-12-01T00:00:00Z') },
  spec: { nodeName: 'node-a', priority: over.priority ?? 0, containers: [{ name: 'app', resources: { requests: { cpu: '100m', memory: '256Mi' } } }] },
  status: {
    phase: over.phase ?? 'Running',
    ...(over.reason && { reason: over.reason }),
    startTime: new Date('2026-12-01T00:00:05Z'),
    containerStatuses: (over.oom ?? []).map((o) => ({
      name: o.name, image: 'i', imageID: '', ready: false, restartCount: 1,
      [o.last ? 'lastState' : 'state']: { terminated: { exitCode: 137, reason: 'OOMKilled', finishedAt: new Date(o.finishedAt) } },
    })),
  },
});

describe('podFacts', () => {
  it('who the pod is, its tier\'s facts, its memory request and start', () => {
    const f = podFacts(pod({ priority: 100 }), silentLog);
    assert.deepEqual(f, {
      uid: 'u1', node: 'node-a', namespace: 'apps', name: 'web', priority: 100, qos: 'Burstable', exclusiveCpus: 0,
      cpuRequestMillicores: 100, memoryRequestBytes: 256 * 2 ** 20, startedAtMs: Date.parse('2026-12-01T00:00:05Z'), finished: false, evicted: false, oomKills: [], oomKillsWithoutLimit: [],
    });
  });
  it('evicted by the kubelet: failed with reason Evicted', () => assert.equal(podFacts(pod({ phase: 'Failed', reason: 'Evicted' }), silentLog)?.evicted, true));
  it('a resource that does not parse: never a candidate (undefined), said in the log', () => {
    const p = pod();
    p.spec!.containers[0]!.resources = { requests: { memory: 'lots' } };
    assert.equal(podFacts(p, silentLog), undefined);
  });
});

describe('PodFactsStore harm', () => {
  const store = () => {
    const s = new PodFactsStore();
    const heard: Harm[] = [];
    s.onHarm((_p, h) => heard.push(h));
    return { s, heard };
  };
  const facts = (p: V1Pod) => podFacts(p, silentLog)!;

  it('a pod first listed already evicted or OOM-killed is no news; a change of a known pod is, once', () => {
    const { s, heard } = store();
    s.replaceAll([facts(pod({ oom: [{ name: 'app', finishedAt: '2026-12-01T01:00:00Z' }] }))]);
    assert.deepEqual(heard, []);
    const twice = pod({ oom: [{ name: 'app', finishedAt: '2026-12-01T02:00:00Z' }, { name: 'side', finishedAt: '2026-12-01T02:00:01Z', last: true }] });
    s.set(facts(twice));
    assert.deepEqual(heard, [{ by: 'oom-kill', count: 2, overload: 2 }], 'two new OOM kills, of containers without a memory limit');
    s.set(facts(twice));
    assert.deepEqual(heard.length, 1, 'the same status again: nothing new');
    s.set(facts(pod({ phase: 'Failed', reason: 'Evicted' })));
    assert.deepEqual(heard.at(-1), { by: 'kubelet-eviction', count: 1, overload: 1 });
    assert.deepEqual(s.on('node-a'), [], 'a finished pod is no relief candidate');
  });

  it('an OOM kill of a container with a memory limit is harm, but not for lack of memory on the node (its own limit may have done it)', () => {
    const { s, heard } = store();
    const limited = (p: V1Pod) => {
      p.spec!.containers[0]!.resources!.limits = { memory: '256Mi' };
      return p;
    };
    s.replaceAll([facts(limited(pod()))]);
    s.set(facts(limited(pod({ oom: [{ name: 'app', finishedAt: '2026-12-01T02:00:00Z' }] }))));
    assert.deepEqual(heard, [{ by: 'oom-kill', count: 1, overload: 0 }]);
  });
});
