// reviewNode() and nodePatch() (gateway/admit/node-review.ts), without a
// server: one row per kubelet write, its outcome and the object the patch
// leaves. Every answer is also checked for what holds for all of them: a
// well-formed AdmissionReview, a patch that applies cleanly, quantities the API
// server keeps as written, and nothing touched but allocatable cpu/memory and
// our own annotations. The transport (HTTPS, body parsing, metrics) is
// test/gateway/admit/webhook-plugin.test.ts.
import assert from 'node:assert/strict';
import { DEFAULT_POLICY } from '../../../gateway/decide/policy.js';
import { randomBytes } from 'node:crypto';
import { beforeEach, describe, it } from 'node:test';
import type { Sample__Output } from '../../../proto/gen/oversell/v1/Sample.js';
import { BadReviewError } from '../../../gateway/admit/admission-review.js';
import { ANNOTATION, nodePatch, type NodeReviewResult, type Outcome } from '../../../gateway/admit/node-review.js';
import { GrantProof } from '../../../gateway/decide/grant-proof.js';
import type { Decision, ResourceDecision } from '../../../gateway/decide/policy.js';
import type { NodeObjectFacts } from '../../../gateway/decide/trusted-raw.js';
import { toPolicyEntry } from '../../../gateway/policies/policy-spec.js';
import { formatQuantity, milliValue, parseQuantity, value } from '../../../lib/quantity.js';
import { listPolicySource } from '../../helpers/gateway.js';
import { applied, kubeletReview, nodeSample, patchOf, reviewBench, type NodeObject, type NodeReview, type ReviewBench } from '../../helpers/node-reviews.js';

let clock = 1_000_000;
const now = () => clock;

function assertCanonical(q: string) {
  assert.equal(formatQuantity(parseQuantity(q)), q, `${q} would be rewritten by the API server`);
}

/** The object without what the webhook may change: allocatable cpu/memory and oversell.io/ annotations. */
function rest(o: NodeObject): unknown {
  const c = structuredClone(o) as NodeObject;
  if (c.status?.allocatable) {
    delete c.status.allocatable.cpu;
    delete c.status.allocatable.memory;
  }
  if (c.metadata) {
    const kept = Object.entries(c.metadata.annotations ?? {}).filter(([k]) => !k.startsWith('oversell.io/'));
    if (kept.length > 0) c.metadata.annotations = Object.fromEntries(kept);
    else delete c.metadata.annotations;
  }
  return c;
}

/** What every answer must be, whatever the case; returns the object as the patch leaves it. */
function checked(r: NodeReview, result: NodeReviewResult): NodeObject {
  const { review } = result;
  assert.equal(review.apiVersion, 'admission.k8s.io/v1');
  assert.equal(review.kind, 'AdmissionReview');
  assert.equal(review.response.uid, r.request.uid);
  assert.equal(review.response.allowed, true);
  const patch = patchOf(review);
  assert.equal(patch.length > 0, result.outcome === 'patched', `outcome ${result.outcome} with ${patch.length} ops`);
  if (patch.length === 0) return r.request.object;
  assert.equal(review.response.patchType, 'JSONPatch');
  for (const op of patch) assert.match(op.path, /^\/status\/allocatable\/(cpu|memory)$|^\/metadata\/annotations(\/oversell\.io~1[a-z-]+)?$/);
  const out = applied(r.request.object, patch);
  assert.deepEqual(rest(out), rest(r.request.object), 'only allocatable cpu/memory and our annotations change');
  for (const q of [out.status.allocatable.cpu, out.status.allocatable.memory]) if (q !== undefined) assertCanonical(q);
  return out;
}

/** Expected annotation values: a string is exact, a RegExp matches, undefined is absent. */
type Annotations = Partial<Record<keyof typeof ANNOTATION, string | RegExp | undefined>>;

function assertAnnotations(out: NodeObject, expected: Annotations | undefined) {
  for (const [key, want] of Object.entries(expected ?? {}) as Array<[keyof typeof ANNOTATION, string | RegExp | undefined]>) {
    const got = out.metadata.annotations?.[ANNOTATION[key]];
    if (want instanceof RegExp) assert.match(got ?? '', want, key);
    else assert.equal(got, want, key);
  }
}

interface Row {
  what: string;
  node?: string;
  /** No agent data for the node at all. */
  noReport?: true;
  /** How old the agent's data is when the kubelet writes. */
  ageMs?: number;
  /** What makes this write differ from the kubelet's own nodes/status UPDATE. */
  write?: (r: NodeReview) => void;
  outcome: Outcome;
  cpu?: string;
  memory?: string;
  annotations?: Annotations;
}

