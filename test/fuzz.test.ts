// Hostile and broken input, at volume. 100,000 generated AdmissionReviews (the
// real kubelet-shaped review, mutated: fields removed, retyped, huge, negative,
// exotic quantities, deep nesting, unknown versions) through the handler, and
// a share of them plus raw byte garbage over real HTTPS. Every case must get a
// well-formed answer: an allowed response (with or without a patch) or a 400;
// no throw, no crash, and no patch that sets a quantity the API server would
// refuse or rewrite. Memory must not grow with the number of cases.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { after, before, describe, it } from 'node:test';
import fc from 'fast-check';
import jsonpatch from 'fast-json-patch';
import { BadReviewError } from '../gateway/admit/admission-review.js';
import { randomBytes } from 'node:crypto';
import { reviewNode, type NodeReviewDeps } from '../gateway/admit/node-review.js';
import { GrantProof } from '../gateway/decide/grant-proof.js';
import { DEFAULT_POLICY } from '../gateway/decide/policy.js';
import { flagsPolicySource } from '../gateway/policies/policy-source.js';
import { NodeStore } from '../gateway/store/node-store.js';
import { formatQuantity, milliValue, parseQuantity, value } from '../lib/quantity.js';
import { apimachineryQuantities } from './helpers/apimachinery-quantity.js';
import { postHttps, startTestGateway, type TestGateway } from './helpers/gateway.js';
import { storeSample } from './helpers/store-sample.js';

const CASES = Number(process.env.FUZZ_CASES ?? 100_000);
const HTTP_CASES = Math.max(200, Math.round(CASES / 50));
const fixture = readFileSync(new URL('./fixtures/admission/node-status-update.json', import.meta.url), 'utf8');
const base = JSON.parse(fixture) as Record<string, unknown>;
const NODE = 'ip-10-0-17-42.eu-west-1.compute.internal';

// ---------------------------------------------------------------- generators

const exoticQuantity = fc.oneof(
  fc.constantFrom('0', '-1', '-1Gi', '1e308', '1e-308', '9'.repeat(80), '0.000000000001', '1E', '1Ei', '16Ei', '1.5Ki', '+7910m', '.5', '1.', 'NaN', 'Infinity', '', ' ', '1Gb', '0x10', '7910m\u0000'),
  fc.bigInt({ min: -(2n ** 80n), max: 2n ** 80n }).map((n) => `${n}`),
  fc.tuple(fc.double({ noNaN: false }), fc.constantFrom('', 'm', 'Ki', 'Mi', 'Gi', 'e3', 'k', 'n')).map(([d, s]) => `${d}${s}`),
  fc.string({ maxLength: 20 }),
  fc.integer(),
  fc.double(),
  fc.constant(null),
  fc.array(fc.string(), { maxLength: 3 }),
);

const weirdValue: fc.Arbitrary<unknown> = fc.oneof(
  fc.constant(null), fc.constant(undefined), fc.boolean(), fc.integer(), fc.double(), fc.string({ maxLength: 30 }),
  fc.constant({}), fc.constant([]), fc.constant('x'.repeat(10_000)), fc.constant(Number.MAX_VALUE),
  fc.constant(JSON.parse('{"__proto__": {"polluted": true}}')),
);

type Mutation = (review: Record<string, unknown>) => void;

const PATHS = [
  ['apiVersion'], ['kind'], ['request'], ['request', 'uid'], ['request', 'kind'], ['request', 'kind', 'kind'], ['request', 'resource'],
  ['request', 'resource', 'resource'], ['request', 'subResource'], ['request', 'operation'], ['request', 'object'], ['request', 'name'],
  ['request', 'object', 'metadata'], ['request', 'object', 'metadata', 'name'], ['request', 'object', 'metadata', 'labels'],
  ['request', 'object', 'metadata', 'annotations'], ['request', 'object', 'status'], ['request', 'object', 'status', 'allocatable'],
  ['request', 'object', 'status', 'capacity'], ['request', 'userInfo'],
];

