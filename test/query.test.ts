// The query API over real gRPC: every call, every error code, the watch's
// snapshot-then-changes order, health checking and server reflection.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import type { Sample__Output } from '../proto/gen/oversell/v1/Sample.js';
import type { NodeEvent__Output } from '../proto/gen/oversell/v1/NodeEvent.js';
import type { NodeStatus__Output } from '../proto/gen/oversell/v1/NodeStatus.js';
import type { NodeSummaries__Output } from '../proto/gen/oversell/v1/NodeSummaries.js';
import type { NodeUsageClient } from '../proto/gen/oversell/v1/NodeUsage.js';
import { nodeUsageClient } from '../wire/node-summaries-codec.js';
import { rowOfStatus, rowsOfSummaries } from '../cli/render.js';
import { parseLabelSelector, SelectorError } from '../lib/label-selector.js';
import { matches } from '../gateway/decide/select-policy.js';
import { toPolicyEntry } from '../gateway/policies/policy-spec.js';
import { eventually, getNode, listNodes, queryClient } from './helpers/grpc.js';
import { listPolicySource, startTestGateway, type TestGateway } from './helpers/gateway.js';
import { GATEWAY_DEFAULTS } from '../gateway/config/defaults.js';
import { storeSample } from './helpers/store-sample.js';

const sample = (seq: number): Sample__Output => ({
  seq, timestampMs: Date.now(), cpuUsageMillicores: 500, memoryWorkingSetBytes: 2 ** 30, rootCgroupMemoryWorkingSetBytes: 0, cpuManager: null,
  capacity: { cpuMillicores: 8000, memoryBytes: 2 ** 34 }, pressure: null,
  requests: { cpuMillicores: 4000, memoryBytes: 2 ** 33, podCount: 4, known: true }, summaries: [], onBeat: false, podNamesAsBefore: false, podsIncluded: false, pods: [],
});

const policies = listPolicySource([
  toPolicyEntry({ metadata: { name: 'batch' }, spec: { nodeSelector: { matchLabels: { pool: 'batch' } }, priority: 5 } }),
  toPolicyEntry({ metadata: { name: 'web' }, spec: { nodeSelector: { matchLabels: { pool: 'web' } }, mode: 'DryRun' } }),
]);
let gw: TestGateway;
let stream = 100;

function report(name: string, labels: Record<string, string>) {
  stream += 1;
  gw.store.attach(name, 'i', null, stream);
  storeSample(gw.store, name, stream, sample(1), Date.now());
  gw.store.observe(name, { raw: { cpuMillicores: 7910n, memoryBytes: 2n ** 34n }, labels, nodeMaxRatio: {}, lastGrant: undefined }, Date.now());
}

function list(req: { labelSelector?: string; policy?: string }) {
  const c = queryClient(gw.ports.grpc);
  return new Promise<string[]>((resolve, reject) =>
    c.ListNodes({ labelSelector: req.labelSelector ?? '', policy: req.policy ?? '' }, (err, res) => (err ? reject(err) : resolve((res?.nodes ?? []).map((n) => n.name)))),
  );
}

