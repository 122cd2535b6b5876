// Issue 19's invariants 1, 2, 4 and 5 over real HTTPS: a grant comes only from
// what cannot be forged. Each case is one a user reproduced against the old
// gateway (anyone with `nodes` patch or an agent lifting a node to thousands
// of cores); each must now pass untouched or stay within raw..cap x raw.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { after, before, describe, it } from 'node:test';
import jsonpatch from 'fast-json-patch';
import type { Sample__Output } from '../proto/gen/oversell/v1/Sample.js';
import { ANNOTATION } from '../gateway/admit/node-review.js';
import { milliValue, parseQuantity, value } from '../lib/quantity.js';
import { getHttp, postHttps, startTestGateway, type TestGateway } from './helpers/gateway.js';

interface NodeObject {
  metadata: { name: string; annotations?: Record<string, string>; labels?: Record<string, string> };
  status: { allocatable: Record<string, string>; capacity: Record<string, string> };
}
interface Review {
  request: { uid: string; name: string; userInfo: { username: string }; dryRun?: boolean; object: NodeObject; oldObject?: unknown };
}

const fixture = readFileSync(new URL('./fixtures/admission/node-status-update.json', import.meta.url), 'utf8');
const key = randomBytes(32);
let clock = 5_000_000;

/** A kubelet write for `name` with the given allocatable and capacity. */
function kubeletReview(name: string, allocatable: { cpu: string; memory: string }, capacity = allocatable): Review {
  const r = JSON.parse(fixture) as Review;
  r.request.name = name;
  r.request.userInfo = { username: `system:node:${name}` };
  delete r.request.oldObject;
  const o = r.request.object;
  o.metadata.name = name;
  o.metadata.annotations = {};
  Object.assign(o.status.allocatable, allocatable);
  Object.assign(o.status.capacity, capacity);
  return r;
}

function sample(over: Partial<Sample__Output> = {}): Sample__Output {
  return {
    seq: clock,
    timestampMs: clock,
    cpuUsageMillicores: 200,
    memoryWorkingSetBytes: 1024 ** 3,
    capacity: { cpuMillicores: 4000, memoryBytes: 8 * 1024 ** 3 },
    pressure: null,
    requests: { cpuMillicores: 3000, memoryBytes: 6 * 1024 ** 3, podCount: 10, known: true },
    podsIncluded: false,
    pods: [],
    ...over,
  };
}

function report(gw: TestGateway, node: string, over: Partial<Sample__Output> = {}): void {
  const streamId = Math.floor(Math.random() * 1e9);
  gw.store.attach(node, 'i', null, streamId);
  gw.store.ingest(node, streamId, sample(over), clock);
}

async function send(gw: TestGateway, r: Review): Promise<jsonpatch.Operation[]> {
  const res = await postHttps(gw, '/mutate/nodes', JSON.stringify(r));
  assert.equal(res.status, 200, res.body);
  const answer = res.json() as { response: { allowed: boolean; patch?: string } };
  assert.equal(answer.response.allowed, true);
  return answer.response.patch ? (JSON.parse(Buffer.from(answer.response.patch, 'base64').toString()) as jsonpatch.Operation[]) : [];
}

const apply = (o: NodeObject, patch: jsonpatch.Operation[]): NodeObject => jsonpatch.applyPatch(structuredClone(o), patch, true, false).newDocument;
const cpuOf = (o: NodeObject) => milliValue(parseQuantity(o.status.allocatable.cpu ?? ''));
const memOf = (o: NodeObject) => value(parseQuantity(o.status.allocatable.memory ?? ''));

