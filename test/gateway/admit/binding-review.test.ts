// The protected-room check on pods/binding (gateway/admit/binding-review.ts):
// what it reads for which binding, the refusal, the reservations that keep two
// bindings at once from taking the same room, and fail-open where it cannot
// judge. The plugin around it: the answer on the wire and the metric.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { reviewBinding, type BindingNode, type BindingPod, type BindingReviewDeps } from '../../../gateway/admit/binding-review.js';
import { bindingWebhookPlugin } from '../../../gateway/admit/binding-webhook-plugin.js';
import { BadReviewError } from '../../../gateway/admit/admission-review.js';
import { addRoom, NO_ROOM, type Room } from '../../../gateway/decide/protected-room.js';
import { DEFAULT_PROTECT, tierOf } from '../../../gateway/decide/tiers.js';
import { NodeStore } from '../../../gateway/store/node-store.js';
import { RoomReservations } from '../../../gateway/store/room-reservations.js';
import { pluginApp } from '../../helpers/plugin-app.js';

const GiB = 2 ** 30;

function bindingReview(pod: string, node: string, over: { dryRun?: boolean; subResource?: string; uid?: string } = {}) {
  return {
    apiVersion: 'admission.k8s.io/v1',
    kind: 'AdmissionReview',
    request: {
      uid: over.uid ?? `review-${pod}`,
      kind: { group: '', version: 'v1', kind: 'Binding' },
      resource: { group: '', version: 'v1', resource: 'pods' },
      subResource: over.subResource ?? 'binding',
      operation: 'CREATE',
      name: pod,
      namespace: 'apps',
      object: { apiVersion: 'v1', kind: 'Binding', metadata: { name: pod, namespace: 'apps' }, target: { apiVersion: 'v1', kind: 'Node', name: node } },
      userInfo: { username: 'system:kube-scheduler' },
      dryRun: over.dryRun ?? false,
    },
  };
}

const guaranteed = (uid: string, cpuMillicores: number, memoryBytes: number): BindingPod => ({ uid, namespace: 'apps', requests: { cpuMillicores, memoryBytes }, qos: 'Guaranteed', exclusiveCpus: 0, priority: 0 });
const burstable = (uid: string, cpuMillicores: number, memoryBytes: number): BindingPod => ({ ...guaranteed(uid, cpuMillicores, memoryBytes), qos: 'Burstable' });

/** Deps over plain maps: node n1 is inflated with 4 CPUs and 16 GiB raw, 2 CPUs and 8 GiB already held by protected pods. */
function bench(o: { nodes?: Record<string, BindingNode>; pods?: Record<string, BindingPod>; bound?: Array<{ uid: string; room: Room }> | undefined; failPod?: boolean } = {}) {
  const reads: string[] = [];
  const nodes = o.nodes ?? { n1: { raw: { cpuMillicores: 4000, memoryBytes: 16 * GiB }, inflated: true, protect: DEFAULT_PROTECT } };
  const pods = o.pods ?? {};
  const bound = 'bound' in o ? o.bound : [{ uid: 'old', room: { cpuMillicores: 2000, memoryBytes: 8 * GiB } }];
  const deps: BindingReviewDeps = {
    node: (name) => nodes[name],
    async pod(_ns, name) {
      reads.push(`pod ${name}`);
      return o.failPod ? undefined : pods[name];
    },
    podOf: (object) => {
      const name = (object as { metadata?: { name?: string } }).metadata?.name ?? '';
      reads.push(`object ${name}`);
      return pods[name];
    },
    tier: async (pod, protect) => tierOf({ ...pod, namespaceLabels: {} }, protect),
    async protectedBound() {
      reads.push('bound');
      if (!bound) return undefined;
      return { room: bound.reduce((sum, b) => addRoom(sum, b.room), NO_ROOM), has: (uid) => bound.some((b) => b.uid === uid) };
    },
    reservations: new RoomReservations(),
  };
  return { deps, reads, bound };
}

