// POST /mutate/pods through the real gateway over real HTTPS: what the API
// server sends on a pod CREATE, and what comes back.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { after, before, describe, it } from 'node:test';
import jsonpatch from 'fast-json-patch';
import { INJECT } from '../gateway/inject/pod-injection.js';
import { parseTemplate, type TemplateEntry } from '../gateway/inject/sidecar-template.js';
import type { TemplateSource } from '../gateway/inject/template-source.js';
import { assertAllowedUnchanged, getHttp, listTemplateSource, postHttps, startTestGateway, type TestGateway } from './helpers/gateway.js';

interface PodObject {
  metadata: { name?: string; namespace?: string; annotations?: Record<string, string>; [k: string]: unknown };
  spec: { containers: Array<{ name: string; env?: unknown[] }>; initContainers?: Array<{ name: string }>; volumes?: Array<{ name: string }>; [k: string]: unknown };
}
interface Review {
  apiVersion: string;
  kind: string;
  request: { uid: string; namespace?: string; operation: string; subResource?: string; kind: { kind: string }; resource: { resource: string }; object: PodObject };
}
interface Answer {
  apiVersion: string;
  kind: string;
  response: { uid: string; allowed: boolean; patchType?: string; patch?: string; warnings?: string[]; status?: { code: number; message: string } };
}

const fixture = readFileSync(new URL('./fixtures/admission/pod-create.json', import.meta.url), 'utf8');
const freshReview = (annotations?: Record<string, string>): Review => {
  const r = JSON.parse(fixture) as Review;
  if (annotations) r.request.object.metadata.annotations = annotations;
  return r;
};

const mesh = parseTemplate('mesh', {
  default: true,
  initContainers: [{ name: 'mesh-proxy', image: 'envoy:1.30', restartPolicy: 'Always' }],
  volumes: [{ name: 'mesh-certs', emptyDir: { medium: 'Memory' } }],
  downwardEnv: { POD_NAME: 'metadata.name', POD_NAMESPACE: 'metadata.namespace' },
});
const web = parseTemplate('web', { containers: [{ name: 'web', image: 'other:1' }] });
const templates = listTemplateSource([mesh]);

let gw: TestGateway;

async function review(body: unknown, path = '/mutate/pods'): Promise<{ answer: Answer; patch: jsonpatch.Operation[] }> {
  const res = await postHttps(gw, path, JSON.stringify(body));
  assert.equal(res.status, 200, res.body);
  const answer = res.json() as Answer;
  assert.equal(answer.response.patch === undefined, answer.response.patchType === undefined, 'patch and patchType go together');
  const patch = answer.response.patch ? (JSON.parse(Buffer.from(answer.response.patch, 'base64').toString()) as jsonpatch.Operation[]) : [];
  return { answer, patch };
}

const applied = (pod: PodObject, patch: jsonpatch.Operation[]): PodObject => jsonpatch.applyPatch(structuredClone(pod), patch, true, false).newDocument;


/** Templates whose listing works at start (the gateway counts them) and throws on every review after: a bug of ours. */
function throwingTemplates(): TemplateSource {
  let calls = 0;
  return {
    kind: 'configmap',
    templates: () => {
      if (++calls > 1) throw new Error('boom');
      return [];
    },
    onChange: () => {},
    stop: async () => {},
  };
}

