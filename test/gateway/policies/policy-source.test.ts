// The OversellPolicy source (gateway/policies/policy-source.ts) against a real
// HTTP server speaking the list/watch protocol: what is listed at start is in
// force at once, a change arrives by the watch and tells the listeners, the
// last known policies stay while the API server is away, and a refused list
// fails the start with what to check.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { pino } from 'pino';
import { crdPolicySource } from '../../../gateway/policies/policy-source.js';
import { FakeKubeApi } from '../../helpers/fake-kube-api.js';
import { waitUntil } from '../../../scripts/harness/wait.js';

const POLICIES = '/apis/oversell.io/v1alpha1/oversellpolicies';
const log = pino({ level: 'silent' });

describe('crdPolicySource', () => {
  let api: FakeKubeApi;
  before(async () => {
    api = await FakeKubeApi.start([POLICIES]);
  });
  after(() => api.close());

  it('OversellPolicies: listed at start, changed by the watch, kept while the API server is away', async () => {
    api.put(POLICIES, { metadata: { name: 'pool-a' }, spec: { priority: 1 } });
    const source = await crdPolicySource(api.kubeConfig(), log);
    try {
      assert.equal(source.notReady(), undefined);
      assert.deepEqual(source.entries().map((e) => e.name), ['pool-a']);
      let changes = 0;
      source.onChange(() => changes++);
      await waitUntil('the watch open', () => (api.openWatches === 1 ? true : undefined));
      api.put(POLICIES, { metadata: { name: 'pool-b' }, spec: { priority: 2 } });
      await waitUntil('pool-b in force', () => (source.entries().length === 2 ? true : undefined));
      assert.ok(changes >= 1);
      api.refuse = { watch: 503, list: 503 };
      api.endWatches();
      await waitUntil('a refused reconnect', () => (api.watchRequests().length >= 2 ? true : undefined), 5000);
      assert.deepEqual(source.entries().map((e) => e.name).sort(), ['pool-a', 'pool-b']);
    } finally {
      api.refuse = {};
      await source.stop();
    }
  });

  it('OversellPolicies: a refused list fails the start with what to check', async () => {
    api.refuse = { list: 404 };
    try {
      await assert.rejects(crdPolicySource(api.kubeConfig(), log), /cannot list OversellPolicies \(.*HTTP 404.*\); is the CRD installed/);
    } finally {
      api.refuse = {};
    }
  });
});