describe('reviewBinding', () => {
  it('a protected pod that fits in raw is allowed; one that needs oversold room is refused with 403 and why', async () => {
    const { deps } = bench({ pods: { small: guaranteed('u-small', 1000, 4 * GiB), big: guaranteed('u-big', 3000, 4 * GiB) } });
    const ok = await reviewBinding(bindingReview('small', 'n1'), deps);
    assert.equal(ok.outcome, 'allowed');
    assert.equal(ok.review.response.allowed, true);
    const no = await reviewBinding(bindingReview('big', 'n1'), deps);
    assert.equal(no.outcome, 'denied');
    assert.equal(no.review.response.allowed, false);
    assert.ok(!no.review.response.allowed && no.review.response.status.code === 403 && no.review.response.status.message.includes('no raw room'));
  });

  it('two protected pods bound at once, each fitting alone: the second is refused, its room already promised to the first', async () => {
    const { deps, bound } = bench({ pods: { a: guaranteed('u-a', 1500, 2 * GiB), b: guaranteed('u-b', 1500, 2 * GiB) } });
    assert.equal((await reviewBinding(bindingReview('a', 'n1'), deps)).outcome, 'allowed');
    assert.equal((await reviewBinding(bindingReview('b', 'n1'), deps)).outcome, 'denied', 'the watch has not shown a bound yet: its reservation counts');
    // Once the watch shows a bound, its room is counted once, not twice.
    bound!.push({ uid: 'u-a', room: { cpuMillicores: 1500, memoryBytes: 2 * GiB } });
    assert.equal((await reviewBinding(bindingReview('b', 'n1'), deps)).outcome, 'denied');
    assert.equal(deps.reservations.size, 0);
  });

  it('a dry run reserves nothing', async () => {
    const { deps } = bench({ pods: { a: guaranteed('u-a', 1500, 2 * GiB), b: guaranteed('u-b', 1500, 2 * GiB) } });
    assert.equal((await reviewBinding(bindingReview('a', 'n1', { dryRun: true }), deps)).outcome, 'allowed');
    assert.equal(deps.reservations.size, 0);
    assert.equal((await reviewBinding(bindingReview('b', 'n1'), deps)).outcome, 'allowed');
  });

  it('an unprotected pod passes without reading the node\'s pods', async () => {
    const { deps, reads } = bench({ pods: { web: burstable('u-web', 8000, 32 * GiB) } });
    const r = await reviewBinding(bindingReview('web', 'n1'), deps);
    assert.equal(r.outcome, 'unprotected');
    assert.deepEqual(reads, ['pod web']);
  });

  it('a node not inflated, or not opted in, passes without reading the pod', async () => {
    const { deps, reads } = bench({
      nodes: { raw: { raw: { cpuMillicores: 4000, memoryBytes: GiB }, inflated: false, protect: DEFAULT_PROTECT } },
      pods: { big: guaranteed('u', 64_000, 64 * GiB) },
    });
    assert.equal((await reviewBinding(bindingReview('big', 'raw'), deps)).outcome, 'skipped');
    assert.equal((await reviewBinding(bindingReview('big', 'elsewhere'), deps)).outcome, 'skipped');
    assert.deepEqual(reads, []);
  });

  it('fails open where it cannot judge: the pod unreadable, or the pods not listed yet', async () => {
    const unreadable = bench({ failPod: true });
    assert.equal((await reviewBinding(bindingReview('x', 'n1'), unreadable.deps)).outcome, 'unknown');
    const unlisted = bench({ pods: { big: guaranteed('u', 64_000, 64 * GiB) }, bound: undefined });
    const r = await reviewBinding(bindingReview('big', 'n1'), unlisted.deps);
    assert.equal(r.outcome, 'unknown');
    assert.equal(r.review.response.allowed, true);
  });

  it('not a binding, or a binding to no node: passes untouched; not an AdmissionReview: BadReviewError', async () => {
    const { deps } = bench();
    assert.equal((await reviewBinding(bindingReview('p', 'n1', { subResource: 'status' }), deps)).outcome, 'skipped');
    const noTarget = bindingReview('p', 'n1');
    (noTarget.request.object as { target?: unknown }).target = { kind: 'Pod', name: 'n1' };
    assert.equal((await reviewBinding(noTarget, deps)).outcome, 'skipped');
    await assert.rejects(reviewBinding({ kind: 'Binding' }, deps), BadReviewError);
  });
});

