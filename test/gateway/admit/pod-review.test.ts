// reviewPod() (gateway/admit/pod-review.ts) on what the API server sends on a
// pod CREATE, without a server: one row per review, its outcome and the pod
// its patch leaves. Which sidecars fit which pod in detail is
// test/gateway/inject/pod-injection.test.ts; the transport and metrics are
// test/gateway/admit/pod-webhook-plugin.test.ts.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { describe, it } from 'node:test';
import { BadReviewError } from '../../../gateway/admit/admission-review.js';
import { reviewPod, type PodOutcome, type PodReviewDeps, type PodReviewResult } from '../../../gateway/admit/pod-review.js';
import { INJECT } from '../../../gateway/inject/pod-injection.js';
import { parseTemplate, type TemplateEntry } from '../../../gateway/inject/sidecar-template.js';
import { applied, patchOf } from '../../helpers/node-reviews.js';

interface PodObject {
  metadata: { name?: string; namespace?: string; annotations?: Record<string, string>; [k: string]: unknown };
  spec: { containers: Array<{ name: string; env?: unknown[] }>; initContainers?: Array<{ name: string }>; volumes?: Array<{ name: string }>; [k: string]: unknown };
}
interface Review {
  apiVersion: string;
  kind: string;
  request: { uid: string; namespace?: string; operation: string; subResource?: string; kind: { kind: string }; resource: { resource: string }; object: PodObject };
}

const fixture = readFileSync(new URL('../../fixtures/admission/pod-create.json', import.meta.url), 'utf8');
/** A ReplicaSet's pod in namespace shop: no name, no namespace in the object, one container "web". */
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

/** As gateway.ts composes them: kube-system always, plus the configured namespaces (the gateway's own). */
const deps = (templates: TemplateEntry[] = [mesh]): PodReviewDeps => ({ templates: () => templates, excludedNamespaces: new Set(['kube-system', 'oversell']) });

/** Checks what holds for every answer; returns the pod as the patch leaves it. */
function checked(r: Review, result: PodReviewResult): PodObject {
  const { review } = result;
  assert.equal(review.apiVersion, 'admission.k8s.io/v1');
  assert.equal(review.kind, 'AdmissionReview');
  assert.equal(review.response.uid, r.request.uid);
  assert.equal(review.response.allowed, result.outcome !== 'denied');
  const patch = patchOf({ response: review.response as { allowed: boolean; patch?: string; patchType?: string } });
  assert.equal(patch.length > 0, result.outcome === 'injected', `outcome ${result.outcome} with ${patch.length} ops`);
  return applied(r.request.object, patch);
}

const initNames = (pod: PodObject) => pod.spec.initContainers?.map((c) => c.name);

interface Row {
  what: string;
  annotations?: Record<string, string>;
  change?: (r: Review) => void;
  templates?: TemplateEntry[];
  /** Through /mutate/pods/required: the namespace requires its sidecars. */
  required?: true;
  outcome: PodOutcome;
  /** The pod's init containers after the patch. */
  init?: string[];
  warnings?: string[];
  check?: (pod: PodObject, result: PodReviewResult, r: Review) => void;
}

