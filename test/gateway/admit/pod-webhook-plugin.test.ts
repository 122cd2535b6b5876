// POST /mutate/pods and /mutate/pods/required (gateway/admit/pod-webhook-plugin.ts):
// what the plugin adds around reviewPod() — answers to what is no
// AdmissionReview, a bug of ours, metrics — through fastify's inject(); and one
// smoke test over real HTTPS through the whole gateway. Which pod gets which
// patch is test/gateway/admit/pod-review.test.ts.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { after, before, describe, it } from 'node:test';
import { podWebhookPlugin } from '../../../gateway/admit/pod-webhook-plugin.js';
import type { PodReviewDeps } from '../../../gateway/admit/pod-review.js';
import { GATEWAY_DEFAULTS } from '../../../gateway/config/defaults.js';
import { INJECT } from '../../../gateway/inject/pod-injection.js';
import { parseTemplate, type TemplateEntry } from '../../../gateway/inject/sidecar-template.js';
import { NodeStore } from '../../../gateway/store/node-store.js';
import { getHttp, listTemplateSource, postHttps, startTestGateway } from '../../helpers/gateway.js';
import { applied, patchOf } from '../../helpers/node-reviews.js';
import { pluginApp, type PluginApp } from '../../helpers/plugin-app.js';

interface Review {
  request: { uid: string; namespace?: string; operation: string; object: { metadata: { annotations?: Record<string, string> }; spec: { containers: Array<{ name: string }>; initContainers?: Array<{ name: string }> } } };
}
interface Answer {
  apiVersion: string;
  response: { uid: string; allowed: boolean; patch?: string; patchType?: string; warnings?: string[]; status?: { code: number; message: string } };
}

const fixture = readFileSync(new URL('../../fixtures/admission/pod-create.json', import.meta.url), 'utf8');
const freshReview = (): Review => JSON.parse(fixture) as Review;

const mesh = parseTemplate('mesh', {
  default: true,
  initContainers: [{ name: 'mesh-proxy', image: 'envoy:1.30', restartPolicy: 'Always' }],
  volumes: [{ name: 'mesh-certs', emptyDir: { medium: 'Memory' } }],
});
const web = parseTemplate('web', { containers: [{ name: 'web', image: 'other:1' }] });

const store = () => new NodeStore({ retainMs: 60_000, forgetAfterMs: GATEWAY_DEFAULTS.forgetAfterMs });
const podWebhook = (deps: PodReviewDeps) => pluginApp(podWebhookPlugin, store(), { deps });
const templatesOf = (list: TemplateEntry[]): PodReviewDeps => ({ templates: () => list, excludedNamespaces: new Set(['kube-system']) });
/** Templates that throw on every review: a bug of ours. */
const throwing: PodReviewDeps = {
  templates: () => {
    throw new Error('boom');
  },
  excludedNamespaces: new Set(),
};

describe('pod webhook plugin: answers to what is no AdmissionReview', () => {
  let app: PluginApp;
  before(async () => {
    app = await podWebhook(templatesOf([mesh]));
  });
  after(() => app.close());

  const garbage: Array<[string, string, number, RegExp, Record<string, string>?]> = [
    ['invalid JSON', '{"apiVersion": "admission.k8s.io/v1", "kind": ', 400, /JSON/i],
    ['a JSON array', '[]', 400, /JSON object/],
    ['a review without uid', JSON.stringify({ apiVersion: 'admission.k8s.io/v1', kind: 'AdmissionReview', request: {} }), 400, /uid/],
    ['the wrong content type', 'uid=1', 415, /content-type|Unsupported Media Type/i, { 'content-type': 'application/x-www-form-urlencoded' }],
    ['a text/plain body', 'hello', 400, /JSON object/, { 'content-type': 'text/plain' }],
  ];
  for (const path of ['/mutate/pods', '/mutate/pods/required']) {
    for (const [what, body, status, message, headers] of garbage) {
      it(`${path}: answers ${what} with ${status} and a message`, async () => {
        const res = await app.post(path, body, headers);
        assert.equal(res.statusCode, status, res.body);
        assert.match((res.json() as { message: string }).message, message);
      });
    }
  }
});