describe('NodeUsage over real gRPC', () => {
  before(async () => {
    gw = await startTestGateway({ policies });
    report('b-1', { pool: 'batch', zone: 'a' });
    report('b-2', { pool: 'batch', zone: 'b' });
    report('w-1', { pool: 'web', zone: 'a' });
  });
  after(() => gw.close());

  it('GetNode carries usage, window, raw and granted allocatable, policy and reason', async () => {
    const n = await getNode(queryClient(gw.ports.grpc), 'b-1');
    assert.equal(n.policy, 'batch');
    assert.deepEqual(n.labels, { pool: 'batch', zone: 'a' });
    assert.equal(n.latest?.cpuUsageMillicores, 500);
    assert.equal(n.window?.samples, 1);
    assert.equal(n.rawAllocatable?.cpuMillicores, 7910);
    assert.equal(n.decision?.allocatable?.cpuMillicores, 15820);
    assert.equal(n.decision?.granted?.cpuMillicores, 15820);
    assert.equal(n.decision?.floor?.cpuMillicores, 7910);
    assert.equal(n.decision?.usage?.cpuMillicores, 500);
    assert.equal(n.decision?.cpuBound, 'cap');
    assert.match(n.decision?.reason ?? '', /^policy batch; cpu 7910m->15820m/);
    const dry = await getNode(queryClient(gw.ports.grpc), 'w-1');
    assert.equal(dry.decision?.dryRun, true);
    assert.equal(dry.decision?.allocatable?.cpuMillicores, 7910);
    assert.equal(dry.decision?.granted?.cpuMillicores, 15820);
  });

  it('ListNodes filters by label selector and by policy', async () => {
    assert.deepEqual(await list({}), ['b-1', 'b-2', 'w-1']);
    assert.deepEqual(await list({ labelSelector: 'pool=batch' }), ['b-1', 'b-2']);
    assert.deepEqual(await list({ labelSelector: 'zone in (a),pool!=web' }), ['b-1']);
    assert.deepEqual(await list({ labelSelector: '!zone' }), []);
    assert.deepEqual(await list({ policy: 'web' }), ['w-1']);
    assert.deepEqual(await list({ policy: 'batch', labelSelector: 'zone=b' }), ['b-2']);
  });

  it('a bad selector is INVALID_ARGUMENT with the reason', async () => {
    await assert.rejects(list({ labelSelector: 'pool in (batch' }), (e: grpc.ServiceError) => e.code === grpc.status.INVALID_ARGUMENT && /unbalanced/.test(e.details));
    await assert.rejects(list({ labelSelector: 'a=b,,c' }), (e: grpc.ServiceError) => e.code === grpc.status.INVALID_ARGUMENT);
  });

  it('WatchNodes: the snapshot, SYNCED, then changes; filtered; REMOVED when a node leaves the filter', async () => {
    const events: NodeEvent__Output[] = [];
    const call = queryClient(gw.ports.grpc).WatchNodes({ labelSelector: 'pool=batch', policy: '' });
    call.on('data', (e: NodeEvent__Output) => events.push(e));
    call.on('error', () => {});
    try {
      await eventually(() => (events.some((e) => e.type === 'SYNCED') ? true : undefined), 3000, 'SYNCED');
      assert.deepEqual(events.map((e) => `${e.type}:${e.node?.name ?? ''}`), ['SNAPSHOT:b-1', 'SNAPSHOT:b-2', 'SYNCED:']);
      report('b-3', { pool: 'batch' });
      report('w-2', { pool: 'web' }); // filtered out
      await eventually(() => (events.some((e) => e.node?.name === 'b-3') ? true : undefined), 3000, 'b-3');
      // b-1 moves to the web pool: it leaves this watch.
      gw.store.observe('b-1', { raw: { cpuMillicores: 7910n, memoryBytes: 2n ** 34n }, labels: { pool: 'web' }, nodeMaxRatio: {}, lastGrant: undefined }, Date.now());
      storeSample(gw.store, 'b-1', gw.store.get('b-1')?.streamId ?? 0, sample(2), Date.now());
      await eventually(() => (events.some((e) => e.type === 'REMOVED' && e.node?.name === 'b-1') ? true : undefined), 3000, 'REMOVED b-1');
      assert.ok(!events.some((e) => e.node?.name === 'w-2'), 'a node outside the selector was sent');
      const afterSync = events.slice(3);
      assert.ok(afterSync.every((e) => e.type === 'UPDATED' || e.type === 'REMOVED'));
    } finally {
      call.cancel();
    }
  });

  it('ListPolicies: each policy with the nodes it governs', async () => {
    const c = queryClient(gw.ports.grpc);
    const res = await new Promise<{ policies: Array<{ name: string; matchedNodes: number; mode: string; nodeSelector: string; valid: boolean }> }>((resolve, reject) =>
      c.ListPolicies({}, (err, r) => (err ? reject(err) : resolve(r as never))),
    );
    const byName = Object.fromEntries(res.policies.map((p) => [p.name, p]));
    assert.equal(byName.batch?.mode, 'Enforce');
    assert.equal(byName.web?.mode, 'DryRun');
    assert.equal(byName.batch?.nodeSelector, 'pool=batch');
    assert.equal(byName.web?.valid, true);
    const counted = (await listNodes(c)).reduce((m, n) => m.set(n.policy, (m.get(n.policy) ?? 0) + 1), new Map<string, number>());
    assert.equal(byName.batch?.matchedNodes, counted.get('batch'));
    assert.equal(byName.web?.matchedNodes, counted.get('web'));
  });

  it('standard health checking says SERVING', async () => {
    const def = protoLoader.loadSync(fileURLToPath(new URL('../node_modules/grpc-health-check/proto/health/v1/health.proto', import.meta.url)), { enums: String });
    const Health = (grpc.loadPackageDefinition(def) as unknown as { grpc: { health: { v1: { Health: grpc.ServiceClientConstructor } } } }).grpc.health.v1.Health;
    const h = new Health(`127.0.0.1:${gw.ports.grpc}`, grpc.credentials.createInsecure()) as unknown as {
      Check(req: { service: string }, cb: (err: grpc.ServiceError | null, res?: { status: string }) => void): void;
    };
    for (const service of ['', 'oversell.v1.NodeUsage']) {
      const res = await new Promise<{ status: string }>((resolve, reject) => h.Check({ service }, (err, r) => (err ? reject(err) : resolve(r!))));
      assert.equal(res.status, 'SERVING');
    }
  });

  it('server reflection lists our services (what grpcurl uses)', async () => {
    const def = protoLoader.loadSync(fileURLToPath(new URL('../node_modules/@grpc/reflection/build/proto/grpc/reflection/v1/reflection.proto', import.meta.url)));
    const R = (grpc.loadPackageDefinition(def) as unknown as { grpc: { reflection: { v1: { ServerReflection: grpc.ServiceClientConstructor } } } }).grpc.reflection.v1.ServerReflection;
    const r = new R(`127.0.0.1:${gw.ports.grpc}`, grpc.credentials.createInsecure()) as unknown as { ServerReflectionInfo(): grpc.ClientDuplexStream<object, { listServicesResponse?: { service: Array<{ name: string }> } }> };
    const call = r.ServerReflectionInfo();
    const answer = await new Promise<string[]>((resolve, reject) => {
      call.on('data', (m) => resolve((m.listServicesResponse?.service ?? []).map((svc: { name: string }) => svc.name)));
      call.on('error', reject);
      call.write({ listServices: '' });
    });
    call.end();
    assert.ok(answer.includes('oversell.v1.NodeUsage'), answer.join(','));
    assert.ok(answer.includes('oversell.v1.AgentStream'));
  });
});

