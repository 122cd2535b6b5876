// The load histories outlive the gateway process: the leader writes them into
// ConfigMaps through a real HTTP API server (the fake one: list, create,
// replace), and a new store seeded from them decides a node as the old one did.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { V1Node } from '@kubernetes/client-node';
import { pino } from 'pino';
import { HistorySnapshots } from '../../../gateway/act/history-snapshots.js';
import { HISTORY_LABEL } from '../../../gateway/act/history-shards.js';
import { encodeLoadHistory } from '../../../gateway/decide/load-history-codec.js';
import { DEFAULT_POLICY, decide } from '../../../gateway/decide/policy.js';
import { NodeStore } from '../../../gateway/store/node-store.js';
import type { Sample__Output } from '../../../proto/gen/oversell/v1/Sample.js';
import { FakeKubeApi, type FakeObject } from '../../helpers/fake-kube-api.js';
import { eventually } from '../../helpers/grpc.js';
import { storeSample } from '../../helpers/store-sample.js';

const CONFIGMAPS = '/api/v1/namespaces/oversell/configmaps';
const HOUR = 3_600_000;
const GI = 1024 ** 3;
const RAW = { cpuMillicores: 16_000n, memoryBytes: 64n * BigInt(GI) };
const START = 1.7e12;

const sample = (seq: number, timestampMs: number, cpu: number, memory: number): Sample__Output => ({
  seq, timestampMs, cpuUsageMillicores: cpu, memoryWorkingSetBytes: memory, rootCgroupMemoryWorkingSetBytes: 0, cpuManager: null, capacity: { cpuMillicores: 16_000, memoryBytes: 68 * GI }, pressure: null,
  requests: { cpuMillicores: 12_000, memoryBytes: 40 * GI, podCount: 10, known: true }, summaries: [], onBeat: false, podNamesAsBefore: false, podsIncluded: false, pods: [],
});

function newStore(): NodeStore {
  return new NodeStore({ retainMs: 600_000, forgetAfterMs: 3_600_000 });
}

/** The node's agent connects and the node object is observed (raw allocatable, as the node watch gives). */
function connect(store: NodeStore, node: string): void {
  store.attach(node, 'agent-1', null, 1);
  store.observe(node, { raw: RAW, labels: {}, nodeMaxRatio: {}, lastGrant: undefined }, 0);
}

/** `hours` of 10 s samples, CPU peaking at noon; returns the next seq and time. */
function learn(store: NodeStore, node: string, hours: number, from = { seq: 1, t: START }): { seq: number; t: number } {
  let { seq, t } = from;
  for (let i = 0; i < (hours * HOUR) / 10_000; i++, seq++, t += 10_000) {
    const hour = ((t - START) / HOUR) % 24;
    const cpu = 3000 + 4000 * Math.exp(-((hour - 12) ** 2) / 8);
    storeSample(store, node, 1, sample(seq, t, cpu, (20 + (hour > 11 && hour < 13 ? 8 : 0)) * GI), t);
  }
  return { seq, t };
}

const nodeCache = (names: string[]) => {
  const nodes: V1Node[] = names.map((name) => ({ metadata: { name } }));
  return { list: () => nodes, get: (n: string) => nodes.find((x) => x.metadata?.name === n) };
};

function recordingLog() {
  const lines: Array<Record<string, unknown>> = [];
  return { lines, log: pino({ level: 'info' }, { write: (s: string) => void lines.push(JSON.parse(s) as Record<string, unknown>) }) };
}

