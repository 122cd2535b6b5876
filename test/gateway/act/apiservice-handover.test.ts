// Take-over and give-back of the APIService v1beta1.metrics.k8s.io against a
// fake API server (real HTTP, the client-node calls the Helm hook Jobs make).
import assert from 'node:assert/strict';
import { after, before, beforeEach, describe, it } from 'node:test';
import type { V1APIService } from '@kubernetes/client-node';
import { ApiServiceHandover, METRICS_APISERVICE, parseSaved, REPLACED_DIGEST, restorable, SAVED_KEY, savedDigest } from '../../../gateway/act/apiservice-handover.js';
import { FakeKubeApi, type FakeObject } from '../../helpers/fake-kube-api.js';

const APISERVICES = '/apis/apiregistration.k8s.io/v1/apiservices';
const CONFIGMAPS = '/api/v1/namespaces/oversell/configmaps';
const SAVED = { namespace: 'oversell', name: 'oversell-metrics-api-previous' };

/** metrics-server's, as its Helm chart installs it (its release owns it: it must still after the give-back). */
const metricsServer = (): FakeObject => ({
  apiVersion: 'apiregistration.k8s.io/v1',
  kind: 'APIService',
  metadata: {
    name: METRICS_APISERVICE,
    uid: 'ms-uid',
    labels: { 'app.kubernetes.io/name': 'metrics-server', 'app.kubernetes.io/managed-by': 'Helm' },
    annotations: { 'meta.helm.sh/release-name': 'metrics-server', 'meta.helm.sh/release-namespace': 'kube-system' },
  } as FakeObject['metadata'],
  spec: { group: 'metrics.k8s.io', version: 'v1beta1', groupPriorityMinimum: 100, versionPriority: 100, insecureSkipTLSVerify: true, service: { name: 'metrics-server', namespace: 'kube-system', port: 443 } },
  status: { conditions: [{ type: 'Available', status: 'True' }] },
});

const ours = (): V1APIService => ({
  apiVersion: 'apiregistration.k8s.io/v1',
  kind: 'APIService',
  metadata: { name: METRICS_APISERVICE, labels: { 'app.kubernetes.io/part-of': 'oversell' } },
  spec: { group: 'metrics.k8s.io', version: 'v1beta1', groupPriorityMinimum: 100, versionPriority: 100, service: { name: 'oversell-gateway', namespace: 'oversell', port: 4443 } },
});