describe('ListNodeSummaries: the columns of oversell top', () => {
  const NOW = Date.now();
  let g: TestGateway;
  const ingest = (name: string, streamId: number, s: Sample__Output) => storeSample(g.store, name, streamId, s, NOW - 700);
  before(async () => {
    g = await startTestGateway({ policies, now: () => NOW });
    const nodes: Array<[string, Record<string, string>, Partial<Sample__Output>, boolean]> = [
      ['b-1', { pool: 'batch', zone: 'a' }, {}, true],
      ['b-2', { pool: 'batch', zone: 'b' }, { cpuUsageMillicores: 7000, pressure: { available: true, cpuSome: { avg10: 80, avg60: 50 }, cpuFull: null, memorySome: { avg10: 3.5, avg60: 1 }, memoryFull: null, cpuContention: null } }, true],
      ['w-1', { pool: 'web' }, { requests: { cpuMillicores: 0, memoryBytes: 0, podCount: 0, known: false } }, true],
      ['x-1', { pool: 'other' }, {}, true], // no policy selects it
      ['n-1', { pool: 'batch' }, {}, false], // raw allocatable not seen yet: no decision
    ];
    let id = 500;
    for (const [name, labels, over, observed] of nodes) {
      id += 1;
      g.store.attach(name, 'i', null, id);
      for (let seq = 1; seq <= 3; seq++) ingest(name, id, { ...sample(seq), timestampMs: NOW - (4 - seq) * 1000, ...over });
      if (observed) g.store.observe(name, { raw: { cpuMillicores: 7910n, memoryBytes: 2n ** 34n }, labels, nodeMaxRatio: {}, lastGrant: undefined }, NOW);
    }
    g.store.attach('empty', 'i', null, 900); // attached, never sampled
    g.store.detach('b-1', 501);
  });
  after(() => g.close());

  const summaries = (client: NodeUsageClient, req: { labelSelector?: string; policy?: string } = {}) =>
    new Promise<NodeSummaries__Output>((resolve, reject) =>
      client.ListNodeSummaries({ labelSelector: req.labelSelector ?? '', policy: req.policy ?? '' }, (err, res) => (err || !res ? reject(err) : resolve(res))),
    );
  const statuses = (req: { labelSelector?: string; policy?: string } = {}) =>
    new Promise<NodeStatus__Output[]>((resolve, reject) =>
      queryClient(g.ports.grpc).ListNodes({ labelSelector: req.labelSelector ?? '', policy: req.policy ?? '' }, (err, res) => (err ? reject(err) : resolve(res?.nodes ?? []))),
    );

  it('shows the same numbers as the full view for the same nodes', async () => {
    const full = (await statuses()).map(rowOfStatus);
    const rows = rowsOfSummaries(await summaries(queryClient(g.ports.grpc)));
    assert.deepEqual(rows, full);
    assert.deepEqual(rows.map((r) => r.name), ['b-1', 'b-2', 'empty', 'n-1', 'w-1', 'x-1']);
    // Every kind of row is there: gone agent, pressure, unknown requests, no policy, no decision, no sample.
    const by = Object.fromEntries(rows.map((r) => [r.name, r]));
    assert.equal(by['b-1']?.connected, false);
    assert.equal(by['b-1']?.ageMs, 700);
    assert.equal(by['b-2']?.decision?.cpuBound, 'pressure');
    assert.deepEqual(by['b-2']?.pressure, { cpu: 80, memory: 3.5 });
    assert.equal(by['w-1']?.requests, undefined);
    assert.equal(by['x-1']?.policy, '');
    assert.equal(by['n-1']?.decision, undefined);
    assert.equal(by['empty']?.usage, undefined);
    assert.equal(by['b-1']?.samples, 3);
  });

  it('decodes the same with protobufjs and with the column decoder of the CLI', async () => {
    const c = new (nodeUsageClient())(`127.0.0.1:${g.ports.grpc}`, grpc.credentials.createInsecure());
    try {
      assert.deepEqual(await summaries(c), await summaries(queryClient(g.ports.grpc)));
    } finally {
      c.close();
    }
  });

  it('honours the label selector and the policy filter like ListNodes, and refuses a bad selector', async () => {
    const c = queryClient(g.ports.grpc);
    for (const req of [{ labelSelector: 'pool=batch' }, { labelSelector: 'zone in (a),pool!=web' }, { policy: 'web' }, { policy: 'batch', labelSelector: 'zone=b' }, { labelSelector: '!zone' }]) {
      assert.deepEqual(rowsOfSummaries(await summaries(c, req)), (await statuses(req)).map(rowOfStatus), JSON.stringify(req));
    }
    assert.deepEqual((await summaries(c, { policy: 'nope' })).name, []);
    await assert.rejects(summaries(c, { labelSelector: 'pool in (batch' }), (e: grpc.ServiceError) => e.code === grpc.status.INVALID_ARGUMENT && /unbalanced/.test(e.details));
  });
});

