// What the protected-room check reads from the gateway's own caches
// (gateway/admit/binding-sources.ts): a node's raw allocatable only from the
// record the webhook signed, "inflated" from the stored allocatable, and the
// node's protected pods' requests from the pod watch's facts.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { V1Node } from '@kubernetes/client-node';
import { bindingDeps, bindingPod } from '../../../gateway/admit/binding-sources.js';
import { DEFAULT_PROTECT } from '../../../gateway/decide/tiers.js';
import { flagsPolicySource } from '../../../gateway/policies/policy-source.js';
import { DEFAULT_POLICY } from '../../../gateway/decide/policy.js';
import { PodFactsStore, type PodFacts } from '../../../gateway/store/pod-facts.js';
import { applied, kubeletReview, nodeSample, patchOf, reviewBench } from '../../helpers/node-reviews.js';
import { silentLog } from '../../helpers/plugin-app.js';
import { FakeKubeApi } from '../../helpers/fake-kube-api.js';

const facts = (uid: string, over: Partial<PodFacts> = {}): PodFacts => ({
  uid, node: 'n1', namespace: 'apps', name: uid, priority: 0, qos: 'Burstable', exclusiveCpus: 0, cpuRequestMillicores: 1000, memoryRequestBytes: 2 ** 30, startedAtMs: 0, finished: false, evicted: false, oomKills: [], oomKillsWithoutLimit: [], ...over,
});

describe('bindingDeps', () => {
  const now = () => 1_000_000;
  const bench = reviewBench({ now });
  const review = kubeletReview('n1');
  review.request.object.metadata.labels = { 'oversell.io/enabled': 'true' };
  bench.report('n1', nodeSample(now()));
  const signed = applied(review.request.object, patchOf(bench.review(review).review)) as unknown as V1Node;
  const pods = new PodFactsStore();
  const PODS = '/api/v1/namespaces/apps/pods';
  let api: FakeKubeApi;
  let deps: ReturnType<typeof bindingDeps>;
  const sources = () => ({ kubeConfig: api.kubeConfig(), proof: bench.proof, policies: flagsPolicySource(DEFAULT_POLICY), pods, namespaceLabels: async () => ({}), log: silentLog });
  before(async () => {
    api = await FakeKubeApi.start([PODS]);
    deps = bindingDeps({ ...sources(), nodes: { list: () => [signed], get: (n) => (n === 'n1' ? signed : undefined) } });
  });
  after(() => api.close());

  it('a node the webhook signed: raw from its record, inflated when the stored allocatable is above it', () => {
    const n = deps.node('n1');
    assert.ok(n, 'the signed node is known');
    assert.deepEqual(n.raw, { cpuMillicores: 7910, memoryBytes: 31369912 * 1024 });
    assert.equal(n.inflated, true, `allocatable ${JSON.stringify(signed.status?.allocatable)}`);
  });

  it('the same node with its record tampered with: not judged (raw unverified)', () => {
    const forged = structuredClone(signed);
    forged.metadata!.annotations!['oversell.io/raw-allocatable-cpu'] = '64';
    const d = bindingDeps({ ...sources(), nodes: { list: () => [forged], get: () => forged } });
    assert.equal(d.node('n1'), undefined);
  });

  it('protected requests on a node: only protected, unfinished pods, and none until the pods are listed', async () => {
    assert.equal(await deps.protectedBound('n1', DEFAULT_PROTECT), undefined);
    pods.replaceAll([facts('g', { qos: 'Guaranteed', cpuRequestMillicores: 500 }), facts('b'), facts('sys', { priority: 2_000_000_000 }), facts('done', { qos: 'Guaranteed', finished: true })]);
    const bound = await deps.protectedBound('n1', DEFAULT_PROTECT);
    assert.deepEqual(bound?.room, { cpuMillicores: 1500, memoryBytes: 2 * 2 ** 30 });
    assert.equal(bound?.has('b'), true);
  });

  it('the pod being bound is read from the API server; one that cannot be read is undefined', async () => {
    api.put(PODS, { metadata: { name: 'db-0', namespace: 'apps', uid: 'u-db' }, spec: { containers: [{ name: 'c', resources: { requests: { cpu: '1', memory: '1Gi' }, limits: { cpu: '1', memory: '1Gi' } } }] } });
    assert.deepEqual(await deps.pod('apps', 'db-0'), { uid: 'u-db', namespace: 'apps', requests: { cpuMillicores: 1000, memoryBytes: 2 ** 30 }, qos: 'Guaranteed', exclusiveCpus: 1, priority: 0 });
    assert.equal(await deps.pod('apps', 'gone'), undefined);
  });

  it('bindingPod: requests, QoS and exclusive CPUs from the spec', () => {
    const p = bindingPod({
      metadata: { uid: 'u', namespace: 'db' },
      spec: { priority: 7, containers: [{ name: 'c', resources: { requests: { cpu: '2', memory: '1Gi' }, limits: { cpu: '2', memory: '1Gi' } } }] },
    });
    assert.deepEqual(p, { uid: 'u', namespace: 'db', requests: { cpuMillicores: 2000, memoryBytes: 2 ** 30 }, qos: 'Guaranteed', exclusiveCpus: 2, priority: 7 });
  });

  it('a pod being created: read from the review\'s object, in the review\'s namespace, named by it (no uid yet); bad quantities are undefined', () => {
    const object = { metadata: { name: 'db-1' }, spec: { nodeName: 'n1', containers: [{ name: 'c', resources: { requests: { cpu: '1', memory: '1Gi' }, limits: { cpu: '1', memory: '1Gi' } } }] } };
    assert.deepEqual(deps.podOf(object, 'apps'), { uid: 'apps/db-1', namespace: 'apps', requests: { cpuMillicores: 1000, memoryBytes: 2 ** 30 }, qos: 'Guaranteed', exclusiveCpus: 1, priority: 0 });
    assert.equal(bindingPod({ metadata: { name: 'db-1' } }), undefined, 'a pod already created has a uid: without one it is not judged');
    assert.equal(deps.podOf({ metadata: { name: 'x' }, spec: { containers: [{ name: 'c', resources: { requests: { cpu: 'lots' } } }] } }, 'apps'), undefined);
  });
});