const rows: Row[] = [
  {
    what: 'the default template goes into a controller-made pod (no name, no namespace in the object)',
    outcome: 'injected', init: ['mesh-proxy'],
    check: (pod, result, r) => {
      assert.equal(result.namespace, 'shop');
      assert.equal(result.review.response.warnings, undefined);
      assert.deepEqual(pod.spec.volumes?.map((v) => v.name), ['kube-api-access-x7k2p', 'mesh-certs']);
      assert.deepEqual(pod.spec.containers.map((c) => c.name), ['web'], 'the app container is untouched');
      assert.equal(pod.metadata.annotations?.[INJECT.injected], 'mesh');
      // The pod's own fields survive the patch.
      assert.deepEqual(pod.metadata.ownerReferences, r.request.object.metadata.ownerReferences);
      assert.equal(pod.spec.serviceAccountName, 'default');
    },
  },
  { what: 'a forged oversell.io/injected annotation does not keep the sidecar out', annotations: { [INJECT.injected]: 'mesh' }, outcome: 'injected', init: ['mesh-proxy'] },
  {
    what: 'a name collision is refused with a warning; the pod is allowed, unpatched',
    annotations: { [INJECT.sidecars]: 'web' }, templates: [mesh, web], outcome: 'refused',
    warnings: ['oversell: sidecar "web" not injected: container name "web" is already in the pod, and it is not the template\'s (image differs)'],
  },
  // Not ours: allowed without a patch.
  { what: 'a pod in the gateway\'s own namespace', change: (r) => (r.request.namespace = 'oversell'), outcome: 'skipped' },
  { what: 'a pod in kube-system', change: (r) => (r.request.namespace = 'kube-system'), outcome: 'skipped' },
  { what: 'a pod that opts out', annotations: { [INJECT.optIn]: 'disabled' }, outcome: 'skipped' },
  { what: 'a pod UPDATE', change: (r) => (r.request.operation = 'UPDATE'), outcome: 'skipped' },
  { what: 'a CREATE on a subresource (pods/binding)', change: (r) => (r.request.subResource = 'binding'), outcome: 'skipped' },
  { what: 'a Node', change: (r) => { r.request.kind.kind = 'Node'; r.request.resource.resource = 'nodes'; }, outcome: 'skipped' },
  { what: 'an object that is a string', change: (r) => ((r.request as { object: unknown }).object = 'pod'), outcome: 'skipped' },
  { what: 'a pod without spec', change: (r) => delete (r.request.object as Partial<PodObject>).spec, outcome: 'skipped' },
  // /mutate/pods/required: namespaces labelled oversell.io/inject=required.
  { what: 'required: a pod cannot opt out with oversell.io/inject: disabled', required: true, annotations: { [INJECT.optIn]: 'disabled' }, outcome: 'injected', init: ['mesh-proxy'] },
  { what: 'required: a pod cannot opt out with an empty oversell.io/sidecars', required: true, annotations: { [INJECT.sidecars]: '' }, outcome: 'injected', init: ['mesh-proxy'] },
  { what: 'required: a pod cannot opt out with a forged oversell.io/injected', required: true, annotations: { [INJECT.injected]: 'mesh' }, outcome: 'injected', init: ['mesh-proxy'] },
  {
    what: 'required: a default template that cannot be added refuses the pod (403, with the reason)',
    required: true, change: (r) => r.request.object.spec.containers.push({ name: 'mesh-proxy' }), outcome: 'denied',
    warnings: ['oversell: sidecar "mesh" not injected: container name "mesh-proxy" is already in the pod'],
    check: (_pod, result) => {
      const response = result.review.response as { patch?: string; status?: { code: number; message: string } };
      assert.equal(response.patch, undefined);
      assert.equal(response.status?.code, 403);
      assert.match(response.status?.message ?? '', /namespace shop requires its sidecars and "mesh" could not be added .*container name "mesh-proxy" is already in the pod/);
    },
  },
  {
    what: 'required: a look-alike of the sidecar (its name, image and env, but its volume on disk instead of in memory) refuses the pod',
    required: true, outcome: 'denied',
    change: (r) => {
      const env = [['POD_NAME', 'metadata.name'], ['POD_NAMESPACE', 'metadata.namespace']].map(([name, fieldPath]) => ({ name, valueFrom: { fieldRef: { fieldPath } } }));
      r.request.object.spec.initContainers = [{ name: 'mesh-proxy', image: 'envoy:1.30', restartPolicy: 'Always', env } as { name: string }];
      r.request.object.spec.volumes?.push({ name: 'mesh-certs', emptyDir: {} } as { name: string });
    },
    warnings: ['oversell: sidecar "mesh" not injected: volume name "mesh-certs" is already in the pod, and it is not the template\'s (emptyDir differs)'],
  },
];

describe('reviewPod: one pod CREATE review (namespace shop, template "mesh" by default)', () => {
  for (const row of rows) {
    it(`${row.what} (${row.outcome})`, () => {
      const r = freshReview(row.annotations);
      row.change?.(r);
      const result = reviewPod(r, deps(row.templates), { required: row.required ?? false });
      const pod = checked(r, result);
      assert.equal(result.outcome, row.outcome, result.detail);
      if (row.init) assert.deepEqual(initNames(pod), row.init);
      assert.deepEqual(result.review.response.warnings, row.warnings);
      row.check?.(pod, result, r);
    });
  }

  it('a re-invocation on the injected pod answers without a patch', () => {
    const first = freshReview();
    const pod = checked(first, reviewPod(first, deps()));
    const again = freshReview();
    again.request.object = pod;
    const result = reviewPod(again, deps());
    checked(again, result);
    assert.equal(result.outcome, 'unchanged');
    assert.equal(result.review.response.warnings, undefined);
  });

  it('the templates are read on every review: a change applies to the next pod without a restart', () => {
    let templates: TemplateEntry[] = [mesh];
    const live: PodReviewDeps = { templates: () => templates, excludedNamespaces: new Set(['kube-system']) };
    const before = freshReview();
    assert.deepEqual(initNames(checked(before, reviewPod(before, live))), ['mesh-proxy']);
    templates = [parseTemplate('mesh', { default: true, containers: [{ name: 'mesh-v2', image: 'envoy:1.31' }] })];
    const r = freshReview();
    const pod = checked(r, reviewPod(r, live));
    assert.deepEqual(pod.spec.containers.map((c) => c.name), ['web', 'mesh-v2']);
  });

  const notReviews: Array<[string, unknown, RegExp]> = [
    ['a JSON array', [], /JSON object/],
    ['a text body', 'hello', /JSON object/],
    ['a review without uid', { apiVersion: 'admission.k8s.io/v1', kind: 'AdmissionReview', request: {} }, /uid/],
  ];
  for (const [what, body, message] of notReviews) {
    it(`${what} is no AdmissionReview: BadReviewError (the plugin answers 400 with its message)`, () => {
      assert.throws(() => reviewPod(body, deps()), (err: unknown) => err instanceof BadReviewError && message.test(err.message));
    });
  }
});
