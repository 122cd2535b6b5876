// The gateway's node cache (gateway/ingest/node-watch.ts) against a real HTTP
// server speaking the list/watch protocol: only the opted-in nodes (the label
// selector), each one observed into the store as it is listed or changes,
// forgotten when deleted, and forgotten too when it was deleted while the
// watch was away and the relist after 410 Gone no longer has it.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { pino } from 'pino';
import { GrantProof } from '../../../gateway/decide/grant-proof.js';
import type { StoredNodeObservation } from '../../../gateway/decide/node-decision.js';
import { NodeWatch } from '../../../gateway/ingest/node-watch.js';
import type { NodeStore } from '../../../gateway/store/node-store.js';
import { FakeKubeApi, type FakeObject } from '../../helpers/fake-kube-api.js';
import { waitUntil } from '../../../scripts/harness/wait.js';

const NODES = '/api/v1/nodes';
const node = (name: string, optIn = true, pool = 'a'): FakeObject => ({
  metadata: { name, labels: { pool, ...(optIn && { 'oversell.io/enabled': 'true' }) } },
  status: { allocatable: { cpu: '4', memory: '8Gi' }, capacity: { cpu: '4', memory: '8Gi' } },
});

describe('NodeWatch', () => {
  let api: FakeKubeApi;
  before(async () => {
    api = await FakeKubeApi.start([NODES]);
  });
  after(() => api.close());

  it('observes the opted-in nodes, their changes and deletions, and forgets a node that went while the watch was away', async () => {
    api.put(NODES, node('n1'));
    api.put(NODES, node('n2'));
    api.put(NODES, node('out', false));
    const observed = new Map<string, StoredNodeObservation>();
    const store = {
      observe: (name: string, o: StoredNodeObservation) => observed.set(name, o),
      forgetObservation: (name: string) => observed.delete(name),
    } as unknown as NodeStore;
    const watch = new NodeWatch({ kubeConfig: api.kubeConfig(), optInSelector: 'oversell.io/enabled=true', store, proof: new GrantProof(Buffer.alloc(32, 7)), log: pino({ level: 'silent' }), now: Date.now });
    await watch.start();
    try {
      assert.deepEqual([...observed.keys()].sort(), ['n1', 'n2']);
      assert.deepEqual(watch.list().map((n) => n.metadata?.name).sort(), ['n1', 'n2']);
      assert.equal(watch.get('n1')?.metadata?.labels?.pool, 'a');
      for (const q of api.requests.map((u) => new URL(u, 'http://x').searchParams)) assert.equal(q.get('labelSelector'), 'oversell.io/enabled=true');

      await waitUntil('the watch open', () => (api.openWatches === 1 ? true : undefined));
      api.put(NODES, node('n1', true, 'b'));
      api.remove(NODES, 'n2');
      await waitUntil('relabelled and deleted', () => (observed.get('n1')?.labels.pool === 'b' && !observed.has('n2') ? true : undefined));
      assert.equal(watch.get('n2'), undefined);

      // Away while n1 is deleted and n3 joins; the history is compacted: the relist tells both.
      api.refuse = { watch: 503 };
      api.endWatches();
      await waitUntil('a refused reconnect', () => (api.watchRequests().length >= 2 ? true : undefined), 5000);
      api.remove(NODES, 'n1');
      api.put(NODES, node('n3'));
      api.compact();
      api.refuse = {};
      await waitUntil('n1 forgotten, n3 observed', () => (!observed.has('n1') && observed.has('n3') ? true : undefined), 10_000);
      assert.deepEqual(watch.list().map((n) => n.metadata?.name), ['n3']);
    } finally {
      await watch.stop();
    }
  });

  it('a refused list fails the start and says what the gateway needs', async () => {
    api.refuse = { list: 403 };
    const store = { observe() {}, forgetObservation() {} } as unknown as NodeStore;
    const watch = new NodeWatch({ kubeConfig: api.kubeConfig(), optInSelector: 'oversell.io/enabled=true', store, proof: new GrantProof(Buffer.alloc(32, 7)), log: pino({ level: 'silent' }), now: Date.now });
    try {
      await assert.rejects(watch.start(), /cannot list the opted-in nodes: .*HTTP 403.*list and watch on nodes/);
    } finally {
      api.refuse = {};
      await watch.stop();
    }
  });
});
