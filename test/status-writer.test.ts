// The leader writes node status only while it can see: ready, and fresh data
// for most governed nodes. A gateway that lost its agents must not lower every
// node at once (issue 19, invariant 7).
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { V1Node } from '@kubernetes/client-node';
import { pino } from 'pino';
import { holdBack, loweringPatch, StatusWriter, type StatusWriterOptions } from '../gateway/act/status-writer.js';
import { NUDGE_EVERY_MS, nudgePatch, shouldNudge } from '../gateway/act/kubelet-nudge.js';
import type { LeaderLease } from '../gateway/act/leader-lease.js';
import { GatewayMetrics } from '../gateway/metrics/metrics.js';
import { flagsPolicySource } from '../gateway/policies/policy-source.js';
import { FakeKubeApi } from './helpers/fake-kube-api.js';
import { eventually } from './helpers/grpc.js';
import { applied, kubeletReview, nodeSample, patchOf, reviewBench, type ReviewBench } from './helpers/node-reviews.js';
import { GrantProof } from '../gateway/decide/grant-proof.js';
import { DEFAULT_POLICY, type Decision, type ResourceDecision } from '../gateway/decide/policy.js';

const nodes = (n: number, labels: Record<string, string> = { pool: 'a' }): V1Node[] =>
  Array.from({ length: n }, (_, i) => ({ metadata: { name: `n${i}`, labels } }));
const governed = (labels: Record<string, string>) => (labels.pool === 'a' ? DEFAULT_POLICY : undefined);
const stale = DEFAULT_POLICY.staleAfterMs + 1;

/** A status writer on the fake API server and the bench's store, leading, at 100 writes a second, at the test's clock. */
function writerOn(api: FakeKubeApi, bench: ReviewBench, now: () => number, options: Partial<StatusWriterOptions> & { leader?: boolean } = {}): StatusWriter {
  const { leader = true, ...rest } = options;
  return new StatusWriter({
    kubeConfig: api.kubeConfig(), nodes: { list: () => [], get: () => undefined }, store: bench.store, policies: flagsPolicySource(DEFAULT_POLICY),
    lease: { isLeader: leader, onChange: () => {} } as unknown as LeaderLease,
    metrics: new GatewayMetrics(bench.store, now), log: pino({ level: 'silent' }), writesPerSecond: 100, proof: bench.proof,
    notReady: () => undefined, identity: 'test', now, ...rest,
  });
}

describe('status writer: hold back while blind', () => {
  it('writes when ready and every governed node is fresh', () => {
    assert.equal(holdBack(undefined, nodes(10), governed, () => 1000, 0.5), undefined);
  });

  it('holds back while the gateway is not ready (ingest thread down, policies not synced)', () => {
    assert.match(holdBack('ingest thread down', nodes(10), governed, () => 1000, 0.5) ?? '', /not ready: ingest thread down/);
  });

  it('holds back when the gateway lost its agents: every node stale or unknown', () => {
    assert.match(holdBack(undefined, nodes(10), governed, () => stale, 0.5) ?? '', /fresh for 0 of 10 governed nodes/);
    assert.match(holdBack(undefined, nodes(10), governed, () => undefined, 0.5) ?? '', /fresh for 0 of 10/);
  });

  it('still writes when only a few nodes are stale (their own agents died): that is the case it exists for', () => {
    const age = (name: string) => (name === 'n3' || name === 'n7' ? stale : 1000);
    assert.equal(holdBack(undefined, nodes(10), governed, age, 0.5), undefined);
  });

  it('the threshold is a share of governed nodes: exactly half fresh is enough, less is not', () => {
    const half = (name: string) => (Number(name.slice(1)) < 5 ? 1000 : stale);
    assert.equal(holdBack(undefined, nodes(10), governed, half, 0.5), undefined);
    const fewer = (name: string) => (Number(name.slice(1)) < 4 ? 1000 : stale);
    assert.match(holdBack(undefined, nodes(10), governed, fewer, 0.5) ?? '', /fresh for 4 of 10/);
  });

  it('nodes no policy governs do not count either way', () => {
    const all = [...nodes(2), ...nodes(50, { pool: 'other' }).map((n) => ({ metadata: { ...n.metadata, name: `o-${n.metadata?.name}` } }))];
    assert.equal(holdBack(undefined, all, governed, (name) => (name.startsWith('o-') ? undefined : 1000), 0.5), undefined);
  });
});