function setAt(obj: Record<string, unknown>, path: string[], value: unknown, remove = false): void {
  let cur: unknown = obj;
  for (const k of path.slice(0, -1)) {
    if (typeof cur !== 'object' || cur === null) return;
    cur = (cur as Record<string, unknown>)[k];
  }
  if (typeof cur !== 'object' || cur === null) return;
  const last = path[path.length - 1] ?? '';
  if (remove) delete (cur as Record<string, unknown>)[last];
  else (cur as Record<string, unknown>)[last] = value;
}

const mutation: fc.Arbitrary<Mutation> = fc.oneof(
  // Values are cloned as they go in: a constant shared between cases must not be written through.
  fc.record({ path: fc.constantFrom(...PATHS), value: weirdValue }).map(({ path, value }) => (r: Record<string, unknown>) => setAt(r, path, value === undefined ? value : structuredClone(value))),
  fc.constantFrom(...PATHS).map((path) => (r: Record<string, unknown>) => setAt(r, path, undefined, true)),
  fc.record({ key: fc.constantFrom('cpu', 'memory', 'pods'), value: exoticQuantity }).map(({ key, value }) => (r: Record<string, unknown>) =>
    setAt(r, ['request', 'object', 'status', 'allocatable', key], structuredClone(value))),
  fc.record({ key: fc.constantFrom('oversell.io/raw-allocatable-cpu', 'oversell.io/granted-allocatable-cpu', 'oversell.io/raw-allocatable-memory', 'oversell.io/granted-allocatable-memory', 'oversell.io/max-ratio-cpu'), value: exoticQuantity }).map(({ key, value }) => (r: Record<string, unknown>) => {
    const meta = (r.request as { object?: { metadata?: Record<string, unknown> } })?.object?.metadata;
    if (meta && typeof meta === 'object') meta.annotations = { ...(meta.annotations as object), [key]: structuredClone(value) };
  }),
  fc.constantFrom('CREATE', 'UPDATE', 'DELETE', 'CONNECT', 'update', '').map((op) => (r: Record<string, unknown>) => setAt(r, ['request', 'operation'], op)),
  fc.constantFrom('admission.k8s.io/v1beta1', 'admission.k8s.io/v2', 'v1', '').map((v) => (r: Record<string, unknown>) => setAt(r, ['apiVersion'], v)),
  fc.integer({ min: 1, max: 1000 }).map((depth) => (r: Record<string, unknown>) => {
    let deep: unknown = 'bottom';
    for (let i = 0; i < depth; i++) deep = { d: deep };
    setAt(r, ['request', 'object', 'metadata', 'labels'], deep);
  }),
);

const arbReview = fc.array(mutation, { minLength: 1, maxLength: 4 }).map((ms) => {
  const r = structuredClone(base);
  for (const m of ms) m(r);
  return r;
});

// ---------------------------------------------------------------- checks

/** Every allocatable quantity any patch set, for Kubernetes' own parser after the run. */
const written = { cpu: new Set<string>(), memory: new Set<string>() };

/**
 * A patch must apply to the object, stay within raw..cap x raw (invariant 2:
 * no store here has the API server's bound pods, so the agent's requests can
 * hold nothing above the cap; raw is the kubelet's incoming value, the fixture
 * carrying no record of ours), and set only quantities checked later with
 * k8s.io/apimachinery (invariant 6).
 */