describe('trust: a grant only from what cannot be forged', () => {
  let gw: TestGateway;
  before(async () => {
    gw = await startTestGateway({ now: () => clock, proofKey: key });
  });
  after(() => gw.close());

  it('annotations claiming a raw of 1000 cores (or 1e60) decide nothing: raw is the kubelet\'s 4, the grant at most 2x', async () => {
    for (const claimed of ['1000', '1e60']) {
      clock += 1000;
      const name = `forged-raw-${claimed}`;
      report(gw, name);
      const r = kubeletReview(name, { cpu: '4', memory: '8Gi' });
      r.request.object.metadata.annotations = { [ANNOTATION.grantedCpu]: '4', [ANNOTATION.rawCpu]: claimed, [ANNOTATION.grantedMemory]: '8Gi', [ANNOTATION.rawMemory]: '8Gi' };
      const out = apply(r.request.object, await send(gw, r));
      assert.ok(cpuOf(out) >= 4000n && cpuOf(out) <= 8000n, `cpu ${out.status.allocatable.cpu} outside 4..8`);
      assert.equal(out.metadata.annotations?.[ANNOTATION.rawCpu], '4');
      assert.equal(gw.store.get(name)?.raw?.cpuMillicores, 4000n);
    }
  });

  it('a record forged, edited or copied from another node is not ours: raw comes from the kubelet\'s write', async () => {
    clock += 1000;
    report(gw, 'record-source');
    const source = kubeletReview('record-source', { cpu: '4', memory: '8Gi' });
    const inflated = apply(source.request.object, await send(gw, source));
    const good = inflated.metadata.annotations ?? {};
    assert.match(good[ANNOTATION.proof] ?? '', /^v1\.[0-9a-f]{8}\.[A-Za-z0-9_-]+$/);
    assert.equal(cpuOf(inflated), 8000n);

    // Node B is a 2-core node carrying a copy of A's (valid for A) record, allocatable equal to A's grant.
    report(gw, 'record-copy', { capacity: { cpuMillicores: 8000, memoryBytes: 8 * 1024 ** 3 } });
    const copy = kubeletReview('record-copy', { cpu: '8', memory: '8Gi' }, { cpu: '8', memory: '8Gi' });
    copy.request.object.metadata.annotations = { ...good };
    const copied = apply(copy.request.object, await send(gw, copy));
    assert.equal(copied.metadata.annotations?.[ANNOTATION.rawCpu], '8', 'raw is the kubelet\'s 8, not A\'s signed 4');

    // A's own record with its raw edited down: the MAC no longer verifies, so the incoming 8 cores
    // is the kubelet's number, and 8 is above A's capacity of 4: untouched.
    const edited = structuredClone(inflated);
    edited.metadata.annotations = { ...good, [ANNOTATION.rawCpu]: '2' };
    const again = kubeletReview('record-source', { cpu: '4', memory: '8Gi' });
    again.request.object = edited;
    assert.deepEqual(await send(gw, again), []);
  });

  it('a second pass over our own output gives the same grant (the record verifies), and never compounds once the record is gone', async () => {
    clock += 1000;
    report(gw, 'compound');
    const r = kubeletReview('compound', { cpu: '4', memory: '8Gi' });
    const first = apply(r.request.object, await send(gw, r));
    const again = kubeletReview('compound', { cpu: '4', memory: '8Gi' });
    again.request.object = first;
    assert.deepEqual(await send(gw, again), [], 'reinvocation over our signed output changes nothing');
    // Someone with nodes patch deletes the proof: the inflated 8 cores is above capacity 4, so it is not taken as raw.
    const stripped = structuredClone(first);
    delete stripped.metadata.annotations?.[ANNOTATION.proof];
    again.request.object = stripped;
    assert.deepEqual(await send(gw, again), []);
    const metrics = (await getHttp(gw.ports.metrics, '/metrics')).body;
    assert.match(metrics, /oversell_webhook_untouched_total\{reason="above-capacity"\} [1-9]/);
  });

  it('replicas sharing the key trust each other\'s records; a replica with another key does not', async () => {
    const twin = await startTestGateway({ now: () => clock, proofKey: key });
    const stranger = await startTestGateway({ now: () => clock, proofKey: randomBytes(32) });
    try {
      clock += 1000;
      for (const g of [gw, twin, stranger]) report(g, 'shared');
      const r = kubeletReview('shared', { cpu: '4', memory: '8Gi' });
      const inflated = apply(r.request.object, await send(gw, r));
      const next = kubeletReview('shared', { cpu: '4', memory: '8Gi' });
      next.request.object = inflated;
      assert.deepEqual(await send(twin, next), [], 'the twin reads raw 4 from the record and decides the same');
      assert.equal(twin.store.get('shared')?.raw?.cpuMillicores, 4000n);
      assert.deepEqual(await send(stranger, next), [], 'the stranger cannot verify the record and 8 > capacity 4: untouched');
      assert.equal(stranger.store.get('shared')?.raw, undefined);
    } finally {
      await Promise.all([twin.close(), stranger.close()]);
    }
  });

  it('an agent reporting 9e18 millicores bound, under 99% CPU pressure, cannot lift the grant past 2x raw', async () => {
    clock += 1000;
    report(gw, 'wild-agent', {
      requests: { cpuMillicores: 9e18, memoryBytes: 9e18, podCount: 1, known: true },
      pressure: {
        available: true, cpuSome: { avg10: 99, avg60: 99 }, cpuFull: { avg10: 0, avg60: 0 },
        memorySome: { avg10: 0, avg60: 0 }, memoryFull: { avg10: 0, avg60: 0 },
      },
    });
    const r = kubeletReview('wild-agent', { cpu: '4', memory: '8Gi' });
    const out = apply(r.request.object, await send(gw, r));
    assert.ok(cpuOf(out) <= 8000n, `cpu ${out.status.allocatable.cpu}`);
    assert.ok(memOf(out) <= (8n * 1024n ** 3n * 125n) / 100n, `memory ${out.status.allocatable.memory}`);
    const metrics = (await getHttp(gw.ports.metrics, '/metrics')).body;
    assert.match(metrics, /oversell_node_requests_over_cap\{node="wild-agent",resource="cpu"\} 1/);
  });

  it('an allocatable beyond int64 (99999999999999999999E; binary ones the API server caps at int64) passes untouched', async () => {
    clock += 1000;
    report(gw, 'huge');
    const r = kubeletReview('huge', { cpu: '4', memory: '99999999999999999999E' }, { cpu: '4', memory: '99999999999999999999E' });
    assert.deepEqual(await send(gw, r), []);
  });

  for (const [who, username] of [
    ['a ServiceAccount', 'system:serviceaccount:kube-system:x'],
    ['another node\'s kubelet', 'system:node:some-other-node'],
    ['nobody (no userInfo)', ''],
  ] as const) {
    it(`a status write by ${who} passes untouched, counted`, async () => {
      clock += 1000;
      report(gw, 'identity');
      const r = kubeletReview('identity', { cpu: '4', memory: '8Gi' });
      r.request.userInfo = { username };
      assert.deepEqual(await send(gw, r), []);
      assert.equal(gw.store.get('identity')?.raw, undefined, 'nothing it says is recorded');
      const metrics = (await getHttp(gw.ports.metrics, '/metrics')).body;
      assert.match(metrics, /oversell_webhook_untouched_total\{reason="not-kubelet"\} [1-9]/);
      assert.match(metrics, /oversell_webhook_request_duration_seconds_count\{outcome="not-kubelet"\} [1-9]/);
    });
  }

  it('a dryRun review changes nothing the gateway keeps: raw, gauges and the query view stay as the last real write left them', async () => {
    clock += 1000;
    report(gw, 'dry');
    await send(gw, kubeletReview('dry', { cpu: '4', memory: '8Gi' }));
    const before = (await getHttp(gw.ports.metrics, '/metrics')).body.match(/oversell_node_raw_allocatable\{node="dry",resource="cpu"\} \S+/)?.[0];
    assert.ok(before, 'the real write set the gauge');
    const dry = kubeletReview('dry', { cpu: '64', memory: '8Gi' }, { cpu: '64', memory: '8Gi' });
    dry.request.dryRun = true;
    const patch = await send(gw, dry);
    assert.ok(patch.length > 0, 'the dry run still gets the answer a real write would');
    assert.equal(gw.store.get('dry')?.raw?.cpuMillicores, 4000n, 'the stored raw is still 4 CPUs');
    const after = (await getHttp(gw.ports.metrics, '/metrics')).body.match(/oversell_node_raw_allocatable\{node="dry",resource="cpu"\} \S+/)?.[0];
    assert.equal(after, before);
  });
});