describe('ListNodeSummaries keeps up with the store between calls', () => {
  // The rows are kept as the store changes (summary-table.ts), not computed per
  // call: every change that moves a number must reach them.
  let clock = Date.now();
  const source = listPolicySource([
    toPolicyEntry({ metadata: { name: 'batch' }, spec: { nodeSelector: { matchLabels: { pool: 'batch' } }, staleAfter: '30s' } }),
  ]);
  let g: TestGateway;
  let id = 1000;
  const raw = { cpuMillicores: 7910n, memoryBytes: 2n ** 34n };
  const join = (name: string, labels: Record<string, string>) => {
    id += 1;
    g.store.attach(name, 'i', null, id);
    for (let seq = 1; seq <= 3; seq++) storeSample(g.store, name, id, { ...sample(seq), timestampMs: clock - (4 - seq) * 1000 }, clock);
    g.store.observe(name, { raw: raw, labels, nodeMaxRatio: {}, lastGrant: undefined }, clock);
  };
  const both = async (req: { labelSelector?: string; policy?: string } = {}) => {
    const c = queryClient(g.ports.grpc);
    const rows = rowsOfSummaries(await new Promise<NodeSummaries__Output>((resolve, reject) =>
      c.ListNodeSummaries({ labelSelector: req.labelSelector ?? '', policy: req.policy ?? '' }, (err, res) => (err || !res ? reject(err) : resolve(res)))));
    const full = await new Promise<NodeStatus__Output[]>((resolve, reject) =>
      c.ListNodes({ labelSelector: req.labelSelector ?? '', policy: req.policy ?? '' }, (err, res) => (err ? reject(err) : resolve(res?.nodes ?? []))));
    assert.deepEqual(rows, full.map(rowOfStatus));
    return Object.fromEntries(rows.map((r) => [r.name, r]));
  };
  before(async () => {
    g = await startTestGateway({ policies: source, now: () => clock });
    // Past the table's first 1024 rows, so it grows while keeping every row.
    for (let i = 0; i < 1100; i++) join(`n-${String(i).padStart(4, '0')}`, { pool: i % 2 ? 'batch' : 'web' });
  });
  after(() => g.close());

  it('lists every row in name order after the table grew', async () => {
    const rows = Object.keys(await both());
    assert.equal(rows.length, 1100);
    assert.deepEqual(rows, [...rows].sort());
  });

  it('shows data that went stale with no new sample, and fresh data again after one', async () => {
    assert.notEqual((await both())['n-0001']?.decision?.cpuBound, 'stale');
    clock += 31_000; // past the policy's staleAfter: no event marks it
    assert.equal((await both())['n-0001']?.decision?.cpuBound, 'stale');
    storeSample(g.store, 'n-0001', 1002, { ...sample(4), timestampMs: clock }, clock);
    const rows = await both();
    assert.notEqual(rows['n-0001']?.decision?.cpuBound, 'stale');
    assert.equal(rows['n-0003']?.decision?.cpuBound, 'stale');
  });

  it('follows a policy change and a node whose labels moved it to another policy', async () => {
    source.set([
      toPolicyEntry({ metadata: { name: 'batch' }, spec: { nodeSelector: { matchLabels: { pool: 'batch' } }, cpu: { maxRatio: 1.2 } } }),
      toPolicyEntry({ metadata: { name: 'web' }, spec: { nodeSelector: { matchLabels: { pool: 'web' } }, mode: 'DryRun' } }),
    ]);
    g.store.observe('n-0000', { raw: raw, labels: { pool: 'batch' }, nodeMaxRatio: {}, lastGrant: undefined }, clock);
    const rows = await both();
    assert.equal(rows['n-0000']?.policy, 'batch');
    assert.equal(rows['n-0002']?.policy, 'web');
    assert.deepEqual(Object.keys(await both({ policy: 'batch' })).length, 551);
  });

  it('drops a forgotten node and places a new one in order', async () => {
    g.store.detach('n-0005', 1006);
    clock += GATEWAY_DEFAULTS.forgetAfterMs + 1;
    assert.deepEqual(g.store.prune(clock), ['n-0005']);
    assert.equal(Object.keys(await both()).length, 1099);
    join('n-0005a', { pool: 'batch' });
    const names = Object.keys(await both({ labelSelector: 'pool=batch' }));
    assert.equal(names.includes('n-0005'), false);
    assert.equal(names[names.indexOf('n-0005a') - 1], 'n-0003');
  });
});

