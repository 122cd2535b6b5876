import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { Sample__Output } from '../proto/gen/oversell/v1/Sample.js';
import { NodeStore } from '../gateway/store/node-store.js';
import { summarize } from '../lib/usage/usage-stats.js';
import { UsageWindow } from '../lib/usage/usage-window.js';
import { learnSample, newNodeInputs } from '../gateway/decide/node-inputs.js';
import { DEFAULT_POLICY } from '../gateway/decide/policy.js';
import { storeSample } from './helpers/store-sample.js';

const s = (seq: number, timestampMs: number, cpu = 100): Sample__Output => ({
  seq, timestampMs, cpuUsageMillicores: cpu, memoryWorkingSetBytes: 10, rootCgroupMemoryWorkingSetBytes: 0, cpuManager: null, capacity: null, pressure: null,
  requests: { cpuMillicores: 5, memoryBytes: 6, podCount: 1, known: true }, summaries: [], onBeat: false, podNamesAsBefore: false, podsIncluded: false, pods: [],
});

describe('NodeStore', () => {
  it('keeps a window cut on the agent timeline and summarizes it', () => {
    const store = new NodeStore({ retainMs: 10_000, forgetAfterMs: 60_000 });
    store.attach('n', 'i', null, 1);
    for (let i = 1; i <= 30; i++) storeSample(store, 'n', 1, s(i, i * 1000, i === 30 ? 9000 : 100), 500_000 + i);
    const r = store.get('n');
    assert.equal(r?.window.length, 10);
    assert.equal(r?.window.point(0).timestampMs, 21_000);
    assert.equal(summarize(r?.window ?? new UsageWindow()).cpuP95Millicores, 9000); // 1 of 10 is above the 95th percentile rank
    const u = store.usage('n', 500_030 + 5000);
    assert.equal(u?.window?.length, 10);
    assert.equal(u?.ageMs, 5000);
    assert.equal(u?.requests.cpuMillicores, 5);
  });

  it('restarts the window when the agent clock steps back past it: one far-future timestamp does not shut later samples out', () => {
    const store = new NodeStore({ retainMs: 10_000, forgetAfterMs: 60_000 });
    store.attach('n', 'i', null, 1);
    for (let i = 1; i <= 5; i++) storeSample(store, 'n', 1, s(i, i * 1000), i);
    storeSample(store, 'n', 1, s(6, 3_600_000), 6); // an hour ahead: the old points are cut
    assert.deepEqual(store.get('n')?.window.points().map((p) => p.timestampMs), [3_600_000]);
    for (let i = 7; i <= 9; i++) storeSample(store, 'n', 1, s(i, i * 1000), i);
    assert.deepEqual(store.get('n')?.window.points().map((p) => p.timestampMs), [7000, 8000, 9000]);
    // A small step back within the window is kept as it always was (in seq order, not sorted).
    storeSample(store, 'n', 1, s(10, 8500), 10);
    assert.equal(store.get('n')?.window.length, 4);
  });

  it('keeps what a node object says before its agent connects, hands it to the record, and forgets it with the node', () => {
    const store = new NodeStore({ retainMs: 10_000, forgetAfterMs: 1000 });
    const raw = { cpuMillicores: 4000n, memoryBytes: 8n * 2n ** 30n };
    store.observe('n', { raw, labels: { pool: 'a' }, nodeMaxRatio: { cpu: 1.5 }, lastGrant: undefined }, 5);
    assert.equal(store.get('n'), undefined);
    store.attach('n', 'i', null, 1);
    assert.deepEqual(store.get('n')?.raw, { ...raw, seenAtMs: 5 });
    assert.deepEqual(store.get('n')?.labels, { pool: 'a' });
    assert.deepEqual(store.get('n')?.nodeMaxRatio, { cpu: 1.5 });
    // A record forgotten (agent gone) and made again gets the observation back.
    store.detach('n', 1);
    assert.deepEqual(store.prune(10_000), ['n']);
    store.attach('n', 'i', null, 2);
    assert.equal(store.get('n')?.raw?.cpuMillicores, 4000n);
    // A node object without a verified record: raw unknown, labels still known.
    store.observe('n', { raw: undefined, labels: { pool: 'b' }, nodeMaxRatio: {}, lastGrant: undefined }, 6);
    assert.equal(store.get('n')?.raw, undefined);
    assert.deepEqual(store.get('n')?.labels, { pool: 'b' });
    store.forgetObservation('n');
    assert.deepEqual(store.get('n')?.labels, {});
    store.detach('n', 2);
    store.prune(20_000);
    store.attach('n', 'i', null, 3);
    assert.deepEqual(store.get('n')?.labels, {});
  });

  it('tells watchers when a node\'s grant record changes, its unconfirmed raw included, and not when it repeats', () => {
    const store = new NodeStore({ retainMs: 10_000, forgetAfterMs: 1000 });
    store.attach('n', 'i', null, 1);
    const raw = { cpuMillicores: 4000n, memoryBytes: 8n * 2n ** 30n };
    const granted = { cpuMillicores: 7999n, memoryBytes: 8n * 2n ** 30n };
    let updates = 0;
    store.on('updated', () => (updates += 1));
    const observe = (unconfirmed?: { cpuMillicores: bigint }) => store.observe('n', { raw, labels: {}, nodeMaxRatio: {}, lastGrant: { granted, wouldGrant: undefined, unconfirmed } }, 5);
    observe({ cpuMillicores: 8000n });
    observe({ cpuMillicores: 8000n });
    assert.equal(updates, 1, 'the same record twice: one update');
    observe(); // the kubelet's next write confirmed raw: same grant, marker gone
    assert.equal(updates, 2);
    assert.equal(store.get('n')?.lastGrant?.unconfirmed, undefined);
  });

  it('refuses duplicates and samples from a stream that is no longer current', () => {
    const store = new NodeStore({ retainMs: 60_000, forgetAfterMs: 60_000 });
    store.attach('n', 'i', null, 1);
    assert.equal(storeSample(store, 'n', 1, s(1, 1), 1), 'stored');
    assert.equal(storeSample(store, 'n', 1, s(1, 1), 2), 'duplicate');
    assert.equal(store.attach('n', 'i', null, 2), 1);
    assert.equal(storeSample(store, 'n', 1, s(2, 2), 3), 'not-current-stream');
    assert.equal(storeSample(store, 'x', 1, s(1, 1), 3), 'unknown-node');
    // The old stream closing does not mark the node disconnected.
    store.detach('n', 1);
    assert.equal(store.connectedCount(), 1);
    store.detach('n', 2);
    assert.equal(store.connectedCount(), 0);
  });

  it('forgets nodes whose agent is gone for longer than forgetAfterMs, and says so', () => {
    const store = new NodeStore({ retainMs: 60_000, forgetAfterMs: 1000 });
    const removed: string[] = [];
    store.on('removed', (n) => removed.push(n));
    store.attach('gone', 'i', null, 1);
    storeSample(store, 'gone', 1, s(1, 1), 100);
    store.attach('here', 'i', null, 2);
    storeSample(store, 'here', 2, s(1, 1), 100);
    store.detach('gone', 1);
    assert.deepEqual(store.prune(1000), []);
    assert.deepEqual(store.prune(1101), ['gone']);
    assert.deepEqual(removed, ['gone']);
    assert.equal(store.get('here')?.name, 'here');
  });
  it('learns each node\'s load factor against the API server\'s bound requests (else the agent\'s), never while a pod starts', () => {
    const bound = new Map<string, { cpuMillicores: number; memoryBytes: number; newestPodAgeMs: number }>();
    const store = new NodeStore({ retainMs: 10_000, forgetAfterMs: 60_000, boundRequests: (n) => bound.get(n) });
    const raw = { cpuMillicores: 1000n, memoryBytes: 1000n };
    const sample = (seq: number, cpu: number, memory: number): Sample__Output => ({ ...s(seq, seq * 1000, cpu), memoryWorkingSetBytes: memory, requests: { cpuMillicores: 800, memoryBytes: 800, podCount: 4, known: true } });
    store.attach('n', 'i', null, 1);
    storeSample(store, 'n', 1, sample(1, 400, 400), 1);
    assert.equal(store.usage('n', 1)?.history, undefined, 'no raw yet: nothing to learn against');
    store.observe('n', { raw, labels: {}, nodeMaxRatio: {}, lastGrant: undefined }, 1);
    storeSample(store, 'n', 1, sample(2, 400, 200), 2);
    // The agent's requests (800): 0.5 and 0.25.
    assert.equal(store.usage('n', 2)?.history?.quantile('cpu', 0), Math.ceil(0.5 * 128 + 1e-9) / 128);
    bound.set('n', { cpuMillicores: 500, memoryBytes: 500, newestPodAgeMs: 5_000 });
    storeSample(store, 'n', 1, sample(3, 450, 450), 3);
    assert.equal(store.usage('n', 3)?.history?.quantile('cpu', 0), Math.ceil(0.5 * 128 + 1e-9) / 128, 'a pod bound 5 s ago: not learnt');
    bound.set('n', { cpuMillicores: 500, memoryBytes: 500, newestPodAgeMs: 60_000 });
    storeSample(store, 'n', 1, sample(4, 450, 450), 4);
    assert.equal(store.usage('n', 4)?.history?.quantile('memory', 0), Math.ceil(0.9 * 128) / 128, 'the API server\'s requests (500), not the agent\'s (800)');
    assert.equal(store.usage('n', 4)?.history?.spanMs(), 2000);
  });

  it('learns with the node\'s own policy\'s startup grace, not the default\'s; and as decide/node-inputs.ts learns for the simulator', () => {
    // A pool whose pods take 5 minutes to show their usage: a pod bound 2 minutes ago is still starting there, not elsewhere.
    const store = new NodeStore({
      retainMs: 10_000, forgetAfterMs: 60_000,
      boundRequests: () => ({ cpuMillicores: 500, memoryBytes: 500, newestPodAgeMs: 120_000 }),
      startupGraceMs: (labels) => (labels.pool === 'slow-start' ? 300_000 : DEFAULT_POLICY.startupGraceMs),
    });
    const raw = { cpuMillicores: 1000n, memoryBytes: 1000n };
    const alone = newNodeInputs();
    for (const [node, labels] of [['slow', { pool: 'slow-start' }], ['fast', {}]] as const) {
      store.attach(node, 'i', null, 1);
      store.observe(node, { raw, labels, nodeMaxRatio: {}, lastGrant: undefined }, 0);
      for (let seq = 1; seq <= 3; seq++) {
        storeSample(store, node, 1, { ...s(seq, seq * 1000, 300), memoryWorkingSetBytes: 200 }, seq);
        if (node === 'fast') {
          learnSample(alone, { timestampMs: seq * 1000, cpuMillicores: 300, memoryBytes: 200, cpuPressure: 0, memoryPressure: 0 }, { requests: { cpu: 500, memory: 500 }, raw: { cpu: 1000, memory: 1000 }, newestPodAgeMs: 120_000 }, { retainMs: 10_000, startupGraceMs: DEFAULT_POLICY.startupGraceMs });
        }
      }
    }
    assert.equal(store.usage('slow', 4)?.history?.spanMs() ?? 0, 0, 'a pod inside its policy\'s 5-minute grace: nothing learnt');
    assert.equal(store.usage('fast', 4)?.history?.spanMs(), 2000, 'past the default 30 s grace: learnt');
    assert.deepEqual(store.get('fast')?.history?.state(), alone.history?.state(), 'the store learns what the one step learns alone');
    assert.deepEqual(store.get('fast')?.window.points().map((p) => p.timestampMs), alone.window.points().map((p) => p.timestampMs));
  });

  it('keeps as CPU pressure the agent\'s contention line when it sent one, the kernel\'s PSI when it did not', () => {
    const store = new NodeStore({ retainMs: 10_000, forgetAfterMs: 60_000 });
    store.attach('n', 'i', null, 1);
    const line = (avg10: number) => ({ avg10, avg60: 0 });
    const pressure = (contention: number | undefined) => ({
      available: true, cpuSome: line(90), cpuFull: line(0), memorySome: line(4), memoryFull: line(0), cpuContention: contention === undefined ? null : line(contention),
    });
    storeSample(store, 'n', 1, { ...s(1, 1000), pressure: pressure(3) }, 1);
    storeSample(store, 'n', 1, { ...s(2, 2000), pressure: pressure(undefined) }, 2);
    storeSample(store, 'n', 1, { ...s(3, 3000), pressure: pressure(0) }, 3);
    assert.deepEqual(store.get('n')?.window.points().map((p) => [p.cpuPressure, p.memoryPressure]), [[3, 4], [90, 4], [0, 4]]);
  });
});