describe('pod webhook over real HTTPS', () => {
  before(async () => {
    gw = await startTestGateway({ sidecars: { source: templates, excludedNamespaces: ['oversell'] } });
  });
  after(() => gw.close());

  it('injects the default template into a controller-made pod (no name, no namespace in the object)', async () => {
    const r = freshReview();
    const { answer, patch } = await review(r);
    assert.equal(answer.apiVersion, 'admission.k8s.io/v1');
    assert.equal(answer.response.uid, r.request.uid);
    assert.equal(answer.response.allowed, true);
    assert.equal(answer.response.warnings, undefined);
    const pod = applied(r.request.object, patch);
    assert.deepEqual(pod.spec.initContainers?.map((c) => c.name), ['mesh-proxy']);
    assert.deepEqual(pod.spec.volumes?.map((v) => v.name), ['kube-api-access-x7k2p', 'mesh-certs']);
    assert.deepEqual(pod.spec.containers.map((c) => c.name), ['web'], 'the app container is untouched');
    assert.equal(pod.metadata.annotations?.[INJECT.injected], 'mesh');
    // The pod's own fields survive the patch.
    assert.deepEqual(pod.metadata.ownerReferences, r.request.object.metadata.ownerReferences);
    assert.equal(pod.spec.serviceAccountName, 'default');
  });

  it('a re-invocation on the injected pod answers without a patch', async () => {
    const first = freshReview();
    const pod = applied(first.request.object, (await review(first)).patch);
    const again = freshReview();
    again.request.object = pod;
    const { answer } = await review(again);
    assert.equal(answer.response.patch, undefined);
    assert.equal(answer.response.warnings, undefined);
  });

  it('a name collision is refused with a warning; the pod is allowed, unpatched', async () => {
    templates.set([mesh, web]);
    try {
      const r = freshReview({ [INJECT.sidecars]: 'web' });
      const { answer } = await review(r);
      assert.equal(answer.response.allowed, true);
      assert.equal(answer.response.patch, undefined);
      assert.deepEqual(answer.response.warnings, ['oversell: sidecar "web" not injected: container name "web" is already in the pod']);
    } finally {
      templates.set([mesh]);
    }
  });

  it('template changes apply to the next pod without a restart', async () => {
    const renamed: TemplateEntry = parseTemplate('mesh', { default: true, containers: [{ name: 'mesh-v2', image: 'envoy:1.31' }] });
    templates.set([renamed]);
    try {
      const r = freshReview();
      const pod = applied(r.request.object, (await review(r)).patch);
      assert.deepEqual(pod.spec.containers.map((c) => c.name), ['web', 'mesh-v2']);
    } finally {
      templates.set([mesh]);
    }
  });

  const untouched: Array<[string, (r: Review) => void]> = [
    ['a pod in the gateway\'s own namespace', (r) => (r.request.namespace = 'oversell')],
    ['a pod in kube-system', (r) => (r.request.namespace = 'kube-system')],
    ['a pod that opts out', (r) => (r.request.object.metadata.annotations = { [INJECT.optIn]: 'disabled' })],
    ['a pod UPDATE', (r) => (r.request.operation = 'UPDATE')],
    ['a CREATE on a subresource (pods/binding)', (r) => (r.request.subResource = 'binding')],
    ['a Node', (r) => { r.request.kind.kind = 'Node'; r.request.resource.resource = 'nodes'; }],
    ['an object that is a string', (r) => ((r.request as { object: unknown }).object = 'pod')],
    ['a pod without spec', (r) => delete (r.request.object as Partial<PodObject>).spec],
  ];
  for (const [what, mutate] of untouched) {
    it(`allows ${what} without a patch`, async () => {
      const r = freshReview();
      mutate(r);
      assertAllowedUnchanged((await review(r)).answer, r.request.uid);
    });
  }

  const garbage: Array<[string, string, number, RegExp, Record<string, string>?]> = [
    ['invalid JSON', '{"apiVersion": "admission.k8s.io/v1", "kind": ', 400, /JSON/i],
    ['a JSON array', '[]', 400, /JSON object/],
    ['a review without uid', JSON.stringify({ apiVersion: 'admission.k8s.io/v1', kind: 'AdmissionReview', request: {} }), 400, /uid/],
    ['the wrong content type', 'uid=1', 415, /content-type|Unsupported Media Type/i, { 'content-type': 'application/x-www-form-urlencoded' }],
    ['a text/plain body', 'hello', 400, /JSON object/, { 'content-type': 'text/plain' }],
  ];
  for (const [what, body, status, message, headers] of garbage) {
    it(`answers ${what} with ${status} and a message`, async () => {
      const res = await postHttps(gw, '/mutate/pods', body, headers);
      assert.equal(res.status, status, res.body);
      assert.match((res.json() as { message: string }).message, message);
    });
  }

  it('a bug of ours lets the pod through unchanged, answered in kind', async () => {
    const broken = await startTestGateway({ sidecars: { source: throwingTemplates(), excludedNamespaces: [] } });
    try {
      const r = freshReview();
      const res = await postHttps(broken, '/mutate/pods', JSON.stringify(r));
      assert.equal(res.status, 200);
      assert.deepEqual((res.json() as Answer).response, { uid: r.request.uid, allowed: true });
      assert.match((await getHttp(broken.ports.metrics, '/metrics')).body, /oversell_pod_webhook_request_duration_seconds_count\{outcome="error"\} 1/);
    } finally {
      await broken.close();
    }
  });

  it('a forged oversell.io/injected annotation does not keep the sidecar out', async () => {
    const r = freshReview({ [INJECT.injected]: 'mesh' });
    const pod = applied(r.request.object, (await review(r)).patch);
    assert.deepEqual(pod.spec.initContainers?.map((c) => c.name), ['mesh-proxy']);
  });

  describe('/mutate/pods/required: namespaces labelled oversell.io/inject=required', () => {
    const optOuts: Array<[string, Record<string, string>]> = [
      ['oversell.io/inject: disabled', { [INJECT.optIn]: 'disabled' }],
      ['an empty oversell.io/sidecars', { [INJECT.sidecars]: '' }],
      ['a forged oversell.io/injected', { [INJECT.injected]: 'mesh' }],
    ];
    for (const [what, annotations] of optOuts) {
      it(`a pod cannot opt out with ${what}`, async () => {
        const r = freshReview(annotations);
        const { answer, patch } = await review(r, '/mutate/pods/required');
        assert.equal(answer.response.allowed, true);
        assert.deepEqual(applied(r.request.object, patch).spec.initContainers?.map((c) => c.name), ['mesh-proxy']);
      });
    }

    it('a default template that cannot be added refuses the pod (403, with the reason)', async () => {
      const r = freshReview();
      r.request.object.spec.containers.push({ name: 'mesh-proxy' });
      const { answer } = await review(r, '/mutate/pods/required');
      assert.equal(answer.response.allowed, false);
      assert.equal(answer.response.patch, undefined);
      assert.equal(answer.response.status?.code, 403);
      assert.match(answer.response.status?.message ?? '', /namespace shop requires its sidecars and "mesh" could not be added .*container name "mesh-proxy" is already in the pod/);
    });

    it('a bug of ours refuses the pod there instead of letting it run without its sidecars', async () => {
      const broken = await startTestGateway({ sidecars: { source: throwingTemplates(), excludedNamespaces: [] } });
      try {
        const r = freshReview();
        const res = await postHttps(broken, '/mutate/pods/required', JSON.stringify(r));
        assert.equal(res.status, 200);
        const answer = res.json() as Answer;
        assert.equal(answer.response.allowed, false);
        assert.match(answer.response.status?.message ?? '', /sidecar webhook failed \(boom\)/);
      } finally {
        await broken.close();
      }
    });
  });

  it('counted every outcome, injection and refusal, apart from the node webhook\'s series', async () => {
    const metrics = (await getHttp(gw.ports.metrics, '/metrics')).body;
    for (const outcome of ['injected', 'unchanged', 'refused', 'denied', 'skipped', 'bad-request']) {
      assert.match(metrics, new RegExp(`oversell_pod_webhook_request_duration_seconds_count\\{outcome="${outcome}"\\} [1-9]`));
    }
    assert.match(metrics, /oversell_sidecar_injections_total\{template="mesh"\} [1-9]/);
    assert.match(metrics, /oversell_sidecar_refusals_total\{template="web",reason="collision"\} 1/);
    assert.match(metrics, /oversell_sidecar_templates\{state="valid"\} 1/);
    assert.doesNotMatch(metrics, /oversell_webhook_request_duration_seconds_count\{outcome="injected"\}/);
  });
});
