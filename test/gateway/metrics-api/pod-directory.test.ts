// The pod directory of the metrics API (gateway/metrics-api/pod-directory.ts,
// pod-directory-watch.ts): a pod reduced to its names and container ids,
// kept by uid and by name, fed by a list-watch of a fake API server.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { V1Pod } from '@kubernetes/client-node';
import { directoryPod, PodDirectory } from '../../../gateway/metrics-api/pod-directory.js';
import { watchPodDirectory } from '../../../gateway/metrics-api/pod-directory-watch.js';
import { FakeKubeApi } from '../../helpers/fake-kube-api.js';
import { eventually } from '../../helpers/grpc.js';
import { silentLog } from '../../helpers/plugin-app.js';

const id = (c: string) => c.repeat(64);

describe('directoryPod', () => {
  it('containers, sidecars and ephemeral containers by runtime id without the runtime prefix; not started ones left out', () => {
    const pod: V1Pod = {
      metadata: { uid: 'u1', namespace: 'shop', name: 'web-1', labels: { app: 'web' } },
      spec: { nodeName: 'node-a', containers: [] },
      status: {
        containerStatuses: [{ name: 'app', containerID: `containerd://${id('a')}` } as never, { name: 'waiting', containerID: '' } as never],
        initContainerStatuses: [{ name: 'proxy', containerID: `cri-o://${id('b')}` } as never],
        ephemeralContainerStatuses: [{ name: 'debug', containerID: `docker://${id('d')}` } as never],
      },
    };
    assert.deepEqual(directoryPod(pod), { uid: 'u1', namespace: 'shop', name: 'web-1', node: 'node-a', labels: { app: 'web' }, containers: [id('a'), 'app', id('b'), 'proxy', id('d'), 'debug'] });
  });
  it('an unbound pod is not kept', () => assert.equal(directoryPod({ metadata: { uid: 'u', name: 'n' }, spec: { containers: [] } }), undefined));
});

describe('PodDirectory', () => {
  it('a name reused by a new pod: deleting the old uid keeps the new one\'s name', () => {
    const d = new PodDirectory();
    d.set({ uid: 'old', namespace: 'ns', name: 'p', node: 'n', labels: {}, containers: [] });
    d.set({ uid: 'new', namespace: 'ns', name: 'p', node: 'n', labels: {}, containers: [] });
    d.delete('old');
    assert.equal(d.byName('ns', 'p')?.uid, 'new');
    d.delete('new');
    assert.equal(d.byName('ns', 'p'), undefined);
    assert.equal(d.size, 0);
  });
});

describe('watchPodDirectory', () => {
  it('lists bound, unfinished pods, then follows changes and deletions', async () => {
    const api = await FakeKubeApi.start(['/api/v1/pods']);
    const d = new PodDirectory();
    const pod = (uid: string, phase: string, containerId: string) => ({
      metadata: { uid, namespace: 'ns', name: uid },
      spec: { nodeName: 'node-a' },
      status: { phase, containerStatuses: [{ name: 'app', containerID: `containerd://${containerId}` }] },
    });
    api.put('/api/v1/pods', pod('p1', 'Running', id('a')));
    api.put('/api/v1/pods', pod('done', 'Succeeded', id('b')));
    const watching = await watchPodDirectory(api.kubeConfig(), d, silentLog);
    try {
      assert.equal(d.synced, true);
      assert.deepEqual([d.size, d.byUid('p1')?.containers], [1, [id('a'), 'app']]);
      assert.equal(api.listRequests()[0]?.get('fieldSelector'), 'spec.nodeName!=,status.phase!=Succeeded,status.phase!=Failed');
      // The container restarted: a new id.
      api.put('/api/v1/pods', pod('p1', 'Running', id('c')));
      await eventually(() => (d.byUid('p1')?.containers[0] === id('c') ? true : undefined), 5000, 'the new id');
      api.remove('/api/v1/pods', 'ns/p1');
      await eventually(() => (d.size === 0 ? true : undefined), 5000, 'the pod gone');
    } finally {
      await watching.stop();
      await api.close();
    }
  });
});
