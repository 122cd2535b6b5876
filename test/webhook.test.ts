import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { Agent } from 'node:https';
import { after, before, beforeEach, describe, it } from 'node:test';
import jsonpatch from 'fast-json-patch';
import type { Sample__Output } from '../proto/gen/oversell/v1/Sample.js';
import { ANNOTATION } from '../gateway/admit/node-review.js';
import { formatQuantity, parseQuantity, milliValue, value } from '../lib/quantity.js';
import { assertAllowedUnchanged, getHttp, listPolicySource, postHttps, startTestGateway, type TestGateway } from './helpers/gateway.js';
import { toPolicyEntry } from '../gateway/policies/policy-spec.js';
import { generateServingCertificate } from '../gateway/tls/self-signed.js';

interface Review {
  apiVersion: string;
  kind: string;
  request: {
    uid: string; name: string; operation: string; subResource?: string; kind: { kind: string }; resource: { resource: string };
    object: NodeObject; oldObject?: unknown; userInfo: { username: string }; dryRun?: boolean;
  };
}
interface NodeObject {
  metadata: { name: string; annotations?: Record<string, string>; [k: string]: unknown };
  status: { allocatable: Record<string, string>; capacity: Record<string, string>; [k: string]: unknown };
  [k: string]: unknown;
}
interface Answer {
  apiVersion: string;
  kind: string;
  response: { uid: string; allowed: boolean; patchType?: string; patch?: string };
}

const fixture = readFileSync(new URL('./fixtures/admission/node-status-update.json', import.meta.url), 'utf8');
const NODE = 'ip-10-0-17-42.eu-west-1.compute.internal';
/** The fixture as the kubelet of `name` would send it (object, request name and userInfo agree). */
function freshReview(name = NODE): Review {
  const r = JSON.parse(fixture) as Review;
  r.request.name = name;
  r.request.object.metadata.name = name;
  r.request.userInfo = { username: `system:node:${name}` };
  return r;
}

let clock = 1_000_000;
let gw: TestGateway;

function sample(seq: number, over: Partial<Sample__Output> = {}): Sample__Output {
  return {
    seq,
    timestampMs: clock,
    cpuUsageMillicores: 600,
    memoryWorkingSetBytes: 6 * 1024 ** 3,
    capacity: { cpuMillicores: 8000, memoryBytes: 32386744 * 1024 },
    pressure: null,
    requests: { cpuMillicores: 6000, memoryBytes: 20 * 1024 ** 3, podCount: 12, known: true },
    podsIncluded: false,
    pods: [],
    ...over,
  };
}

/** Puts usage for the node straight into the store (the gRPC path has its own test). */
function report(node = NODE, over: Partial<Sample__Output> = {}) {
  const streamId = 1000 + Math.floor(Math.random() * 1e6);
  gw.store.attach(node, 'instance-a', null, streamId);
  gw.store.ingest(node, streamId, sample(Date.now(), over), clock);
}

async function review(body: unknown): Promise<{ answer: Answer; patch: jsonpatch.Operation[] }> {
  const res = await postHttps(gw, '/mutate/nodes', JSON.stringify(body));
  assert.equal(res.status, 200, res.body);
  const answer = res.json() as Answer;
  const patch = answer.response.patch ? (JSON.parse(Buffer.from(answer.response.patch, 'base64').toString()) as jsonpatch.Operation[]) : [];
  return { answer, patch };
}

function applied(object: NodeObject, patch: jsonpatch.Operation[]): NodeObject {
  // validate=true: every op must apply cleanly to the object the API server holds.
  return jsonpatch.applyPatch(structuredClone(object), patch, true, false).newDocument;
}

function assertCanonical(q: string) {
  assert.equal(formatQuantity(parseQuantity(q)), q, `${q} would be rewritten by the API server`);
}