describe('status writer: its patch only lowers', () => {
  const GI = 1024n ** 3n;
  const resource = (raw: bigint, applied: bigint): ResourceDecision => ({ raw, granted: applied, applied, decidedBy: 'headroom', floor: raw, cap: raw * 2n, requestsOverCap: false, usage: undefined, headroom: undefined, loadFactor: undefined, avoided: undefined });
  // The node holds 6 cores / 12 GiB granted over a raw of 4 / 8 GiB.
  const facts = { name: 'n1', incoming: { cpuMillicores: 6000n, memoryBytes: 12n * GI }, capacity: { cpuMillicores: 4000n, memoryBytes: 8n * GI }, annotations: {} };
  const raw = { cpuMillicores: 4000n, memoryBytes: 8n * GI };
  const held = { cpu: '6', memory: '12Gi' };
  const proof = new GrantProof(Buffer.alloc(32, 7));
  const decision = (cpu: bigint, memory: bigint): Decision => ({ cpu: resource(raw.cpuMillicores, cpu), memory: resource(raw.memoryBytes, memory), policy: 'default', dryRun: false, reason: 'test' });
  const valueAt = (ops: ReturnType<typeof loweringPatch>, path: string) => ops.find((o) => o.op !== 'remove' && o.op !== 'test' && o.path === path)?.value;

  it('CPU falls while memory would rise: CPU is lowered, memory keeps what the node holds (the rise waits for the kubelet), and the signed record says so', () => {
    const ops = loweringPatch(facts, held, raw, decision(5000n, 14n * GI), proof);
    assert.deepEqual(ops.slice(0, 2), [{ op: 'test', path: '/status/allocatable/cpu', value: '6' }, { op: 'test', path: '/status/allocatable/memory', value: '12Gi' }]);
    assert.equal(valueAt(ops, '/status/allocatable/cpu'), '5');
    assert.equal(valueAt(ops, '/status/allocatable/memory'), undefined, 'memory is not raised by the gateway');
    assert.equal(valueAt(ops, '/metadata/annotations/oversell.io~1granted-allocatable-memory'), '12Gi', 'the record carries what the node holds, so it still verifies');
    assert.equal(valueAt(ops, '/metadata/annotations/oversell.io~1granted-allocatable-cpu'), '5');
    // The raw record is the lower bound the API server's policy checks: written as it stands, never moved.
    assert.equal(valueAt(ops, '/metadata/annotations/oversell.io~1raw-allocatable-cpu'), '4');
  });

  it('both fall: both lowered, never below raw as decided', () => {
    const ops = loweringPatch(facts, held, raw, decision(4500n, 9n * GI), proof);
    assert.equal(valueAt(ops, '/status/allocatable/cpu'), '4500m');
    assert.equal(valueAt(ops, '/status/allocatable/memory'), '9Gi');
  });
});

describe('status writer: sharded, each replica lowers the nodes it holds', () => {
  const NODES = '/api/v1/nodes';
  let api: FakeKubeApi;
  before(async () => {
    api = await FakeKubeApi.start([NODES]);
  });
  after(() => api.close());

  it('a replica that is not the leader lowers its own nodes, and the leader leaves the others alone', async () => {
    let t = 1.7e12;
    const bench = reviewBench({ now: () => t });
    // Both nodes inflated by the webhook (a signed record on each), then their memory fills past the working-set threshold.
    const inflated = new Map<string, V1Node>();
    for (const name of ['node-a', 'node-b']) {
      for (let i = 0; i < 5; i++) bench.report(name, nodeSample(t - 5000 + i * 1000));
      const review = kubeletReview(name);
      const result = bench.review(review);
      assert.equal(result.outcome, 'patched');
      inflated.set(name, applied(review.request.object, patchOf(result.review as { response: { patch?: string } })) as V1Node);
    }
    t += 1000;
    for (const name of inflated.keys()) bench.report(name, nodeSample(t, { memoryWorkingSetBytes: 30 * 1024 ** 3 }));
    const nodes = { list: () => [...inflated.values()], get: (n: string) => inflated.get(n) };
    const writer = (leader: boolean, lowers?: (node: string) => boolean) =>
      writerOn(api, bench, () => t, { nodes, leader, ...(lowers && { lowers }) });
    const patched = () => api.requests.filter((u) => u.endsWith('/status')).map((u) => u.split('/')[4]).sort();

    const settled = () => new Promise((r) => setTimeout(r, 200));
    writer(false).sweep();
    await settled();
    assert.deepEqual(patched(), [], 'unsharded, a replica that is not the leader writes nothing');
    writer(true, (n) => n === 'node-a').sweep();
    await eventually(() => (patched().length >= 1 ? true : undefined), 5000, 'the leader\'s write');
    await settled();
    assert.deepEqual(patched(), ['node-a'], 'the leader lowers the node it holds, and leaves the other alone');
    writer(false, (n) => n === 'node-b').sweep();
    await eventually(() => (patched().length >= 2 ? true : undefined), 5000, 'the other replica\'s write');
    await settled();
    assert.deepEqual(patched(), ['node-a', 'node-b'], 'a replica that is not the leader lowers the node it holds');
  });

  it('on each sample, a replica weighs pressure only for the nodes it lowers: the others\' samples cost it no policy lookup', () => {
    const t = 1.7e12;
    const bench = reviewBench({ now: () => t });
    const source = flagsPolicySource(DEFAULT_POLICY);
    let lookups = 0;
    const policies = {
      ...source,
      select: (labels: Record<string, string>) => {
        lookups++;
        return source.select(labels);
      },
    };
    const started = (leader: boolean, lowers?: (node: string) => boolean) => {
      const w = writerOn(api, bench, () => t, { policies, leader, ...(lowers && { lowers }) });
      w.start();
      return w;
    };
    const sharded = started(false, (n) => n === 'node-a');
    try {
      bench.report('node-b', nodeSample(t));
      assert.equal(lookups, 0, 'a sample of a node another replica lowers');
      bench.report('node-a', nodeSample(t));
      assert.ok(lookups > 0, 'a sample of a node this replica lowers is weighed');
    } finally {
      sharded.stop();
    }
    lookups = 0;
    const follower = started(false);
    try {
      bench.report('node-a', nodeSample(t + 1000));
      assert.equal(lookups, 0, 'unsharded, a replica that is not the leader lowers nothing and weighs nothing');
    } finally {
      follower.stop();
    }
  });
});