/** A pod CREATE review: the pod as created, with spec.nodeName when `node` is given (no uid yet: mutating admission comes first). */
function createReview(pod: string, node: string | undefined, annotations: Record<string, string> = {}) {
  return {
    apiVersion: 'admission.k8s.io/v1',
    kind: 'AdmissionReview',
    request: {
      uid: `review-create-${pod}`,
      kind: { group: '', version: 'v1', kind: 'Pod' },
      resource: { group: '', version: 'v1', resource: 'pods' },
      operation: 'CREATE',
      name: pod,
      namespace: 'apps',
      object: { apiVersion: 'v1', kind: 'Pod', metadata: { name: pod, annotations }, spec: { ...(node && { nodeName: node }), containers: [{ name: 'c', image: 'x' }] } },
      userInfo: { username: 'alice' },
      dryRun: false,
    },
  };
}

describe('reviewBinding: a pod created with spec.nodeName (it skips the scheduler)', () => {
  it('the same check on its creation: a protected pod that needs oversold room is refused, one that fits is allowed, reserving nothing', async () => {
    const { deps, reads } = bench({ pods: { small: guaranteed('apps/small', 1000, 4 * GiB), big: guaranteed('apps/big', 3000, 4 * GiB) } });
    const no = await reviewBinding(createReview('big', 'n1'), deps);
    assert.equal(no.outcome, 'denied');
    assert.ok(!no.review.response.allowed && no.review.response.status.message.includes('no raw room'));
    const ok = await reviewBinding(createReview('small', 'n1'), deps);
    assert.equal(ok.outcome, 'allowed');
    assert.equal(deps.reservations.size, 0, 'no uid to match its bound self with');
    assert.deepEqual(reads.filter((r) => r.startsWith('pod ')), [], 'read from the review, not the API server');
  });

  it('a pod the scheduler will place, a mirror pod of the kubelet, an unprotected pod: passed', async () => {
    const { deps } = bench({ pods: { big: guaranteed('apps/big', 3000, 4 * GiB), web: burstable('apps/web', 8000, 32 * GiB) } });
    assert.equal((await reviewBinding(createReview('big', undefined), deps)).outcome, 'skipped');
    assert.equal((await reviewBinding(createReview('big', 'n1', { 'kubernetes.io/config.mirror': 'abc' }), deps)).outcome, 'skipped');
    assert.equal((await reviewBinding(createReview('web', 'n1'), deps)).outcome, 'unprotected');
  });
});

describe('bindingWebhookPlugin', () => {
  it('answers on /validate/bindings: a refusal as allowed false, counted by outcome; garbage 400; a bug of ours allows', async () => {
    const { deps } = bench({ pods: { big: guaranteed('u-big', 3000, 4 * GiB) } });
    const failing: BindingReviewDeps = { ...deps, node: () => { throw new Error('boom'); } };
    const app = await pluginApp(bindingWebhookPlugin, new NodeStore({ retainMs: 60_000, forgetAfterMs: 60_000 }), { deps });
    const broken = await pluginApp(bindingWebhookPlugin, new NodeStore({ retainMs: 60_000, forgetAfterMs: 60_000 }), { deps: failing });
    try {
      const denied = await app.post('/validate/bindings', JSON.stringify(bindingReview('big', 'n1')));
      assert.equal(denied.statusCode, 200);
      assert.equal(denied.json().response.allowed, false);
      assert.equal(denied.json().response.uid, 'review-big');
      assert.equal(await app.series('oversell_binding_webhook_request_duration_seconds_count{outcome="denied"}'), 1);
      assert.equal((await app.post('/validate/bindings', '{"not":')).statusCode, 400);
      const bug = await broken.post('/validate/bindings', JSON.stringify(bindingReview('big', 'n1')));
      assert.equal(bug.json().response.allowed, true);
      assert.equal(await broken.series('oversell_binding_webhook_request_duration_seconds_count{outcome="error"}'), 1);
    } finally {
      await app.close();
      await broken.close();
    }
  });
});
