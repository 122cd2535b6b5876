// The pod directory of the metrics API (gateway/store/pod-directory.ts): a pod
// reduced to its names and container ids, kept by uid and by name. The watch
// that fills it is tested with the bound pods watch (bound-pods-watch.test.ts).
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { V1Pod } from '@kubernetes/client-node';
import { directoryPod, PodDirectory } from '../../../gateway/store/pod-directory.js';

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