describe('ListNodeSummaries when a row cannot be computed', () => {
  it('stores the sample anyway and answers INTERNAL saying why, not a wrong table', async () => {
    const base = listPolicySource([]);
    const throwing = { ...base, select: (labels: Record<string, string>) => (labels.boom ? (() => { throw new Error('selector exploded'); })() : base.select(labels)) };
    const g = await startTestGateway({ policies: throwing });
    try {
      g.store.attach('ok', 'i', null, 1);
      g.store.attach('bad', 'i', null, 2);
      g.store.observe('bad', { raw: { cpuMillicores: 7910n, memoryBytes: 2n ** 34n }, labels: { boom: 'yes' }, nodeMaxRatio: {}, lastGrant: undefined }, Date.now());
      assert.equal(storeSample(g.store, 'bad', 2, sample(1), Date.now()), 'stored');
      assert.equal(storeSample(g.store, 'ok', 1, sample(1), Date.now()), 'stored');
      const c = queryClient(g.ports.grpc);
      await assert.rejects(
        new Promise((resolve, reject) => c.ListNodeSummaries({ labelSelector: '', policy: '' }, (err, r) => (err ? reject(err) : resolve(r)))),
        (e: grpc.ServiceError) => e.code === grpc.status.INTERNAL && /summarizing nodes failed: selector exploded/.test(e.details),
      );
      assert.equal((await getNode(c, 'ok')).latest?.seq, 1);
    } finally {
      await g.close();
    }
  });
});