describe('status writer: the nudge, when the node carries no record of ours (a kubelet write passed the webhook unpatched)', () => {
  const NODES = '/api/v1/nodes';
  let api: FakeKubeApi;
  before(async () => {
    api = await FakeKubeApi.start([NODES]);
  });
  after(() => api.close());

  it('nudgePatch: memory exactly one byte down, pinned to what the node held', () => {
    assert.deepEqual(nudgePatch('31369912Ki'), [
      { op: 'test', path: '/status/allocatable/memory', value: '31369912Ki' },
      { op: 'replace', path: '/status/allocatable/memory', value: String(31369912n * 1024n - 1n) },
    ]);
  });

  it('shouldNudge: only without a valid record, only with a decision to make, at most once per interval', () => {
    const due = { unverified: 'no-proof' as const, decidable: true, lastNudgeAt: undefined, now: 1e6 };
    assert.equal(shouldNudge(due), true);
    assert.equal(shouldNudge({ ...due, unverified: 'above-capacity' }), false, 'an object that is not raw: the kubelet rewrites it every 10 s anyway');
    assert.equal(shouldNudge({ ...due, decidable: false }), false, 'stale data or no policy: the webhook would not decide either');
    assert.equal(shouldNudge({ ...due, lastNudgeAt: 1e6 - NUDGE_EVERY_MS + 1 }), false);
    assert.equal(shouldNudge({ ...due, lastNudgeAt: 1e6 - NUDGE_EVERY_MS }), true);
  });

  it('nudges a raw node with fresh data once per interval, never a node carrying our record, a stale node, or while held back', async () => {
    let t = 1.7e12;
    const bench = reviewBench({ now: () => t });
    const raw = (name: string) => kubeletReview(name).request.object as V1Node;
    // node-signed went through the webhook; node-raw and node-stale are as their kubelet wrote them.
    bench.report('node-stale', nodeSample(t));
    t += DEFAULT_POLICY.staleAfterMs + 6000;
    for (let i = 0; i < 5; i++) for (const name of ['node-signed', 'node-raw']) bench.report(name, nodeSample(t - 5000 + i * 1000));
    const review = kubeletReview('node-signed');
    const result = bench.review(review);
    assert.equal(result.outcome, 'patched');
    const objects = new Map<string, V1Node>([
      ['node-signed', applied(review.request.object, patchOf(result.review as { response: { patch?: string } })) as V1Node],
      ['node-raw', raw('node-raw')],
      ['node-stale', raw('node-stale')],
    ]);
    let notReady: string | undefined;
    const writer = writerOn(api, bench, () => t, {
      nodes: { list: () => [...objects.values()], get: (n: string) => objects.get(n) }, notReady: () => notReady, minFreshShare: 0,
    });
    const nudged = () => api.requests.filter((u) => u.endsWith('/status')).map((u) => u.split('/')[4]);
    const settled = () => new Promise((r) => setTimeout(r, 200));

    writer.sweep();
    await eventually(() => (nudged().length >= 1 ? true : undefined), 5000, 'the nudge');
    await settled();
    assert.deepEqual(nudged(), ['node-raw'], 'only the raw node with fresh data');
    t += NUDGE_EVERY_MS - 1000;
    for (const name of ['node-signed', 'node-raw']) bench.report(name, nodeSample(t));
    writer.sweep();
    await settled();
    assert.deepEqual(nudged(), ['node-raw'], 'not again before the interval');
    t += 1000;
    notReady = 'policies not synced';
    writer.sweep();
    await settled();
    assert.deepEqual(nudged(), ['node-raw'], 'not while held back');
    notReady = undefined;
    writer.sweep();
    await eventually(() => (nudged().length >= 2 ? true : undefined), 5000, 'the second nudge');
    assert.deepEqual(nudged(), ['node-raw', 'node-raw']);
  });
});
