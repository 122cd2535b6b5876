// The CA injected into the metrics APIService (self-managed certificates), against a fake API server.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { apiServiceCaBundleKeeper, injectApiServiceCaBundle } from '../../../gateway/act/apiservice-cabundle.js';
import { METRICS_APISERVICE } from '../../../gateway/act/apiservice-handover.js';
import { FakeKubeApi, type FakeObject } from '../../helpers/fake-kube-api.js';
import { silentLog } from '../../helpers/plugin-app.js';

const APISERVICES = '/apis/apiregistration.k8s.io/v1/apiservices';
const CA = '-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n';
const apiService = (labels: Record<string, string>, caBundle?: string): FakeObject => ({
  apiVersion: 'apiregistration.k8s.io/v1',
  kind: 'APIService',
  metadata: { name: METRICS_APISERVICE, labels },
  spec: { group: 'metrics.k8s.io', version: 'v1beta1', groupPriorityMinimum: 100, versionPriority: 100, service: { name: 'oversell-gateway', namespace: 'oversell', port: 4443 }, ...(caBundle && { caBundle }) },
});

describe('the metrics APIService caBundle', () => {
  let api: FakeKubeApi;
  before(async () => {
    api = await FakeKubeApi.start([APISERVICES]);
  });
  after(() => api.close());
  const current = () => api.objects(APISERVICES)[0] as FakeObject & { spec: Record<string, unknown> };

  it('puts our CA into ours, once, changing nothing else of it', async () => {
    api.put(APISERVICES, apiService({ 'app.kubernetes.io/part-of': 'oversell' }));
    const before = current();
    assert.equal(await injectApiServiceCaBundle(api.kubeConfig(), CA), true);
    const { caBundle, ...rest } = current().spec;
    assert.equal(caBundle, Buffer.from(CA).toString('base64'));
    assert.deepEqual(rest, before.spec);
    assert.deepEqual(current().metadata.labels, before.metadata.labels);
    const rv = current().metadata.resourceVersion;
    assert.equal(await injectApiServiceCaBundle(api.kubeConfig(), CA), false, 'right already: no write');
    assert.equal(current().metadata.resourceVersion, rv);
  });

  it('never touches one that is not ours (metrics-server\'s, not taken over)', async () => {
    api.put(APISERVICES, apiService({ 'app.kubernetes.io/name': 'metrics-server' }, 'bWV0cmljcy1zZXJ2ZXI='));
    await assert.rejects(injectApiServiceCaBundle(api.kubeConfig(), CA), /is not oversell's/);
    assert.equal(current().spec.caBundle, 'bWV0cmljcy1zZXJ2ZXI=');
  });

  const reads = () => api.requests.filter((u) => u.startsWith(`${APISERVICES}/${METRICS_APISERVICE}`)).length;
  const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

  it('retries a refused injection until ours is there (Helm\'s take-over comes after the gateway starts)', async () => {
    api.put(APISERVICES, apiService({ 'app.kubernetes.io/name': 'metrics-server' }, 'bWV0cmljcy1zZXJ2ZXI='));
    const keeper = apiServiceCaBundleKeeper(api.kubeConfig(), silentLog, { initialMs: 40, maxMs: 40 });
    try {
      await keeper.inject(CA);
      assert.equal(current().spec.caBundle, 'bWV0cmljcy1zZXJ2ZXI=', 'metrics-server\'s untouched');
      api.put(APISERVICES, apiService({ 'app.kubernetes.io/part-of': 'oversell' }));
      for (let i = 0; i < 100 && current().spec.caBundle !== Buffer.from(CA).toString('base64'); i++) await sleep(20);
      assert.equal(current().spec.caBundle, Buffer.from(CA).toString('base64'), 'injected by a retry, no new CA needed');
    } finally {
      keeper.stop();
    }
  });

  it('stop() ends the retries: a closed gateway sends nothing more', async () => {
    api.put(APISERVICES, apiService({ 'app.kubernetes.io/name': 'metrics-server' }, 'bWV0cmljcy1zZXJ2ZXI='));
    const keeper = apiServiceCaBundleKeeper(api.kubeConfig(), silentLog, { initialMs: 40, maxMs: 40 });
    await keeper.inject(CA);
    await sleep(100);
    const retried = reads();
    keeper.stop();
    await sleep(50); // a retry already in flight when stopped
    const atStop = reads();
    await sleep(200);
    assert.ok(retried >= 2, `${retried} reads: it was retrying before the stop`);
    assert.equal(reads(), atStop, 'no read after stop()');
  });
});
