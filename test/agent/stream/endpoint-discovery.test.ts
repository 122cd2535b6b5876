// The agent's discovery of gateway replicas (agent/stream/endpoint-discovery.ts)
// against a real HTTP server speaking the list/watch protocol: the Service's
// EndpointSlices only (label selector), the addresses told once after the
// first complete list, then only when they change, and kept while the API
// server is away.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { pino } from 'pino';
import { watchGatewayEndpoints } from '../../../agent/stream/endpoint-discovery.js';
import { FakeKubeApi, type FakeObject } from '../../helpers/fake-kube-api.js';
import { waitUntil } from '../../../scripts/harness/wait.js';

const SLICES = '/apis/discovery.k8s.io/v1/namespaces/oversell/endpointslices';
const slice = (name: string, service: string, addresses: string[]): FakeObject => ({
  metadata: { name, namespace: 'oversell', labels: { 'kubernetes.io/service-name': service } },
  ports: [{ name: 'grpc', port: 50051 }],
  endpoints: addresses.map((a) => ({ addresses: [a], conditions: { ready: true } })),
});

describe('watchGatewayEndpoints', () => {
  let api: FakeKubeApi;
  before(async () => {
    api = await FakeKubeApi.start([SLICES]);
  });
  after(() => api.close());

  it('tells the replicas once listed, then each change, and keeps them while the API server is away', async () => {
    api.put(SLICES, slice('gw-1', 'oversell-gateway', ['10.0.0.1', '10.0.0.2']));
    api.put(SLICES, slice('other-1', 'other', ['10.9.9.9']));
    const told: string[][] = [];
    const watching = await watchGatewayEndpoints(api.access(), 'oversell', 'oversell-gateway', (a) => told.push(a), pino({ level: 'silent' }));
    try {
      assert.deepEqual(told, [['10.0.0.1:50051', '10.0.0.2:50051']], 'once, after the complete list');
      await waitUntil('the watch open', () => (api.openWatches === 1 ? true : undefined));
      api.put(SLICES, slice('gw-2', 'oversell-gateway', ['10.0.0.3']));
      api.put(SLICES, slice('other-1', 'other', ['10.9.9.8']));
      await waitUntil('the new replica told', () => (told.length === 2 ? true : undefined));
      assert.deepEqual(told[1], ['10.0.0.1:50051', '10.0.0.2:50051', '10.0.0.3:50051']);
      api.put(SLICES, slice('gw-2', 'oversell-gateway', ['10.0.0.3'])); // the same addresses: nothing to tell
      api.refuse = { watch: 503 };
      api.endWatches();
      await waitUntil('a refused reconnect', () => (api.watchRequests().length >= 2 ? true : undefined), 5000);
      assert.equal(told.length, 2, 'no change told, none lost');
    } finally {
      api.refuse = {};
      await watching.stop();
    }
  });
});