describe('NodeUsage while not ready', () => {
  it('answers UNAVAILABLE with why, and health says NOT_SERVING', async () => {
    const waiting = { ...listPolicySource([]), notReady: () => 'OversellPolicy watch not synced' };
    const g = await startTestGateway({ policies: waiting });
    try {
      await assert.rejects(getNode(queryClient(g.ports.grpc), 'x'), (e: grpc.ServiceError) => e.code === grpc.status.UNAVAILABLE && /not synced/.test(e.details));
      await assert.rejects(
        new Promise((resolve, reject) => queryClient(g.ports.grpc).ListNodeSummaries({}, (err, r) => (err ? reject(err) : resolve(r)))),
        (e: grpc.ServiceError) => e.code === grpc.status.UNAVAILABLE && /not synced/.test(e.details),
      );
      const ready = await fetch(`http://127.0.0.1:${g.ports.metrics}/readyz`);
      assert.equal(ready.status, 503);
    } finally {
      await g.close();
    }
  });
});

describe('warm-up', () => {
  it('/readyz holds webhook traffic off for the warm-up, while agents can already stream', async () => {
    const g = await startTestGateway({ warmupMs: 600 });
    try {
      const early = await fetch(`http://127.0.0.1:${g.ports.metrics}/readyz`);
      assert.equal(early.status, 503);
      assert.match(await early.text(), /warming up/);
      g.store.attach('n', 'i', null, 1); // the ingest side is open
      await new Promise((r) => setTimeout(r, 700));
      assert.equal((await fetch(`http://127.0.0.1:${g.ports.metrics}/readyz`)).status, 200);
    } finally {
      await g.close();
    }
  });
});

describe('label selectors', () => {
  const sel = (s: string) => parseLabelSelector(s)!;
  it('parses every form and matches like Kubernetes', () => {
    const labels = { app: 'web', tier: 'front', 'example.com/zone': 'a' };
    assert.equal(matches(sel('app=web'), labels), true);
    assert.equal(matches(sel('app==web'), labels), true);
    assert.equal(matches(sel('app!=web'), labels), false);
    assert.equal(matches(sel('tier in (front, back)'), labels), true);
    assert.equal(matches(sel('tier notin (front)'), labels), false);
    assert.equal(matches(sel('example.com/zone'), labels), true);
    assert.equal(matches(sel('!gpu'), labels), true);
    assert.equal(matches(sel('app=web,!tier'), labels), false);
    assert.equal(parseLabelSelector('  '), undefined);
  });
  for (const bad of ['a in (b', 'a=b,', '=b', 'a=b c', 'a in (b c)', 'Bad Key=1', 'a=' + 'x'.repeat(64)]) {
    it(`refuses ${JSON.stringify(bad)}`, () => assert.throws(() => parseLabelSelector(bad), SelectorError));
  }
});