function checkPatch(review: Record<string, unknown>, patchB64: string): void {
  const ops = JSON.parse(Buffer.from(patchB64, 'base64').toString()) as jsonpatch.Operation[];
  assert.ok(Array.isArray(ops) && ops.length > 0, 'a patch is a non-empty JSON array');
  const object = (review.request as { object: { status: { allocatable: Record<string, unknown> } } }).object;
  const out = jsonpatch.applyPatch(structuredClone(object), ops, true, false).newDocument as { status: { allocatable: Record<string, unknown> } };
  for (const [resource, ratio, unit] of [['cpu', DEFAULT_POLICY.cpu.maxRatio, 1n], ['memory', DEFAULT_POLICY.memory.maxRatio, 1024n]] as const) {
    const op = ops.find((o) => o.path === `/status/allocatable/${resource}`);
    if (!op) continue;
    const v = (op as { value: unknown }).value;
    assert.equal(typeof v, 'string');
    written[resource].add(v as string);
    const q = parseQuantity(v as string);
    assert.ok(q.nanos > 0n, `non-positive quantity ${v}`);
    assert.equal(formatQuantity(q), v, `${v} is not canonical to the gateway's own formatter`);
    const read = resource === 'cpu' ? milliValue : value;
    const raw = read(parseQuantity(object.status.allocatable[resource] as string));
    const granted = read(q);
    const cap = ((raw * BigInt(ratio * 1e6)) / 1_000_000n / unit) * unit;
    assert.ok(granted >= raw, `${resource} ${v} below raw ${raw}`);
    assert.ok(granted <= (cap > raw ? cap : raw), `${resource} ${v} above the cap ${cap} of raw ${raw}`);
  }
  assert.ok(out.status.allocatable, 'allocatable survives');
}

/**
 * Every quantity written, through Kubernetes' own parser: accepted, kept as
 * written (through JSON too), positive and within int64 in its unit (cpu in
 * millicores, memory in bytes), where Go's MilliValue()/Value() read it exactly.
 */
function checkWrittenWithApimachinery(): number {
  let n = 0;
  for (const resource of ['cpu', 'memory'] as const) {
    for (const a of apimachineryQuantities([...written[resource]])) {
      assert.ok(a.ok, `${resource} ${a.in}: ${a.err}`);
      assert.equal(a.canonical, a.in, `${resource} ${a.in} would be stored as ${a.canonical}`);
      assert.equal(a.roundTripErr, undefined, `${resource} ${a.in} is refused through JSON`);
      assert.equal(a.roundTrip, a.in, `${resource} ${a.in} changes through JSON`);
      const [exact, fits, goValue] = resource === 'cpu' ? [a.milli, a.milliFitsInt64, a.milliValue] : [a.unit, a.unitFitsInt64, a.value];
      assert.ok(fits, `${resource} ${a.in} is beyond int64 (${exact})`);
      assert.ok(BigInt(exact!) > 0n, `${resource} ${a.in} is not positive to the API server (${exact})`);
      assert.equal(goValue, exact, `${resource} ${a.in}: Go reads ${goValue}, not ${exact}`);
      n += 1;
    }
  }
  return n;
}

function deps(): NodeReviewDeps {
  const store = new NodeStore({ retainMs: 60_000, forgetAfterMs: 600_000 });
  store.attach(NODE, 'i', null, 1);
  const now = Date.now();
  for (let s = 1; s <= 30; s++) {
    storeSample(store, NODE, 1, {
      seq: s, timestampMs: now - (30 - s) * 1000, cpuUsageMillicores: 400, memoryWorkingSetBytes: 2 ** 31, rootCgroupMemoryWorkingSetBytes: 0, cpuManager: null,
      capacity: { cpuMillicores: 8000, memoryBytes: 2 ** 35 }, pressure: null,
      requests: { cpuMillicores: 6000, memoryBytes: 2 ** 34, podCount: 10, known: true }, summaries: [], onBeat: false, podNamesAsBefore: false, podsIncluded: false, pods: [],
    }, now);
  }
  const policies = flagsPolicySource(DEFAULT_POLICY);
  return {
    usage: (n) => store.usage(n, now),
    policyFor: (labels) => policies.select(labels),
    proof: new GrantProof(randomBytes(32)),
  };
}

