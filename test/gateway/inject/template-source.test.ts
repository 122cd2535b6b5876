// The sidecar template source (gateway/inject/template-source.ts) against a
// real HTTP server speaking the list/watch protocol: only the labelled
// ConfigMaps of the namespace, listed at start and changed by the watch.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { pino } from 'pino';
import { configMapTemplateSource } from '../../../gateway/inject/template-source.js';
import { FakeKubeApi } from '../../helpers/fake-kube-api.js';
import { waitUntil } from '../../../scripts/harness/wait.js';

const CONFIGMAPS = '/api/v1/namespaces/oversell/configmaps';
const log = pino({ level: 'silent' });

describe('configMapTemplateSource', () => {
  let api: FakeKubeApi;
  before(async () => {
    api = await FakeKubeApi.start([CONFIGMAPS]);
  });
  after(() => api.close());

  it('sidecar templates: only the labelled ConfigMaps, listed at start and changed by the watch', async () => {
    const template = (name: string, image: string) => ({
      metadata: { name, namespace: 'oversell', labels: { 'oversell.io/sidecar-template': 'true' } },
      data: { 'sidecar.yaml': `containers:\n- name: ${name}\n  image: ${image}\n` },
    });
    api.put(CONFIGMAPS, template('proxy', 'envoy:1'));
    api.put(CONFIGMAPS, { metadata: { name: 'unrelated', namespace: 'oversell' }, data: {} });
    const source = await configMapTemplateSource(api.kubeConfig(), 'oversell', log);
    try {
      assert.deepEqual(source.templates().map((t) => [t.name, t.error]), [['proxy', undefined]]);
      for (const q of api.listRequests()) assert.equal(q.get('labelSelector'), 'oversell.io/sidecar-template=true');
      await waitUntil('the watch open', () => (api.openWatches === 1 ? true : undefined));
      api.put(CONFIGMAPS, template('logs', 'fluent-bit:3'));
      await waitUntil('logs in force', () => (source.templates().length === 2 ? true : undefined));
      assert.deepEqual(source.templates().map((t) => t.name), ['logs', 'proxy']);
    } finally {
      await source.stop();
    }
  });

  it('a refused list fails the start with what to check', async () => {
    api.refuse = { list: 403 };
    try {
      await assert.rejects(configMapTemplateSource(api.kubeConfig(), 'oversell', log), /cannot list ConfigMaps in oversell \(.*HTTP 403.*\); may the gateway list and watch them/);
    } finally {
      api.refuse = {};
    }
  });
});
