// The CA injected into the metrics APIService (self-managed certificates), against a fake API server.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { injectApiServiceCaBundle } from '../../../gateway/act/apiservice-cabundle.js';
import { METRICS_APISERVICE } from '../../../gateway/act/apiservice-handover.js';
import { FakeKubeApi, type FakeObject } from '../../helpers/fake-kube-api.js';

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
});