describe('webhook over real HTTPS', () => {
  before(async () => {
    gw = await startTestGateway({ now: () => clock });
  });
  after(() => gw.close());
  beforeEach(() => {
    clock += 1000;
  });

  it('inflates a kubelet nodes/status UPDATE and records raw values and reason', async () => {
    report();
    const r = freshReview();
    const { answer, patch } = await review(r);
    assert.equal(answer.apiVersion, 'admission.k8s.io/v1');
    assert.equal(answer.kind, 'AdmissionReview');
    assert.equal(answer.response.uid, r.request.uid);
    assert.equal(answer.response.allowed, true);
    assert.equal(answer.response.patchType, 'JSONPatch');

    const out = applied(r.request.object, patch);
    const a = out.status.allocatable;
    // A = 7910m, R = 6000m, U = 600m: L = 0.1, headroom = 6000 + (4746-600)/0.1 -> capped at 2x = 15820m
    assert.equal(a.cpu, '15820m');
    // memory: A = 31369912Ki, R = 20Gi, U = 6Gi, L = 0.3 -> headroom far above cap 1.25x = 39212390Ki
    assert.equal(a.memory, '39212390Ki');
    for (const q of [a.cpu, a.memory]) assertCanonical(q as string);
    const ann = out.metadata.annotations ?? {};
    assert.equal(ann[ANNOTATION.rawCpu], '7910m');
    assert.equal(ann[ANNOTATION.rawMemory], '31369912Ki');
    assert.equal(ann[ANNOTATION.grantedCpu], '15820m');
    assert.match(ann[ANNOTATION.reason] ?? '', /^policy flags; cpu 7910m->15820m \(capped at 2x raw/);
    // Everything else the kubelet sent is untouched.
    assert.equal(a['ephemeral-storage'], '95551679124');
    assert.equal(a.pods, '58');
    assert.deepEqual(out.status.capacity, r.request.object.status.capacity);
    assert.deepEqual(out.status.images, r.request.object.status.images);
    assert.equal(ann['node.alpha.kubernetes.io/ttl'], '0');
    // The patch touches only allocatable cpu/memory and our annotations.
    for (const op of patch) assert.match(op.path, /^\/status\/allocatable\/(cpu|memory)$|^\/metadata\/annotations\/oversell\.io~1/);
  });

  it('is idempotent: a second pass over the inflated object changes nothing', async () => {
    report();
    const r = freshReview();
    const first = applied(r.request.object, (await review(r)).patch);
    const again = freshReview();
    again.request.object = first;
    const { answer, patch } = await review(again);
    assert.deepEqual(applied(first, patch), first);
    assert.equal(answer.response.patch === undefined, patch.length === 0);
  });

  it('the next kubelet write (raw allocatable over our annotations) gives the same grant, without compounding', async () => {
    report();
    const r = freshReview();
    const inflated = applied(r.request.object, (await review(r)).patch);
    // The kubelet's strategic merge patch puts its raw value back; annotations stay.
    const kubelet = structuredClone(inflated);
    kubelet.status.allocatable.cpu = '7910m';
    kubelet.status.allocatable.memory = '31369912Ki';
    const next = freshReview();
    next.request.object = kubelet;
    const out = applied(kubelet, (await review(next)).patch);
    assert.equal(out.status.allocatable.cpu, inflated.status.allocatable.cpu);
    assert.equal(out.status.allocatable.memory, inflated.status.allocatable.memory);
    assert.equal(out.metadata.annotations?.[ANNOTATION.rawCpu], '7910m');
  });

  it('takes a changed raw allocatable from the kubelet even when our annotations exist', async () => {
    report();
    const r = freshReview();
    const inflated = applied(r.request.object, (await review(r)).patch);
    inflated.status.allocatable.cpu = '3910m'; // kube-reserved was raised
    const next = freshReview();
    next.request.object = inflated;
    const out = applied(inflated, (await review(next)).patch);
    assert.equal(out.metadata.annotations?.[ANNOTATION.rawCpu], '3910m');
    assert.equal(out.status.allocatable.cpu, '7820m');
  });

  it('inflates a node CREATE (registration carries full status)', async () => {
    report('new-node-1');
    const r = freshReview('new-node-1');
    r.request.operation = 'CREATE';
    delete r.request.subResource;
    delete r.request.oldObject;
    r.request.object.metadata = { name: 'new-node-1', labels: { 'oversell.io/enabled': 'true' } };
    const { answer, patch } = await review(r);
    assert.equal(answer.response.patchType, 'JSONPatch');
    const out = applied(r.request.object, patch);
    assert.equal(out.status.allocatable.cpu, '15820m');
    assert.equal(out.metadata.annotations?.[ANNOTATION.rawCpu], '7910m');
  });

  it('stale data: no inflation, allocatable stays at raw, and the reason says why', async () => {
    report('stale-node');
    clock += 41_000;
    const r = freshReview('stale-node');
    const { patch } = await review(r);
    const out = applied(r.request.object, patch);
    assert.equal(out.status.allocatable.cpu, '7910m');
    assert.equal(out.status.allocatable.memory, '31369912Ki');
    assert.match(out.metadata.annotations?.[ANNOTATION.reason] ?? '', /old \(staleAfter 40s\): no inflation/);
  });

  it('stale data over a previously inflated object brings allocatable back to the floor', async () => {
    report('was-inflated');
    const r = freshReview('was-inflated');
    const inflated = applied(r.request.object, (await review(r)).patch);
    assert.equal(inflated.status.allocatable.cpu, '15820m');
    clock += 60_000;
    const next = freshReview('was-inflated');
    next.request.object = inflated; // a writer that did not touch allocatable
    const out = applied(inflated, (await review(next)).patch);
    assert.equal(out.status.allocatable.cpu, '7910m');
  });

  it('no data for the node: allowed, no patch', async () => {
    const r = freshReview('never-reported');
    const { answer } = await review(r);
    assert.equal(answer.response.allowed, true);
    assert.equal(answer.response.patch, undefined);
    assert.equal(answer.response.patchType, undefined);
  });

  const untouched: Array<[string, (r: Review) => void]> = [
    ['a Pod', (r) => { r.request.kind.kind = 'Pod'; r.request.resource.resource = 'pods'; }],
    ['a node spec UPDATE (no subresource)', (r) => { delete r.request.subResource; }],
    ['a CREATE on nodes/status', (r) => { r.request.operation = 'CREATE'; }],
    ['a DELETE', (r) => { r.request.operation = 'DELETE'; delete r.request.subResource; }],
    ['a node without status', (r) => { delete (r.request.object as Partial<NodeObject>).status; }],
    ['allocatable without memory', (r) => { delete r.request.object.status.allocatable.memory; }],
    ['a malformed cpu quantity', (r) => { r.request.object.status.allocatable.cpu = '7.9 cores'; }],
    ['a numeric cpu quantity', (r) => { (r.request.object.status.allocatable as Record<string, unknown>).cpu = 8; }],
    ['a negative memory quantity', (r) => { r.request.object.status.allocatable.memory = '-1Gi'; }],
    ['an object that is a string', (r) => { (r.request as { object: unknown }).object = 'node'; }],
  ];
  for (const [what, mutate] of untouched) {
    it(`allows ${what} without a patch`, async () => {
      report();
      const r = freshReview();
      mutate(r);
      assertAllowedUnchanged((await review(r)).answer, r.request.uid);
    });
  }

  const garbage: Array<[string, string | Buffer, number, RegExp, Record<string, string>?]> = [
    ['invalid JSON', '{"apiVersion": "admission.k8s.io/v1", "kind": ', 400, /JSON/i],
    ['an empty body', '', 400, /empty/i],
    ['a JSON array', '[1,2,3]', 400, /JSON object/],
    ['a JSON string', '"hello"', 400, /JSON object/],
    ['a v1beta1 review', JSON.stringify({ apiVersion: 'admission.k8s.io/v1beta1', kind: 'AdmissionReview', request: { uid: 'x' } }), 400, /admissionReviewVersions/],
    ['a review without uid', JSON.stringify({ apiVersion: 'admission.k8s.io/v1', kind: 'AdmissionReview', request: {} }), 400, /uid/],
    ['a review without request', JSON.stringify({ apiVersion: 'admission.k8s.io/v1', kind: 'AdmissionReview' }), 400, /no request/],
    ['a __proto__ payload', '{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"x","__proto__":{"polluted":1}}}', 400, /./],
    ['random bytes', Buffer.from([0xff, 0xfe, 0x00, 0x01, 0x7b]), 400, /./],
    ['the wrong content type', 'uid=1', 415, /content-type|Unsupported Media Type/i, { 'content-type': 'application/x-www-form-urlencoded' }],
  ];
  for (const [what, body, status, message, headers] of garbage) {
    it(`answers ${what} with ${status} and a message`, async () => {
      const res = await postHttps(gw, '/mutate/nodes', body, headers);
      assert.equal(res.status, status, res.body);
      const parsed = res.json() as { message: string };
      assert.match(parsed.message, message);
    });
  }

  it('refuses a body over the limit with 413, and keeps serving', async () => {
    const big = await startTestGateway({ bodyLimitBytes: 64 * 1024 });
    try {
      const r = freshReview();
      (r.request.object.metadata as Record<string, unknown>).padding = 'x'.repeat(100 * 1024);
      const res = await postHttps(big, '/mutate/nodes', JSON.stringify(r));
      assert.equal(res.status, 413);
      const ok = await postHttps(big, '/mutate/nodes', fixture);
      assert.equal(ok.status, 200);
    } finally {
      await big.close();
    }
  });

  it('is still healthy after all of the above, and counted every outcome', async () => {
    assert.equal((await getHttp(gw.ports.metrics, '/healthz')).status, 200);
    assert.equal((await getHttp(gw.ports.metrics, '/readyz')).status, 200);
    const metrics = (await getHttp(gw.ports.metrics, '/metrics')).body;
    for (const outcome of ['patched', 'no-data', 'skipped', 'bad-request']) {
      assert.match(metrics, new RegExp(`oversell_webhook_request_duration_seconds_count\\{outcome="${outcome}"\\} [1-9]`));
    }
    assert.match(metrics, /oversell_decisions_total\{resource="cpu",bound="cap"\} [1-9]/);
    assert.match(metrics, /oversell_decisions_total\{resource="cpu",bound="stale"\} [1-9]/);
  });

  it('the quantities it writes are exact: granted values parse back to the decided numbers', async () => {
    report();
    const r = freshReview();
    const out = applied(r.request.object, (await review(r)).patch);
    assert.equal(milliValue(parseQuantity(out.status.allocatable.cpu ?? '')), 15820n);
    assert.equal(value(parseQuantity(out.status.allocatable.memory ?? '')), 39212390n * 1024n);
  });
});

describe('webhook with OversellPolicies', () => {
  const entry = (name: string, mode: 'Enforce' | 'DryRun', priority = 0) =>
    toPolicyEntry({ metadata: { name }, spec: { nodeSelector: { matchLabels: { pool: 'dry' } }, mode, priority } });
  const policies = listPolicySource([entry('pool-dry', 'DryRun')]);
  let pgw: TestGateway;
  before(async () => {
    pgw = await startTestGateway({ policies, now: () => clock });
  });
  after(() => pgw.close());

  async function reviewAt(r: Review) {
    const res = await postHttps(pgw, '/mutate/nodes', JSON.stringify(r));
    assert.equal(res.status, 200, res.body);
    const answer = res.json() as Answer;
    return answer.response.patch ? (JSON.parse(Buffer.from(answer.response.patch, 'base64').toString()) as jsonpatch.Operation[]) : [];
  }

  function poolReview(name: string): Review {
    const r = freshReview(name);
    r.request.object.metadata.labels = { 'oversell.io/enabled': 'true', pool: 'dry' };
    const streamId = 5000 + Math.floor(Math.random() * 1e6);
    pgw.store.attach(name, 'i', null, streamId);
    pgw.store.ingest(name, streamId, sample(1), clock);
    return r;
  }

  it('DryRun: allocatable stays raw; the would-be grant is in its own annotations and the reason', async () => {
    const r = poolReview('dry-1');
    const out = applied(r.request.object, await reviewAt(r));
    assert.equal(out.status.allocatable.cpu, '7910m');
    assert.equal(out.status.allocatable.memory, '31369912Ki');
    const ann = out.metadata.annotations ?? {};
    assert.equal(ann[ANNOTATION.dryRunCpu], '15820m');
    assert.equal(ann[ANNOTATION.grantedCpu], '7910m');
    assert.match(ann[ANNOTATION.reason] ?? '', /^policy pool-dry \(DryRun: allocatable not changed\)/);
    const metrics = (await getHttp(pgw.ports.metrics, '/metrics')).body;
    assert.match(metrics, /oversell_node_granted_ratio\{node="dry-1",resource="cpu"\} 2\n/);
    assert.match(metrics, /oversell_node_applied_ratio\{node="dry-1",resource="cpu"\} 1\n/);
  });

  it('switching the policy to Enforce inflates on the next write and drops the DryRun annotations', async () => {
    const r = poolReview('dry-2');
    const dry = applied(r.request.object, await reviewAt(r));
    policies.set([entry('pool-dry', 'Enforce')]);
    try {
      const next = freshReview('dry-2');
      next.request.object = dry;
      const out = applied(dry, await reviewAt(next));
      assert.equal(out.status.allocatable.cpu, '15820m');
      assert.equal(out.metadata.annotations?.[ANNOTATION.dryRunCpu], undefined);
      assert.match(out.metadata.annotations?.[ANNOTATION.reason] ?? '', /^policy pool-dry; cpu 7910m->15820m/);
    } finally {
      policies.set([entry('pool-dry', 'DryRun')]);
    }
  });

  it('deleting the policy brings an inflated node back to the floor on the next write', async () => {
    policies.set([entry('pool-dry', 'Enforce')]);
    const r = poolReview('dry-3');
    const inflated = applied(r.request.object, await reviewAt(r));
    assert.equal(inflated.status.allocatable.cpu, '15820m');
    policies.set([]);
    try {
      const next = freshReview('dry-3');
      next.request.object = inflated; // even a write that did not touch allocatable
      const out = applied(inflated, await reviewAt(next));
      assert.equal(out.status.allocatable.cpu, '7910m');
      assert.match(out.metadata.annotations?.[ANNOTATION.reason] ?? '', /no valid OversellPolicy selects this node/);
    } finally {
      policies.set([entry('pool-dry', 'DryRun')]);
    }
  });

  it('an invalid policy: no inflation, and the reason names the error', async () => {
    policies.set([toPolicyEntry({ metadata: { name: 'pool-dry' }, spec: { nodeSelector: { matchLabels: { pool: 'dry' } }, cpu: { maxRatio: 0 } } })]);
    try {
      const r = poolReview('dry-4');
      const out = applied(r.request.object, await reviewAt(r));
      assert.equal(out.status.allocatable.cpu, '7910m');
      assert.match(out.metadata.annotations?.[ANNOTATION.reason] ?? '', /OversellPolicy pool-dry is invalid \(spec\.cpu\.maxRatio/);
    } finally {
      policies.set([entry('pool-dry', 'DryRun')]);
    }
  });
});

describe('certificate hot reload', () => {
  it('a new certificate is served to new connections without a restart; open connections are not dropped', async () => {
    const gw = await startTestGateway();
    const keepAlive = new Agent({ keepAlive: true, maxSockets: 1 });
    const json = { 'content-type': 'application/json' };
    try {
      assert.equal((await postHttps(gw, '/mutate/nodes', fixture, json, keepAlive)).status, 200);
      const next = await generateServingCertificate(['localhost', '127.0.0.1']);
      gw.setTls(next);
      // New handshakes get the new certificate: trusted with the new CA, refused with the old one.
      assert.equal((await postHttps({ ...gw, ca: next.ca }, '/mutate/nodes', fixture, json, false)).status, 200);
      await assert.rejects(postHttps(gw, '/mutate/nodes', fixture, json, false), /certificate|self.signed|unable to verify/i);
      // The connection opened before the swap keeps working.
      assert.equal((await postHttps(gw, '/mutate/nodes', fixture, json, keepAlive)).status, 200);
    } finally {
      keepAlive.destroy();
      await gw.close();
    }
  });
});