describe(`fuzz: ${CASES} hostile AdmissionReviews`, () => {
  it('the handler answers every one well-formed, never throws anything but BadReviewError, and never writes a bad quantity', () => {
    const d = deps();
    const gc = (globalThis as { gc?: () => void }).gc;
    gc?.();
    const heapBefore = process.memoryUsage().heapUsed;
    let patched = 0;
    let refused = 0;
    fc.assert(
      fc.property(arbReview, (review) => {
        try {
          const result = reviewNode(review, d);
          const res = result.review.response;
          assert.equal(result.review.apiVersion, 'admission.k8s.io/v1');
          assert.equal(res.allowed, true);
          assert.equal(res.uid, (review.request as { uid: string }).uid);
          assert.equal(res.patch === undefined, res.patchType === undefined, 'patch and patchType together');
          if (res.patch) {
            checkPatch(review, res.patch);
            patched += 1;
          }
        } catch (err) {
          if (!(err instanceof BadReviewError)) throw err;
          refused += 1;
        }
      }),
      { numRuns: CASES },
    );
    gc?.();
    const grownMiB = (process.memoryUsage().heapUsed - heapBefore) / 2 ** 20;
    assert.ok(patched > CASES / 100, `only ${patched} cases produced a patch: the generator is not reaching the mutation path`);
    assert.ok(checkWrittenWithApimachinery() > 0, 'some quantity was written and checked');
    assert.ok(refused > 0);
    assert.ok(grownMiB < 64, `heap grew ${grownMiB.toFixed(1)} MiB over ${CASES} cases`);
  });
});

describe(`fuzz over real HTTPS: ${HTTP_CASES} reviews and byte garbage`, () => {
  let gw: TestGateway;
  before(async () => {
    gw = await startTestGateway({ bodyLimitBytes: 4 * 1024 * 1024 });
    gw.store.attach(NODE, 'i', null, 1);
    storeSample(gw.store, NODE, 1, {
      seq: 1, timestampMs: Date.now(), cpuUsageMillicores: 400, memoryWorkingSetBytes: 2 ** 31, rootCgroupMemoryWorkingSetBytes: 0, cpuManager: null,
      capacity: { cpuMillicores: 8000, memoryBytes: 2 ** 35 }, pressure: null,
      requests: { cpuMillicores: 6000, memoryBytes: 2 ** 34, podCount: 10, known: true }, summaries: [], onBeat: false, podNamesAsBefore: false, podsIncluded: false, pods: [],
    }, Date.now());
  });
  after(() => gw.close());

  it('every body gets 200 with an AdmissionReview or a 4xx with a message; the server stays up', async () => {
    const bodies = fc.sample(
      fc.oneof(
        { weight: 6, arbitrary: arbReview.map((r) => JSON.stringify(r)) },
        { weight: 1, arbitrary: fc.nat({ max: fixture.length }).map((n) => fixture.slice(0, n)) },
        { weight: 1, arbitrary: fc.uint8Array({ maxLength: 2000 }).map((b) => Buffer.from(b).toString('latin1')) },
        { weight: 1, arbitrary: fc.constant(fixture.replace('"uid"', '"uid": "dup", "uid"')) },
        { weight: 1, arbitrary: fc.integer({ min: 1000, max: 200_000 }).map((d) => '['.repeat(d) + ']'.repeat(d)) },
      ),
      HTTP_CASES,
    );
    bodies.push(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"big","object":"${'x'.repeat(10 * 1024 * 1024)}"}}`);
    const counts = new Map<number, number>();
    for (const body of bodies) {
      const res = await postHttps(gw, '/mutate/nodes', body);
      counts.set(res.status, (counts.get(res.status) ?? 0) + 1);
      if (res.status === 200) {
        const a = res.json() as { apiVersion: string; response: { allowed: boolean; patch?: string } };
        assert.equal(a.apiVersion, 'admission.k8s.io/v1');
        assert.equal(a.response.allowed, true);
        if (a.response.patch) checkPatch(JSON.parse(body) as Record<string, unknown>, a.response.patch);
      } else {
        assert.ok(res.status >= 400 && res.status < 500, `status ${res.status}: ${res.body.slice(0, 200)}`);
        assert.ok((res.json() as { message: string }).message.length > 0);
      }
    }
    assert.ok((counts.get(413) ?? 0) >= 1, 'the 10 MB body is refused with 413');
    assert.ok((counts.get(200) ?? 0) > 0 && (counts.get(400) ?? 0) > 0, JSON.stringify([...counts]));
    const ok = await postHttps(gw, '/mutate/nodes', fixture);
    assert.equal(ok.status, 200, 'still serving');
    checkWrittenWithApimachinery();
  });
});