describe('reviewNode: one kubelet write of the fixture node (8 cores, 7910m allocatable) with agent data', () => {
  let bench: ReviewBench;
  beforeEach(() => {
    clock += 1000;
    bench = reviewBench({ now });
  });

  /** The row's write, after its agent data; the result and the object it leaves. */
  function run(row: Row): { r: NodeReview; result: NodeReviewResult; out: NodeObject } {
    const node = row.node ?? undefined;
    const r = kubeletReview(node);
    if (!row.noReport) bench.report(r.request.name, nodeSample(clock));
    clock += row.ageMs ?? 0;
    row.write?.(r);
    const result = bench.review(r);
    return { r, result, out: checked(r, result) };
  }

  const rows: Row[] = [
    {
      // cpu: A = 7910m, R = 6000m, U = 600m: L = 0.1, headroom = 6000 + (4746-600)/0.1 -> capped at 2x = 15820m.
      // memory: A = 31369912Ki, R = 20Gi, U = 6Gi, L = 0.3 -> headroom far above the cap while learning (no load history yet) 1.25x = 39212390Ki.
      what: 'a kubelet nodes/status UPDATE is inflated, with raw values and reason recorded',
      outcome: 'patched', cpu: '15820m', memory: '39212390Ki',
      annotations: { rawCpu: '7910m', rawMemory: '31369912Ki', grantedCpu: '15820m', dryRunCpu: undefined, reason: /^policy flags; cpu 7910m->15820m \(capped at 2x raw/ },
    },
    {
      what: 'a node CREATE (registration carries full status) is inflated',
      node: 'new-node-1',
      write: (r) => {
        r.request.operation = 'CREATE';
        delete r.request.subResource;
        delete r.request.oldObject;
        r.request.object.metadata = { name: 'new-node-1', labels: { 'oversell.io/enabled': 'true' } };
      },
      outcome: 'patched', cpu: '15820m', annotations: { rawCpu: '7910m' },
    },
    {
      what: 'stale data (41 s old): no inflation, allocatable stays at raw, and the reason says why',
      node: 'stale-node', ageMs: 41_000,
      outcome: 'patched', cpu: '7910m', memory: '31369912Ki', annotations: { reason: /old \(staleAfter 40s\): no inflation/ },
    },
    { what: 'no data for the node: allowed, no patch', node: 'never-reported', noReport: true, outcome: 'no-data' },
    // Not a write we handle, or one we cannot read: allowed without a patch.
    { what: 'a Pod', outcome: 'skipped', write: (r) => { r.request.kind.kind = 'Pod'; r.request.resource.resource = 'pods'; } },
    { what: 'a node spec UPDATE (no subresource)', outcome: 'skipped', write: (r) => { delete r.request.subResource; } },
    { what: 'a CREATE on nodes/status', outcome: 'skipped', write: (r) => { r.request.operation = 'CREATE'; } },
    { what: 'a DELETE', outcome: 'skipped', write: (r) => { r.request.operation = 'DELETE'; delete r.request.subResource; } },
    { what: 'a node without status', outcome: 'skipped', write: (r) => { delete (r.request.object as Partial<NodeObject>).status; } },
    { what: 'allocatable without memory', outcome: 'skipped', write: (r) => { delete r.request.object.status.allocatable.memory; } },
    { what: 'a malformed cpu quantity', outcome: 'skipped', write: (r) => { r.request.object.status.allocatable.cpu = '7.9 cores'; } },
    { what: 'a numeric cpu quantity', outcome: 'skipped', write: (r) => { (r.request.object.status.allocatable as Record<string, unknown>).cpu = 8; } },
    { what: 'a negative memory quantity', outcome: 'unverified', write: (r) => { r.request.object.status.allocatable.memory = '-1Gi'; } },
    { what: 'an object that is a string', outcome: 'skipped', write: (r) => { (r.request as { object: unknown }).object = 'node'; } },
  ];
  for (const row of rows) {
    it(`${row.what} (${row.outcome})`, () => {
      const { result, out } = run(row);
      assert.equal(result.outcome, row.outcome, result.detail);
      if (row.cpu) assert.equal(out.status.allocatable.cpu, row.cpu);
      if (row.memory) assert.equal(out.status.allocatable.memory, row.memory);
      assertAnnotations(out, row.annotations);
    });
  }

  it('the quantities it writes are exact: granted values parse back to the decided numbers', () => {
    const { result, out } = run(rows[0]!);
    assert.equal(milliValue(parseQuantity(out.status.allocatable.cpu ?? '')), 15820n);
    assert.equal(value(parseQuantity(out.status.allocatable.memory ?? '')), 39212390n * 1024n);
    assert.equal(result.decision?.cpu.applied, 15820n);
  });

  it('settles at once: a second pass moves one unit off the grant it finds (it may be the kubelet\'s raw), a third changes nothing', () => {
    const { out: first } = run(rows[0]!);
    const again = kubeletReview();
    again.request.object = first;
    const second = bench.review(again);
    const settled = checked(again, second);
    assert.equal(second.observed?.raw.cpuMillicores, 7910n, 'raw from the signed record');
    assert.equal(milliValue(parseQuantity(settled.status.allocatable.cpu ?? '')), 15819n);
    again.request.object = settled;
    const third = bench.review(again);
    assert.equal(third.outcome, 'unchanged');
    assert.deepEqual(checked(again, third), settled);
  });

  it('the next kubelet write (raw allocatable over our annotations) gives the same grant, without compounding', () => {
    const { out: inflated } = run(rows[0]!);
    // The kubelet's strategic merge patch puts its raw value back; annotations stay.
    const kubelet = structuredClone(inflated);
    kubelet.status.allocatable.cpu = '7910m';
    kubelet.status.allocatable.memory = '31369912Ki';
    const next = kubeletReview();
    next.request.object = kubelet;
    const out = checked(next, bench.review(next));
    assert.equal(out.status.allocatable.cpu, inflated.status.allocatable.cpu);
    assert.equal(out.status.allocatable.memory, inflated.status.allocatable.memory);
    assert.equal(out.metadata.annotations?.[ANNOTATION.rawCpu], '7910m');
  });

  it('takes a changed raw allocatable from the kubelet even when our annotations exist', () => {
    const { out: inflated } = run(rows[0]!);
    inflated.status.allocatable.cpu = '3910m'; // kube-reserved was raised
    const next = kubeletReview();
    next.request.object = inflated;
    const out = checked(next, bench.review(next));
    assert.equal(out.metadata.annotations?.[ANNOTATION.rawCpu], '3910m');
    assert.equal(out.status.allocatable.cpu, '7820m');
  });

  it('stale data over a previously inflated object brings allocatable back to the floor', () => {
    const { out: inflated } = run({ ...rows[0]!, node: 'was-inflated' });
    assert.equal(inflated.status.allocatable.cpu, '15820m');
    clock += 60_000;
    const next = kubeletReview('was-inflated');
    next.request.object = inflated; // a writer that did not touch allocatable
    const out = checked(next, bench.review(next));
    assert.equal(out.status.allocatable.cpu, '7910m');
  });

  it('the result carries what the gateway keeps (observed) and the decision; a dry run is flagged', () => {
    const { result } = run(rows[0]!);
    assert.equal(result.node, 'ip-10-0-17-42.eu-west-1.compute.internal');
    assert.equal(result.dryRun, false);
    assert.deepEqual(result.observed?.raw, { cpuMillicores: 7910n, memoryBytes: 31369912n * 1024n });
    assert.deepEqual(result.observed?.lastGrant?.granted, { cpuMillicores: 15820n, memoryBytes: 39212390n * 1024n });
    assert.equal(result.decision?.cpu.decidedBy, 'cap');
    const dry = run({ ...rows[0]!, write: (r) => (r.request.dryRun = true) });
    assert.equal(dry.result.dryRun, true);
  });

  const notReviews: Array<[string, unknown, RegExp]> = [
    ['a JSON array', [1, 2, 3], /JSON object/],
    ['a JSON string', 'hello', /JSON object/],
    ['a v1beta1 review', { apiVersion: 'admission.k8s.io/v1beta1', kind: 'AdmissionReview', request: { uid: 'x' } }, /admissionReviewVersions/],
    ['a review without uid', { apiVersion: 'admission.k8s.io/v1', kind: 'AdmissionReview', request: {} }, /uid/],
    ['a review without request', { apiVersion: 'admission.k8s.io/v1', kind: 'AdmissionReview' }, /no request/],
  ];
  for (const [what, body, message] of notReviews) {
    it(`${what} is no AdmissionReview: BadReviewError (the plugin answers 400 with its message)`, () => {
      assert.throws(() => bench.review(body), (err: unknown) => err instanceof BadReviewError && message.test(err.message));
    });
  }
});

describe('reviewNode with OversellPolicies', () => {
  const entry = (name: string, mode: 'Enforce' | 'DryRun', priority = 0) =>
    toPolicyEntry({ metadata: { name }, spec: { nodeSelector: { matchLabels: { pool: 'dry' } }, mode, priority } });
  const policies = listPolicySource([entry('pool-dry', 'DryRun')]);
  const bench = reviewBench({ now, policies });
  beforeEach(() => {
    clock += 1000;
    policies.set([entry('pool-dry', 'DryRun')]);
  });

  function poolReview(name: string): NodeReview {
    const r = kubeletReview(name);
    r.request.object.metadata.labels = { 'oversell.io/enabled': 'true', pool: 'dry' };
    bench.report(name, nodeSample(clock));
    return r;
  }
  const pass = (r: NodeReview) => checked(r, bench.review(r));
  function nextWrite(name: string, object: NodeObject): NodeReview {
    const next = kubeletReview(name);
    next.request.object = object;
    return next;
  }

  it('DryRun: allocatable stays raw; the would-be grant is in its own annotations and the reason', () => {
    const r = poolReview('dry-1');
    const result = bench.review(r);
    const out = checked(r, result);
    assert.equal(out.status.allocatable.cpu, '7910m');
    assert.equal(out.status.allocatable.memory, '31369912Ki');
    assertAnnotations(out, { dryRunCpu: '15820m', grantedCpu: '7910m', reason: /^policy pool-dry \(DryRun: allocatable not changed\)/ });
    // What the plugin turns into oversell_node_granted_ratio 2 and oversell_node_applied_ratio 1.
    assert.deepEqual([result.decision?.cpu.raw, result.decision?.cpu.granted, result.decision?.cpu.applied], [7910n, 15820n, 7910n]);
  });

  it('switching the policy to Enforce inflates on the next write and drops the DryRun annotations', () => {
    const dry = pass(poolReview('dry-2'));
    policies.set([entry('pool-dry', 'Enforce')]);
    const out = pass(nextWrite('dry-2', dry));
    assert.equal(out.status.allocatable.cpu, '15820m');
    assertAnnotations(out, { dryRunCpu: undefined, reason: /^policy pool-dry; cpu 7910m->15820m/ });
  });

  it('deleting the policy brings an inflated node back to the floor on the next write', () => {
    policies.set([entry('pool-dry', 'Enforce')]);
    const inflated = pass(poolReview('dry-3'));
    assert.equal(inflated.status.allocatable.cpu, '15820m');
    policies.set([]);
    const out = pass(nextWrite('dry-3', inflated)); // even a write that did not touch allocatable
    assert.equal(out.status.allocatable.cpu, '7910m');
    assertAnnotations(out, { reason: /no valid OversellPolicy selects this node/ });
  });

  it('an invalid policy: no inflation, and the reason names the error', () => {
    policies.set([toPolicyEntry({ metadata: { name: 'pool-dry' }, spec: { nodeSelector: { matchLabels: { pool: 'dry' } }, cpu: { maxRatio: 0 } } })]);
    const out = pass(poolReview('dry-4'));
    assert.equal(out.status.allocatable.cpu, '7910m');
    assertAnnotations(out, { reason: /OversellPolicy pool-dry is invalid \(spec\.cpu\.maxRatio/ });
  });
});

// Issue 19's invariants 1, 2, 4 and 5: a grant comes only from what cannot be
// forged. Each case is one a user reproduced against the old gateway (anyone
// with `nodes` patch or an agent lifting a node to thousands of cores); each
// must now pass untouched or stay within raw..cap x raw.
describe('reviewNode trust: a grant only from what cannot be forged (4-core node)', () => {
  const key = randomBytes(32);
  let bench: ReviewBench;
  beforeEach(() => {
    clock += 1000;
    bench = reviewBench({ now, proofKey: key });
  });

  const sample = (over: Partial<Sample__Output> = {}) => nodeSample(clock, {
    cpuUsageMillicores: 200,
    memoryWorkingSetBytes: 1024 ** 3,
    capacity: { cpuMillicores: 4000, memoryBytes: 8 * 1024 ** 3 },
    requests: { cpuMillicores: 3000, memoryBytes: 6 * 1024 ** 3, podCount: 10, known: true },
    ...over,
  });

  /** A kubelet write for `name` with the given allocatable and capacity, no annotations. */
  function write(name: string, allocatable: { cpu: string; memory: string }, capacity = allocatable): NodeReview {
    const r = kubeletReview(name);
    delete r.request.oldObject;
    const o = r.request.object;
    o.metadata.annotations = {};
    Object.assign(o.status.allocatable, allocatable);
    Object.assign(o.status.capacity, capacity);
    return r;
  }
  const cpuOf = (o: NodeObject) => milliValue(parseQuantity(o.status.allocatable.cpu ?? ''));
  const memOf = (o: NodeObject) => value(parseQuantity(o.status.allocatable.memory ?? ''));
  const FOUR = { cpu: '4', memory: '8Gi' };

  interface TrustRow {
    what: string;
    sample?: Partial<Sample__Output>;
    write: () => NodeReview;
    outcome: Outcome;
    /** Raw as the gateway keeps it (result.observed, which the plugin stores); undefined: nothing kept. */
    keptRawCpu: bigint | undefined;
    check?: (out: NodeObject, result: NodeReviewResult) => void;
  }
  const forged = (claimed: string): TrustRow => ({
    what: `annotations claiming a raw of ${claimed} cores decide nothing: raw is the kubelet's 4, the grant at most 2x`,
    write: () => {
      const r = write(`forged-raw-${claimed}`, FOUR);
      r.request.object.metadata.annotations = { [ANNOTATION.grantedCpu]: '4', [ANNOTATION.rawCpu]: claimed, [ANNOTATION.grantedMemory]: '8Gi', [ANNOTATION.rawMemory]: '8Gi' };
      return r;
    },
    outcome: 'patched',
    keptRawCpu: 4000n,
    check: (out) => {
      assert.ok(cpuOf(out) >= 4000n && cpuOf(out) <= 8000n, `cpu ${out.status.allocatable.cpu} outside 4..8`);
      assert.equal(out.metadata.annotations?.[ANNOTATION.rawCpu], '4');
    },
  });
  const byOther = (who: string, username: string): TrustRow => ({
    what: `a status write by ${who} passes untouched, and nothing it says is kept`,
    write: () => {
      const r = write('identity', FOUR);
      r.request.userInfo = { username };
      return r;
    },
    outcome: 'not-kubelet',
    keptRawCpu: undefined,
  });
  const rows: TrustRow[] = [
    forged('1000'),
    forged('1e60'),
    {
      what: 'an agent reporting 9e18 millicores bound, under 99% CPU pressure, cannot lift the grant past 2x raw',
      sample: {
        requests: { cpuMillicores: 9e18, memoryBytes: 9e18, podCount: 1, known: true },
        pressure: {
          available: true, cpuSome: { avg10: 99, avg60: 99 }, cpuFull: { avg10: 0, avg60: 0 },
          memorySome: { avg10: 0, avg60: 0 }, memoryFull: { avg10: 0, avg60: 0 }, cpuContention: null,
        },
      },
      write: () => write('wild-agent', FOUR),
      outcome: 'patched',
      keptRawCpu: 4000n,
      check: (out, result) => {
        assert.ok(cpuOf(out) <= 8000n, `cpu ${out.status.allocatable.cpu}`);
        assert.ok(memOf(out) <= (8n * 1024n ** 3n * BigInt(DEFAULT_POLICY.memory.maxRatio * 100)) / 100n, `memory ${out.status.allocatable.memory}`);
        // The plugin shows it as oversell_node_requests_over_cap{resource="cpu"} 1.
        assert.equal(result.decision?.cpu.requestsOverCap, true);
      },
    },
    {
      what: 'an allocatable beyond int64 (99999999999999999999E; binary ones the API server caps at int64) passes untouched',
      write: () => write('huge', { cpu: '4', memory: '99999999999999999999E' }, { cpu: '4', memory: '99999999999999999999E' }),
      outcome: 'unverified',
      keptRawCpu: undefined,
    },
    byOther('a ServiceAccount', 'system:serviceaccount:kube-system:x'),
    byOther('another node\'s kubelet', 'system:node:some-other-node'),
    byOther('nobody (no userInfo)', ''),
    {
      what: 'a dryRun review gets the answer a real write would, flagged so the plugin keeps nothing of it',
      write: () => {
        const r = write('dry', { cpu: '64', memory: '8Gi' }, { cpu: '64', memory: '8Gi' });
        r.request.dryRun = true;
        return r;
      },
      outcome: 'patched',
      keptRawCpu: 64000n,
      check: (_out, result) => assert.equal(result.dryRun, true),
    },
  ];
  for (const row of rows) {
    it(`${row.what} (${row.outcome})`, () => {
      const r = row.write();
      bench.report(r.request.name, sample(row.sample));
      const result = bench.review(r);
      const out = checked(r, result);
      assert.equal(result.outcome, row.outcome, result.detail);
      assert.equal(result.observed?.raw.cpuMillicores, row.keptRawCpu);
      row.check?.(out, result);
    });
  }

  it('a record forged, edited or copied from another node is not ours: raw comes from the kubelet\'s write', () => {
    bench.report('record-source', sample());
    const source = write('record-source', FOUR);
    const inflated = checked(source, bench.review(source));
    const good = inflated.metadata.annotations ?? {};
    assert.match(good[ANNOTATION.proof] ?? '', /^v1\.[0-9a-f]{8}\.[A-Za-z0-9_-]+$/);
    assert.equal(cpuOf(inflated), 8000n);

    // Node B is an 8-core node carrying a copy of A's (valid for A) record, allocatable equal to A's grant.
    bench.report('record-copy', sample({ capacity: { cpuMillicores: 8000, memoryBytes: 8 * 1024 ** 3 } }));
    const copy = write('record-copy', { cpu: '8', memory: '8Gi' }, { cpu: '8', memory: '8Gi' });
    copy.request.object.metadata.annotations = { ...good };
    const copied = checked(copy, bench.review(copy));
    assert.equal(copied.metadata.annotations?.[ANNOTATION.rawCpu], '8', 'raw is the kubelet\'s 8, not A\'s signed 4');

    // A's own record with its raw edited down: the MAC no longer verifies, so the incoming 8 cores
    // is the kubelet's number, and 8 is above A's capacity of 4: untouched.
    const edited = structuredClone(inflated);
    edited.metadata.annotations = { ...good, [ANNOTATION.rawCpu]: '2' };
    const again = write('record-source', FOUR);
    again.request.object = edited;
    const result = bench.review(again);
    checked(again, result);
    assert.equal(result.outcome, 'unverified');
  });

  it('a second pass over our own output reads raw from the record and settles one unit off it; it never compounds, even once the record is gone', () => {
    bench.report('compound', sample());
    const r = write('compound', FOUR);
    const first = checked(r, bench.review(r));
    assert.equal(cpuOf(first), 8000n);
    const again = write('compound', FOUR);
    again.request.object = first;
    const second = bench.review(again);
    const settled = checked(again, second);
    // Our grant of 8 is on the object as the kubelet's own write: it may be the kubelet's raw, so no grant is written at it.
    assert.equal(second.observed?.raw.cpuMillicores, 4000n, 'raw from the signed record, never the 8 we wrote');
    assert.equal(cpuOf(settled), 7999n);
    assert.equal(settled.metadata.annotations?.[ANNOTATION.unconfirmedCpu], '8');
    again.request.object = settled;
    const settledAgain = bench.review(again);
    checked(again, settledAgain);
    assert.equal(settledAgain.outcome, 'unchanged', 'a pass over the settled output changes nothing');
    // Someone with nodes patch deletes the proof: the inflated 8 cores is above capacity 4, so it is not taken as raw.
    const stripped = structuredClone(first);
    delete stripped.metadata.annotations?.[ANNOTATION.proof];
    again.request.object = stripped;
    const third = bench.review(again);
    checked(again, third);
    assert.equal(third.outcome, 'unverified');
    assert.equal(third.unverified, 'above-capacity', 'counted as oversell_webhook_untouched_total{reason="above-capacity"}');
  });

  describe('the kubelet leaves our grant in place: its raw is either the record\'s or that very grant', () => {
    // Capacity 16 cores: a raw of 8 is a number the kubelet can compute.
    const SIXTEEN = { cpu: '16', memory: '8Gi' };
    /** The kubelet's first write (raw 4), inflated to 8 cores, then a write that omits allocatable (the object keeps our 8). */
    function leftInPlace(name: string): { inflated: NodeObject; ambiguous: NodeObject; next: NodeReview } {
      bench.report(name, sample({ capacity: { cpuMillicores: 16000, memoryBytes: 8 * 1024 ** 3 } }));
      const r = write(name, FOUR, SIXTEEN);
      const inflated = checked(r, bench.review(r));
      assert.equal(cpuOf(inflated), 8000n);
      const next = write(name, FOUR, SIXTEEN);
      next.request.object = structuredClone(inflated);
      const result = bench.review(next);
      const ambiguous = checked(next, result);
      assert.equal(result.observed?.raw.cpuMillicores, 4000n, 'raw from the signed record: the cap never follows a number we wrote');
      assert.equal(result.observed?.lastGrant?.unconfirmed?.cpuMillicores, 8000n);
      assert.notEqual(cpuOf(ambiguous), 8000n, 'not written at the value the kubelet may hold as raw');
      assert.equal(cpuOf(ambiguous), 7999n);
      assert.match(ambiguous.metadata.annotations?.[ANNOTATION.reason] ?? '', /moved off 8000m, which the kubelet left in place/);
      return { inflated, ambiguous, next };
    }

    it('raw rose to exactly the grant: the kubelet\'s next write carries 8, and 8 is raw', () => {
      const { ambiguous, next } = leftInPlace('rose-to-grant');
      // The stored 7999m differs from the kubelet's 8, so its next patch sets allocatable to 8.
      next.request.object = structuredClone(ambiguous);
      next.request.object.status.allocatable.cpu = '8';
      const result = bench.review(next);
      const out = checked(next, result);
      assert.equal(result.observed?.raw.cpuMillicores, 8000n, 'the kubelet\'s own 8');
      assert.equal(out.metadata.annotations?.[ANNOTATION.rawCpu], '8');
      assert.equal(out.metadata.annotations?.[ANNOTATION.unconfirmedCpu], undefined, 'confirmed: the marker is gone');
      assert.ok(cpuOf(out) >= 8000n && cpuOf(out) <= 16000n, `grant ${out.status.allocatable.cpu} within [raw, 2x raw]`);
    });

    it('a stale cache left our grant in place: the kubelet\'s next write carries 4, and 4 stays raw', () => {
      const { ambiguous, next } = leftInPlace('stale-cache');
      next.request.object = structuredClone(ambiguous);
      next.request.object.status.allocatable.cpu = '4';
      const result = bench.review(next);
      const out = checked(next, result);
      assert.equal(result.observed?.raw.cpuMillicores, 4000n);
      assert.equal(out.metadata.annotations?.[ANNOTATION.unconfirmedCpu], undefined);
      assert.equal(cpuOf(out), 7999n, 'the grant of 8 again, held at 7999m by hysteresis now that the kubelet said 4');
    });

    it('the marker is signed: removing or editing it voids the record', () => {
      const { ambiguous, next } = leftInPlace('marker-signed');
      for (const edit of [(a: Record<string, string>) => delete a[ANNOTATION.unconfirmedCpu], (a: Record<string, string>) => (a[ANNOTATION.unconfirmedCpu] = '7999m')]) {
        const o = structuredClone(ambiguous);
        edit(o.metadata.annotations ?? {});
        next.request.object = o;
        const result = bench.review(next);
        checked(next, result);
        // Without a verified record the object is judged as the kubelet's write alone: its inflated memory is above capacity.
        assert.equal(result.outcome, 'unverified');
        assert.equal(result.unverified, 'above-capacity');
      }
    });
  });

  it('replicas sharing the key trust each other\'s records; a replica with another key does not', () => {
    const twin = reviewBench({ now, proofKey: key });
    const stranger = reviewBench({ now, proofKey: randomBytes(32) });
    for (const b of [bench, twin, stranger]) b.report('shared', sample());
    const r = write('shared', FOUR);
    const inflated = checked(r, bench.review(r));
    const next = write('shared', FOUR);
    next.request.object = inflated;
    const byTwin = twin.review(next);
    const twinOut = checked(next, byTwin);
    assert.equal(byTwin.observed?.raw.cpuMillicores, 4000n, 'the twin reads raw 4 from the record');
    assert.equal(cpuOf(twinOut), 7999n, 'and decides the same 8, moved one unit off the value the kubelet left in place');
    const byStranger = stranger.review(next);
    checked(next, byStranger);
    assert.equal(byStranger.outcome, 'unverified', 'the stranger cannot verify the record and 8 > capacity 4: untouched');
    assert.equal(byStranger.observed, undefined);
  });
});

describe('nodePatch: the ops that make a node object carry a decision', () => {
  const proof = new GrantProof(Buffer.alloc(32, 7));
  const resource = (raw: bigint, granted: bigint, applied: bigint): ResourceDecision => ({
    raw, granted, applied, decidedBy: 'cap', floor: raw, cap: granted, requestsOverCap: false, usage: undefined, headroom: undefined, loadFactor: undefined, avoided: undefined,
  });
  const GI = 1024n ** 3n;
  const raw = { cpuMillicores: 4000n, memoryBytes: 8n * GI };
  const decision = (dryRun: boolean): Decision => ({
    cpu: resource(4000n, 8000n, dryRun ? 4000n : 8000n),
    memory: resource(8n * GI, 10n * GI, dryRun ? 8n * GI : 10n * GI),
    policy: 'p',
    dryRun,
    reason: 'because',
  });
  const facts = (incoming: { cpuMillicores: bigint; memoryBytes: bigint }, annotations: Record<string, unknown> | undefined): NodeObjectFacts => ({
    name: 'n1', incoming, capacity: { cpuMillicores: 4000n, memoryBytes: 8n * GI }, annotations,
  });
  /** Our annotations as nodePatch writes them for the decision. */
  const ours = (d: Decision) => nodePatch(facts(raw, undefined), raw, d, proof)[0]!.value as Record<string, string>;

  const rows: Array<{ what: string; incoming: { cpuMillicores: bigint; memoryBytes: bigint }; annotations: () => Record<string, unknown> | undefined; dryRun: boolean; ops: Array<[string, string, unknown?]> }> = [
    {
      what: 'no annotations at all: one op adds them whole, then allocatable is replaced',
      incoming: raw, annotations: () => undefined, dryRun: false,
      ops: [['add', '/metadata/annotations'], ['replace', '/status/allocatable/cpu', '8'], ['replace', '/status/allocatable/memory', '10Gi']],
    },
    {
      what: 'other annotations: ours are added one by one (JSON-pointer escaped), theirs untouched',
      incoming: raw, annotations: () => ({ 'example.com/x': 'y' }), dryRun: false,
      ops: [
        ...['raw-allocatable-cpu', 'raw-allocatable-memory', 'granted-allocatable-cpu', 'granted-allocatable-memory', 'reason', 'grant-proof']
          .map((k): [string, string] => ['add', `/metadata/annotations/oversell.io~1${k}`]),
        ['replace', '/status/allocatable/cpu', '8'], ['replace', '/status/allocatable/memory', '10Gi'],
      ],
    },
    {
      what: 'already carrying the decision: no ops at all',
      incoming: { cpuMillicores: 8000n, memoryBytes: 10n * GI }, annotations: () => ours(decision(false)), dryRun: false, ops: [],
    },
    {
      what: 'allocatable equal in value is left as the kubelet spelled it: only annotations',
      incoming: { cpuMillicores: 8000n, memoryBytes: 10n * GI }, annotations: () => ({}), dryRun: false,
      ops: ['raw-allocatable-cpu', 'raw-allocatable-memory', 'granted-allocatable-cpu', 'granted-allocatable-memory', 'reason', 'grant-proof']
        .map((k): [string, string] => ['add', `/metadata/annotations/oversell.io~1${k}`]),
    },
    {
      what: 'DryRun: the would-be grant goes into its own annotations, allocatable stays raw',
      incoming: raw, annotations: () => ({}), dryRun: true,
      ops: ['raw-allocatable-cpu', 'raw-allocatable-memory', 'granted-allocatable-cpu', 'granted-allocatable-memory', 'dry-run-allocatable-cpu', 'dry-run-allocatable-memory', 'reason', 'grant-proof']
        .map((k): [string, string] => ['add', `/metadata/annotations/oversell.io~1${k}`]),
    },
    {
      what: 'leaving DryRun removes its annotations',
      incoming: raw, annotations: () => ours(decision(true)), dryRun: false,
      ops: [
        ['add', '/metadata/annotations/oversell.io~1granted-allocatable-cpu', '8'],
        ['add', '/metadata/annotations/oversell.io~1granted-allocatable-memory', '10Gi'],
        ['remove', '/metadata/annotations/oversell.io~1dry-run-allocatable-cpu'],
        ['remove', '/metadata/annotations/oversell.io~1dry-run-allocatable-memory'],
        ['add', '/metadata/annotations/oversell.io~1grant-proof'],
        ['replace', '/status/allocatable/cpu', '8'], ['replace', '/status/allocatable/memory', '10Gi'],
      ],
    },
  ];
  for (const row of rows) {
    it(row.what, () => {
      const ops = nodePatch(facts(row.incoming, row.annotations()), raw, decision(row.dryRun), proof);
      assert.deepEqual(ops.map((o) => [o.op, o.path]), row.ops.map(([op, path]) => [op, path]));
      row.ops.forEach(([, , want], i) => {
        if (want !== undefined) assert.equal(ops[i]?.value, want, ops[i]?.path);
      });
    });
  }

  it('the record is signed over node, capacity, raw and grant: another grant, another proof', () => {
    const a = ours(decision(false))[ANNOTATION.proof];
    const b = ours(decision(true))[ANNOTATION.proof];
    assert.match(a ?? '', /^v1\./);
    assert.notEqual(a, b);
  });
});