describe('pod webhook plugin: a bug of ours', () => {
  it('lets the pod through unchanged, answered in kind, counted as error', async () => {
    const app = await podWebhook(throwing);
    try {
      const r = freshReview();
      const res = await app.post('/mutate/pods', JSON.stringify(r));
      assert.equal(res.statusCode, 200);
      assert.deepEqual((res.json() as Answer).response, { uid: r.request.uid, allowed: true });
      assert.equal(await app.series('oversell_pod_webhook_request_duration_seconds_count{outcome="error"}'), 1);
    } finally {
      await app.close();
    }
  });

  it('refuses the pod where sidecars are required, instead of letting it run without them', async () => {
    const app = await podWebhook(throwing);
    try {
      const res = await app.post('/mutate/pods/required', JSON.stringify(freshReview()));
      assert.equal(res.statusCode, 200);
      const answer = res.json() as Answer;
      assert.equal(answer.response.allowed, false);
      assert.equal(answer.response.status?.code, 403);
      assert.match(answer.response.status?.message ?? '', /sidecar webhook failed \(boom\)/);
      assert.equal(await app.series('oversell_pod_webhook_request_duration_seconds_count{outcome="error"}'), 1);
    } finally {
      await app.close();
    }
  });
});

describe('pod webhook plugin: metrics', () => {
  // One row per outcome: the review sent, the path, and the series it must raise (from a fresh registry).
  const rows: Array<{ outcome: string; path?: string; review: () => unknown; series: string[] }> = [
    { outcome: 'injected', review: freshReview, series: ['oversell_sidecar_injections_total{template="mesh"}'] },
    {
      outcome: 'unchanged',
      review: () => {
        const r = freshReview();
        r.request.object.metadata.annotations = { [INJECT.sidecars]: '' };
        return r;
      },
      series: [],
    },
    {
      outcome: 'refused',
      review: () => {
        const r = freshReview();
        r.request.object.metadata.annotations = { [INJECT.sidecars]: 'web' };
        return r;
      },
      series: ['oversell_sidecar_refusals_total{template="web",reason="collision"}'],
    },
    {
      outcome: 'denied', path: '/mutate/pods/required',
      review: () => {
        const r = freshReview();
        r.request.object.spec.containers.push({ name: 'mesh-proxy' });
        return r;
      },
      series: ['oversell_sidecar_refusals_total{template="mesh",reason="collision"}'],
    },
    {
      outcome: 'skipped',
      review: () => {
        const r = freshReview();
        r.request.operation = 'UPDATE';
        return r;
      },
      series: [],
    },
    { outcome: 'bad-request', review: () => [], series: [] },
  ];
  for (const row of rows) {
    it(`${row.outcome}: counted in the pod webhook's own series, not the node webhook's`, async () => {
      const app = await podWebhook(templatesOf([mesh, web]));
      try {
        await app.post(row.path ?? '/mutate/pods', JSON.stringify(row.review()));
        assert.equal(await app.series(`oversell_pod_webhook_request_duration_seconds_count{outcome="${row.outcome}"}`), 1);
        for (const s of row.series) assert.equal(await app.series(s), 1, s);
        assert.equal(await app.series(`oversell_webhook_request_duration_seconds_count{outcome="${row.outcome}"}`), 0);
      } finally {
        await app.close();
      }
    });
  }
});

describe('pod webhook plugin over real HTTPS (smoke)', () => {
  it('the gateway injects the default template, never touches kube-system, and counts its templates', async () => {
    const gw = await startTestGateway({ sidecars: { source: listTemplateSource([mesh]), excludedNamespaces: ['oversell'] } });
    try {
      const r = freshReview();
      const res = await postHttps(gw, '/mutate/pods', JSON.stringify(r));
      assert.equal(res.status, 200, res.body);
      const answer = res.json() as Answer;
      assert.equal(answer.apiVersion, 'admission.k8s.io/v1');
      assert.equal(answer.response.uid, r.request.uid);
      assert.equal(answer.response.allowed, true);
      assert.deepEqual(applied(r.request.object, patchOf(answer)).spec.initContainers?.map((c) => c.name), ['mesh-proxy']);
      // kube-system is excluded by the gateway itself, whatever is configured.
      const system = freshReview();
      system.request.namespace = 'kube-system';
      const untouched = (await postHttps(gw, '/mutate/pods', JSON.stringify(system))).json() as Answer;
      assert.deepEqual(untouched.response, { uid: system.request.uid, allowed: true });
      assert.match((await getHttp(gw.ports.metrics, '/metrics')).body, /oversell_sidecar_templates\{state="valid"\} 1/);
    } finally {
      await gw.close();
    }
  });
});