describe('load history snapshots', () => {
  let api: FakeKubeApi;
  before(async () => {
    api = await FakeKubeApi.start([CONFIGMAPS]);
  });
  after(() => api.close());

  const snapshots = (store: NodeStore, nodes: string[], log = recordingLog().log) =>
    new HistorySnapshots({ kubeConfig: api.kubeConfig(), namespace: 'oversell', store, nodes: nodeCache(nodes), lease: { isLeader: true }, log, everyMs: 60_000 });

  const clear = () => {
    for (const cm of api.objects(CONFIGMAPS)) api.remove(CONFIGMAPS, `oversell/${cm.metadata.name}`);
  };

  it('the leader writes each node\'s history; a new store seeded from it decides the node by the budget at once, as the old one does', async () => {
    clear();
    const old = newStore();
    connect(old, 'node-a');
    connect(old, 'node-gone');
    const next = learn(old, 'node-a', 25);
    learn(old, 'node-gone', 1);
    const writer = snapshots(old, ['node-a']); // node-gone no longer exists
    await writer.load();
    assert.equal(await writer.write(), 1);

    const [cm, ...more] = api.objects(CONFIGMAPS);
    assert.equal(more.length, 0);
    assert.equal(cm?.metadata.name, 'oversell-load-history-0');
    assert.equal(cm?.metadata.labels?.[HISTORY_LABEL.key], HISTORY_LABEL.value);
    assert.deepEqual(Object.keys(cm?.binaryData as Record<string, string>), ['node-a'], 'a node that no longer exists is not written');

    // A restarted replica: a new store reads the snapshot before the agent reconnects.
    const fresh = newStore();
    const result = await snapshots(fresh, ['node-a']).load();
    assert.deepEqual(result, { seeded: 0, keptOwn: 0, held: 1, refused: 0 });
    connect(fresh, 'node-a');
    // Without the snapshot: a store that has only its own minute.
    const forgetful = newStore();
    connect(forgetful, 'node-a');
    for (const s of [old, fresh, forgetful]) learn(s, 'node-a', 60 / 3600, next);

    const was = old.usage('node-a', 0)!;
    const now = fresh.usage('node-a', 0)!;
    assert.equal(now.history?.spanMs(), was.history?.spanMs());
    assert.ok((now.history?.spanMs() ?? 0) > 25 * HOUR);
    for (const r of ['cpu', 'memory'] as const) {
      for (const share of [0, 0.001, 0.01]) assert.equal(now.history?.quantile(r, share), was.history?.quantile(r, share), `${r} at ${share}`);
    }
    const before = decide({ raw: RAW, usage: was, policy: DEFAULT_POLICY });
    const after = decide({ raw: RAW, usage: now, policy: DEFAULT_POLICY });
    const learning = decide({ raw: RAW, usage: forgetful.usage('node-a', 0)!, policy: DEFAULT_POLICY });
    assert.equal(after.cpu.decidedBy, 'budget');
    assert.equal(after.memory.decidedBy, 'budget');
    assert.equal(after.cpu.granted, before.cpu.granted);
    assert.equal(after.memory.granted, before.memory.granted);
    assert.equal(after.reason, before.reason);
    assert.notEqual(learning.cpu.decidedBy, 'budget', 'without the snapshot the node is still learning');
    assert.match(learning.reason, /the risk budget once the load history spans 24h/);
  });

  it('sharded: every replica writes the histories of the nodes it holds, leader or not, and keeps the others\' entries as they were', async () => {
    clear();
    const a = newStore();
    const b = newStore();
    connect(a, 'node-a');
    connect(b, 'node-b');
    learn(a, 'node-a', 25);
    learn(b, 'node-b', 2);
    // Each store also has a stale minute of the other's node (from before the members changed): never written over the owner's.
    connect(a, 'node-b');
    learn(a, 'node-b', 60 / 3600);
    const replica = (store: NodeStore, holds: string) =>
      new HistorySnapshots({ kubeConfig: api.kubeConfig(), namespace: 'oversell', store, nodes: nodeCache(['node-a', 'node-b']), lease: { isLeader: false }, holds: (n) => n === holds, log: recordingLog().log, everyMs: 60_000 });
    const writeA = replica(a, 'node-a');
    const writeB = replica(b, 'node-b');
    await writeA.load();
    await writeB.load();
    await writeA.write();
    const entries = () => Object.fromEntries(api.objects(CONFIGMAPS).flatMap((cm) => Object.entries((cm.binaryData ?? {}) as Record<string, string>)));
    assert.deepEqual(Object.keys(entries()), ['node-a'], 'A writes its own node only, though it is not the leader');
    const aWrote = entries()['node-a'];
    await writeB.write();
    assert.deepEqual(Object.keys(entries()).sort(), ['node-a', 'node-b'], 'B adds its node and keeps A\'s');
    assert.equal(entries()['node-a'], aWrote, 'A\'s entry as A wrote it');
    const bWrote = entries()['node-b'];
    await writeA.write();
    assert.equal(entries()['node-b'], bWrote, 'A keeps B\'s entry, not its own stale minute of node-b');
  });

  it('a corrupted entry is refused and logged: that node learns from scratch, the others are seeded', async () => {
    clear();
    const good = newStore();
    connect(good, 'node-b');
    learn(good, 'node-b', 2);
    const bytes = encodeLoadHistory(good.get('node-b')!.history!)!;
    const garbled = Buffer.from(bytes);
    garbled.writeDoubleLE(Number.NaN, 1 + 8 * 4); // the total
    api.put(CONFIGMAPS, {
      metadata: { name: 'oversell-load-history-0', namespace: 'oversell', labels: { [HISTORY_LABEL.key]: HISTORY_LABEL.value } },
      binaryData: { 'node-a': garbled.toString('base64'), 'node-b': Buffer.from(bytes).toString('base64'), 'node-c': Buffer.from([1, 2, 3]).toString('base64') },
    } as FakeObject);

    const { lines, log } = recordingLog();
    const fresh = newStore();
    connect(fresh, 'node-a');
    const result = await snapshots(fresh, ['node-a', 'node-b', 'node-c'], log).load();
    assert.deepEqual(result, { seeded: 0, keptOwn: 0, held: 1, refused: 2 });
    const refused = lines.filter((l) => l.msg?.toString().startsWith('load history entry refused'));
    assert.deepEqual(refused.map((l) => l.node).sort(), ['node-a', 'node-c']);
    assert.match(String(refused.find((l) => l.node === 'node-a')?.reason), /total weight NaN/);
    assert.match(String(refused.find((l) => l.node === 'node-c')?.reason), /truncated/);
    assert.equal(refused[0]?.configMap, 'oversell/oversell-load-history-0');
    assert.match(String(refused[0]?.msg), /learns from scratch/);

    assert.equal(fresh.history('node-a'), undefined, 'the refused entry seeds nothing');
    learn(fresh, 'node-a', 60 / 3600);
    assert.ok((fresh.history('node-a')?.spanMs() ?? -1) < 60_000, 'learning starts fresh');
    assert.equal(fresh.history('node-b')?.spanMs(), good.history('node-b')?.spanMs(), 'the good entry is held for its agent');
  });

  it('a replica with a longer history of its own keeps it; a shorter one takes the snapshot\'s', () => {
    const snapshot = newStore();
    connect(snapshot, 'n');
    learn(snapshot, 'n', 3);
    const shortOwn = newStore();
    connect(shortOwn, 'n');
    learn(shortOwn, 'n', 1, { seq: 1, t: START + 2 * HOUR });
    const longOwn = newStore();
    connect(longOwn, 'n');
    learn(longOwn, 'n', 4);
    const seed = snapshot.history('n')!;
    assert.equal(shortOwn.seedHistory('n', seed), 'seeded');
    assert.equal(shortOwn.history('n'), seed);
    const own = longOwn.history('n');
    assert.equal(longOwn.seedHistory('n', seed), 'kept-own');
    assert.equal(longOwn.history('n'), own);
    // A node deleted before its agent came back takes its held history with it.
    const held = newStore();
    assert.equal(held.seedHistory('m', seed), 'held');
    held.forgetObservation('m');
    connect(held, 'm');
    assert.equal(held.history('m'), undefined);
  });

  it('writes replace the shards in place and never drop one; a write before the snapshot was read is refused', async () => {
    clear();
    const store = newStore();
    for (const n of ['a', 'b', 'c']) {
      connect(store, n);
      learn(store, n, 0.1);
    }
    // A shard left by a gateway with more nodes: the count stays, it is emptied of nodes now gone.
    api.put(CONFIGMAPS, { metadata: { name: 'oversell-load-history-2', namespace: 'oversell', labels: { [HISTORY_LABEL.key]: HISTORY_LABEL.value } }, binaryData: { gone: 'AQ==' } });
    const writer = snapshots(store, ['a', 'b', 'c']);
    await assert.rejects(writer.write(), /not read yet/);
    await writer.load();
    assert.equal(await writer.write(), 3);
    assert.equal(await writer.write(), 3);
    const shards = api.objects(CONFIGMAPS);
    assert.deepEqual(shards.map((c) => c.metadata.name), ['oversell-load-history-0', 'oversell-load-history-1', 'oversell-load-history-2']);
    const nodes = shards.flatMap((c) => Object.keys((c.binaryData ?? {}) as Record<string, string>)).sort();
    assert.deepEqual(nodes, ['a', 'b', 'c']);
    const reread = newStore();
    assert.deepEqual(await snapshots(reread, []).load(), { seeded: 0, keptOwn: 0, held: 3, refused: 0 });
  });

  it('started while the API server refuses, it retries the read and writes only after it', async () => {
    clear();
    const store = newStore();
    connect(store, 'a');
    learn(store, 'a', 0.1);
    const { lines, log } = recordingLog();
    api.refuse.list = 403;
    const running = new HistorySnapshots({ kubeConfig: api.kubeConfig(), namespace: 'oversell', store, nodes: nodeCache(['a']), lease: { isLeader: true }, log, everyMs: 50 });
    try {
      await running.start();
      assert.equal(running.loaded, false);
      assert.match(String(lines.find((l) => l.level === 40)?.msg), /not read; retrying every interval.*list on configmaps in oversell/);
      await new Promise((r) => setTimeout(r, 200));
      assert.equal(api.objects(CONFIGMAPS).length, 0, 'nothing written before a read succeeded');
      api.refuse.list = undefined;
      await eventually(() => api.objects(CONFIGMAPS).length === 1 || undefined, 5000, 'the snapshot written once the read succeeds');
      assert.equal(running.loaded, true);
    } finally {
      running.stop();
      api.refuse.list = undefined;
    }
  });
});
