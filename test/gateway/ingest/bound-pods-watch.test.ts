// The gateway's bound-pods watch (gateway/ingest/bound-pods-watch.ts) against a
// real HTTP server speaking the list/watch protocol: BoundRequests is synced
// only once the whole paged list is in, the watch's changes land per pod, the
// sums stay in force (synced) while the API server is away, and a 410 Gone
// replaces them with the pods bound now, not a mix of old and new.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { pino } from 'pino';
import { watchBoundPods } from '../../../gateway/ingest/bound-pods-watch.js';
import { BoundRequests } from '../../../gateway/store/bound-requests.js';
import { PodDirectory } from '../../../gateway/store/pod-directory.js';
import { PodFactsStore } from '../../../gateway/store/pod-facts.js';
import { FakeKubeApi, type FakeObject } from '../../helpers/fake-kube-api.js';
import { waitUntil } from '../../../scripts/harness/wait.js';

const PODS = '/api/v1/pods';
const pod = (name: string, node: string, cpu: string, phase = 'Running'): FakeObject => ({
  metadata: { name, namespace: 'default', uid: `uid-${name}` },
  spec: { nodeName: node, containers: [{ name: 'c', resources: { requests: { cpu, memory: '1Mi' } } }] },
  status: { phase },
});
const cpuOf = (bound: BoundRequests, node: string) => bound.of(node, Date.now())?.cpuMillicores;

describe('watchBoundPods', () => {
  let api: FakeKubeApi;
  const log = pino({ level: 'silent' });
  before(async () => {
    api = await FakeKubeApi.start([PODS]);
  });
  after(() => api.close());

  it('lists every bound pod in pages of 500, then follows the watch; unbound and finished pods hold nothing', async () => {
    for (let i = 0; i < 501; i++) api.put(PODS, pod(`p${i}`, 'node-a', '1m'));
    api.put(PODS, { ...pod('pending', '', '5'), spec: { containers: [] } });
    api.put(PODS, pod('done', 'node-a', '7', 'Succeeded'));
    const bound = new BoundRequests();
    assert.equal(bound.synced, false);
    const watching = await watchBoundPods(api.kubeConfig(), { requests: bound }, log);
    try {
      assert.equal(bound.synced, true);
      assert.equal(cpuOf(bound, 'node-a'), 501);
      const lists = api.listRequests();
      assert.equal(lists.length, 2, 'two pages');
      for (const q of lists) {
        assert.equal(q.get('fieldSelector'), 'spec.nodeName!=');
        assert.equal(q.get('limit'), '500');
      }
      api.put(PODS, pod('big', 'node-b', '2'));
      api.put(PODS, pod('p0', 'node-a', '1m', 'Failed'));
      await waitUntil('the watch applied', () => (cpuOf(bound, 'node-b') === 2000 && cpuOf(bound, 'node-a') === 500 ? true : undefined));

      // The API server goes away: the sums stay, synced.
      api.refuse = { watch: 503, list: 503 };
      api.endWatches();
      await waitUntil('a refused reconnect', () => (api.watchRequests().length >= 2 ? true : undefined), 5000);
      assert.equal(bound.synced, true);
      assert.equal(cpuOf(bound, 'node-b'), 2000);

      // Meanwhile node-b's pod goes, node-c gets one, and the history is compacted: 410, one list, the sums as they are now.
      api.remove(PODS, 'default/big');
      api.put(PODS, pod('c', 'node-c', '3'));
      api.compact();
      const lists0 = api.listRequests().length;
      api.refuse = {};
      await waitUntil('listed again', () => (cpuOf(bound, 'node-c') === 3000 ? true : undefined), 10_000);
      assert.equal(cpuOf(bound, 'node-b'), 0, 'the pod that went while away is gone');
      assert.equal(cpuOf(bound, 'node-a'), 500);
      assert.ok(api.listRequests().length > lists0);
    } finally {
      await watching.stop();
    }
  });

  it('a refused list fails the start and says what the gateway needs', async () => {
    api.refuse = { list: 403 };
    try {
      await assert.rejects(watchBoundPods(api.kubeConfig(), { requests: new BoundRequests() }, log), /cannot list the pods bound to nodes: .*HTTP 403.*list and watch on pods/);
    } finally {
      api.refuse = {};
    }
  });

  it('one list and one watch feed both stores: requests for the decision, names and container ids for the metrics API', async () => {
    const api2 = await FakeKubeApi.start([PODS]);
    const id = (c: string) => c.repeat(64);
    const named = (name: string, phase: string, containerId: string): FakeObject => ({
      ...pod(name, 'node-a', '100m', phase),
      status: { phase, containerStatuses: [{ name: 'app', containerID: `containerd://${containerId}` }] },
    });
    api2.put(PODS, named('web', 'Running', id('a')));
    api2.put(PODS, named('done', 'Succeeded', id('b')));
    const bound = new BoundRequests();
    const directory = new PodDirectory();
    const facts = new PodFactsStore();
    const watching = await watchBoundPods(api2.kubeConfig(), { requests: bound, directory, facts }, log);
    try {
      assert.deepEqual([bound.synced, directory.synced], [true, true]);
      assert.deepEqual(facts.on('node-a').map((p) => [p.namespace, p.name, p.qos, p.priority]), [['default', 'web', 'Burstable', 0]], 'relief\'s facts: the running pod only');
      assert.equal(cpuOf(bound, 'node-a'), 100);
      assert.deepEqual([directory.size, directory.byName('default', 'web')?.containers], [1, [id('a'), 'app']], 'a finished pod has no usage to name');
      // The container restarted: a new id; then the pod finished and leaves both.
      api2.put(PODS, named('web', 'Running', id('c')));
      await waitUntil('the new id', () => (directory.byUid('uid-web')?.containers[0] === id('c') ? true : undefined), 5000);
      api2.put(PODS, named('web', 'Failed', id('c')));
      await waitUntil('the finished pod gone from all three', () => (directory.size === 0 && facts.on('node-a').length === 0 && cpuOf(bound, 'node-a') === 0 ? true : undefined), 5000);
      assert.equal(api2.listRequests().length, 1, 'one list for both stores');
      assert.equal(api2.watchRequests().length, 1, 'one watch for both stores');
    } finally {
      await watching.stop();
      await api2.close();
    }
  });

  it('a pod being deleted (deletionTimestamp) still counts, and is said to be leaving its node', async () => {
    const api3 = await FakeKubeApi.start([PODS]);
    api3.put(PODS, pod('web', 'node-a', '100m', 'Running'));
    const bound = new BoundRequests();
    const heard: string[] = [];
    bound.onLeaving((node) => heard.push(node));
    const watching = await watchBoundPods(api3.kubeConfig(), { requests: bound }, log);
    try {
      assert.deepEqual(bound.of('node-a', 0)?.leaving, { cpuMillicores: 0, memoryBytes: 0 });
      const leaving = pod('web', 'node-a', '100m', 'Running');
      api3.put(PODS, { ...leaving, metadata: { ...leaving.metadata, deletionTimestamp: '2026-12-05T07:00:00Z' } });
      await waitUntil('the pod leaving', () => (bound.of('node-a', 0)?.leaving.cpuMillicores === 100 ? true : undefined), 5000);
      assert.equal(cpuOf(bound, 'node-a'), 100, 'still bound until it is gone');
      assert.deepEqual(heard, ['node-a']);
    } finally {
      await watching.stop();
      await api3.close();
    }
  });
});