describe('APIService take-over and give-back', () => {
  let api: FakeKubeApi;
  let handover: ApiServiceHandover;
  before(async () => {
    api = await FakeKubeApi.start([APISERVICES, CONFIGMAPS]);
    handover = new ApiServiceHandover(api.kubeConfig(), SAVED);
  });
  after(() => api.close());
  beforeEach(() => {
    for (const path of [APISERVICES, CONFIGMAPS]) for (const o of api.objects(path)) api.remove(path, o.metadata.name.includes('/') ? o.metadata.name : `${o.metadata.namespace ? `${o.metadata.namespace}/` : ''}${o.metadata.name}`);
  });
  const current = () => api.objects(APISERVICES).find((o) => o.metadata.name === METRICS_APISERVICE) as (FakeObject & V1APIService) | undefined;
  const saved = () => api.objects(CONFIGMAPS).find((o) => o.metadata.name === SAVED.name) as (FakeObject & { data?: Record<string, string> }) | undefined;

  it('where none exists, installs ours, saves nothing, and give-back removes ours', async () => {
    assert.equal(await handover.takeOver(ours()), 'created');
    assert.equal(current()?.spec?.service?.name, 'oversell-gateway');
    assert.equal(saved(), undefined);
    assert.deepEqual(await handover.giveBack(), { result: 'removed' });
    assert.equal(current(), undefined);
    assert.deepEqual(await handover.giveBack(), { result: 'nothing-to-do' });
  });

  it('saves metrics-server\'s before replacing it, and gives it back as it was (labels, Helm ownership, spec)', async () => {
    api.put(APISERVICES, metricsServer());
    assert.equal(await handover.takeOver(ours()), 'took-over');
    assert.deepEqual(current()?.spec, ours().spec, 'ours in place, nothing of metrics-server\'s spec (insecureSkipTLSVerify) kept');
    assert.equal(current()?.metadata?.labels?.['app.kubernetes.io/part-of'], 'oversell');
    assert.equal(current()?.metadata?.annotations?.[REPLACED_DIGEST], savedDigest(metricsServer() as V1APIService), 'ours records what it replaced');
    const kept = saved();
    assert.ok(kept?.data?.[SAVED_KEY], 'the ConfigMap holds the replaced APIService');
    const stored = JSON.parse(kept.data[SAVED_KEY]) as V1APIService;
    assert.deepEqual(stored, restorable(metricsServer() as V1APIService));
    assert.equal(stored.metadata?.resourceVersion, undefined, 'no server-set fields: it can be created again');
    assert.equal((stored as { status?: unknown }).status, undefined);

    // A second take-over (helm upgrade) finds ours: the saved one stays metrics-server's.
    assert.equal(await handover.takeOver(ours()), 'updated');
    assert.deepEqual(JSON.parse(saved()?.data?.[SAVED_KEY] ?? '{}'), stored);
    assert.equal(current()?.metadata?.annotations?.[REPLACED_DIGEST], savedDigest(metricsServer() as V1APIService), 'the record survives an upgrade');

    assert.deepEqual(await handover.giveBack(), { result: 'given-back' });
    const back = current();
    assert.deepEqual(back?.spec, metricsServer().spec);
    assert.deepEqual(back?.metadata.labels, metricsServer().metadata.labels);
    assert.deepEqual((back?.metadata as V1APIService['metadata'])?.annotations, (metricsServer().metadata as V1APIService['metadata'])?.annotations, 'metrics-server\'s Helm release owns it again');
    assert.equal(saved(), undefined, 'the ConfigMap is gone once given back');
  });

  it('refuses to create the saved one once ours is gone: without the record nothing proves it (Helm keeps ours for the give-back)', async () => {
    api.put(APISERVICES, metricsServer());
    await handover.takeOver(ours());
    api.remove(APISERVICES, METRICS_APISERVICE);
    const outcome = await handover.giveBack();
    assert.equal(outcome.result, 'refused-unproven');
    assert.match(outcome.detail ?? '', /is gone, and with it the record.*kube-system\/metrics-server without TLS verification.*ConfigMap is kept/);
    assert.equal(current(), undefined, 'no APIService created');
    assert.ok(saved(), 'the ConfigMap is left for the operator');
  });

  it('keeps the caBundle injected into ours when it installs ours again', async () => {
    api.put(APISERVICES, { ...(ours() as FakeObject), spec: { ...ours().spec, caBundle: 'Q0E=' } });
    assert.equal(await handover.takeOver(ours()), 'updated');
    assert.equal(current()?.spec?.caBundle, 'Q0E=');
  });

  it('leaves a foreign APIService installed since alone, and the saved one kept', async () => {
    api.put(APISERVICES, metricsServer());
    await handover.takeOver(ours());
    api.put(APISERVICES, { ...metricsServer(), metadata: { ...metricsServer().metadata, uid: 'other' } });
    assert.deepEqual(await handover.giveBack(), { result: 'left-foreign' });
    assert.ok(saved(), 'nothing lost: the saved APIService is still there');
  });

  // The red-team finding: anyone with ConfigMap rights in the namespace plants
  // (or edits) the saved APIService to send metrics.k8s.io to their Service.
  const planted = (): string =>
    [
      'apiVersion: apiregistration.k8s.io/v1', 'kind: APIService', 'metadata:', `  name: ${METRICS_APISERVICE}`, '  resourceVersion: "4242"', '  uid: abc',
      '  creationTimestamp: "2026-11-28T11:55:10Z"', '  labels: { k8s-app: metrics-server }', 'spec:', '  group: metrics.k8s.io', '  version: v1beta1',
      '  groupPriorityMinimum: 100', '  versionPriority: 100', '  insecureSkipTLSVerify: true', '  service: { name: evil, namespace: attacker, port: 443 }',
      'status:', '  conditions: [{ type: Available, status: "True" }]',
    ].join('\n');

  it('refuses a planted ConfigMap where oversell took nothing over: removes ours, installs nothing, keeps the ConfigMap', async () => {
    api.put(CONFIGMAPS, { metadata: { name: SAVED.name, namespace: 'oversell' }, data: { 'apiservice.yaml': planted() } });
    api.put(APISERVICES, ours() as FakeObject);
    const outcome = await handover.giveBack();
    assert.equal(outcome.result, 'refused-unproven');
    assert.match(outcome.detail ?? '', /records no take-over.*attacker\/evil without TLS verification/);
    assert.equal(current(), undefined, 'metrics.k8s.io not pointed at the planted Service');
    assert.ok(saved());
  });

  it('refuses a saved APIService edited after the take-over (another Service, same name and labels)', async () => {
    api.put(APISERVICES, metricsServer());
    await handover.takeOver(ours());
    const cm = saved();
    assert.ok(cm?.data);
    const edited = JSON.parse(cm.data[SAVED_KEY] ?? '{}') as V1APIService;
    edited.spec = { ...edited.spec, service: { name: 'evil', namespace: 'attacker', port: 443 } } as V1APIService['spec'];
    api.put(CONFIGMAPS, { ...cm, data: { [SAVED_KEY]: JSON.stringify(edited) } });
    const outcome = await handover.giveBack();
    assert.equal(outcome.result, 'refused-unproven');
    assert.match(outcome.detail ?? '', /is not what oversell's take-over saved/);
    assert.equal(current(), undefined);
  });

  it('gives back the saved one however the ConfigMap spells it (YAML, keys reordered, server fields): the digest is of the restorable object', async () => {
    api.put(APISERVICES, metricsServer());
    await handover.takeOver(ours());
    const yaml = [
      'kind: APIService', 'apiVersion: apiregistration.k8s.io/v1', 'status: { conditions: [] }', 'metadata:', '  uid: zzz', `  name: ${METRICS_APISERVICE}`,
      '  annotations: { meta.helm.sh/release-namespace: kube-system, meta.helm.sh/release-name: metrics-server }',
      '  labels: { app.kubernetes.io/managed-by: Helm, app.kubernetes.io/name: metrics-server }',
      'spec: { service: { port: 443, namespace: kube-system, name: metrics-server }, insecureSkipTLSVerify: true, versionPriority: 100, groupPriorityMinimum: 100, version: v1beta1, group: metrics.k8s.io }',
    ].join('\n');
    api.put(CONFIGMAPS, { metadata: { name: SAVED.name, namespace: 'oversell' }, data: { 'apiservice.yaml': yaml } });
    assert.deepEqual(await handover.giveBack(), { result: 'given-back' });
    assert.equal(current()?.spec?.service?.name, 'metrics-server');
  });

  it('refuses to install anything but ours, and a saved object that is not the metrics APIService', async () => {
    await assert.rejects(handover.takeOver({ ...ours(), metadata: { name: METRICS_APISERVICE } }), /labelled app.kubernetes.io\/part-of=oversell/);
    assert.equal(current(), undefined);
    assert.throws(() => parseSaved({ other: 'x' }, 'ConfigMap oversell/x'), /has none of the keys apiservice.json, apiservice.yaml/);
    assert.throws(() => parseSaved({ [SAVED_KEY]: '{"kind":"APIService","metadata":{"name":"v1beta1.custom.metrics.k8s.io"},"spec":{}}' }, 'c'), /not v1beta1.metrics.k8s.io: not restoring it/);
    assert.throws(() => parseSaved({ [SAVED_KEY]: '{"kind":"ConfigMap"}' }, 'c'), /is not an APIService/);
    // A refused give-back changes nothing: the saved ConfigMap stays.
    api.put(CONFIGMAPS, { metadata: { name: SAVED.name, namespace: 'oversell' }, data: { [SAVED_KEY]: '{"kind":"ConfigMap"}' } });
    await assert.rejects(handover.giveBack(), /is not an APIService/);
    assert.ok(saved());
  });
});
