// Relief acted on (gateway/act/relief-actor.ts): a node's memory past the
// relief line, its pods' tiers and usage, and evictions asked of a real HTTP
// server speaking the Eviction API (201, or 429 where a PodDisruptionBudget
// forbids), with the real client the gateway uses.
import assert from 'node:assert/strict';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, beforeEach, describe, it } from 'node:test';
import { ReliefActor, type ReliefResult } from '../../../gateway/act/relief-actor.js';
import { watchSamples } from '../../../gateway/act/sample-watch.js';
import { DEFAULT_POLICY, type Policy } from '../../../gateway/decide/policy.js';
import { flagsPolicySource } from '../../../gateway/policies/policy-source.js';
import { NodeStore } from '../../../gateway/store/node-store.js';
import { PodFactsStore, type PodFacts } from '../../../gateway/store/pod-facts.js';
import { kubeConfigFor } from '../../helpers/fake-kube-api.js';
import { nodeSample } from '../../helpers/node-reviews.js';
import { silentLog } from '../../helpers/plugin-app.js';
import { storeSample } from '../../helpers/store-sample.js';

const GiB = 1024 ** 3;
const CAPACITY = 32 * GiB;

/** The API server's side: namespaces (labels), evictions (201, or 429 for the names in pdbBlocks), Events. */
class EvictionApi {
  server: Server = createServer((req, res) => this.#serve(req, res));
  evictions: string[] = [];
  events: { reason: string; message: string; involvedObject: { kind: string; name: string } }[] = [];
  pdbBlocks = new Set<string>();
  namespaces: Record<string, Record<string, string>> = {};

  async start(): Promise<void> {
    await new Promise<void>((r) => this.server.listen(0, '127.0.0.1', r));
  }
  get url(): string {
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }
  #serve(req: IncomingMessage, res: import('node:http').ServerResponse): void {
    let body = '';
    req.on('data', (c: Buffer) => (body += c));
    req.on('end', () => {
      const url = req.url ?? '';
      const reply = (code: number, o: unknown) => {
        res.writeHead(code, { 'content-type': 'application/json' });
        res.end(JSON.stringify(o));
      };
      let m = /^\/api\/v1\/namespaces\/([^/]+)$/.exec(url);
      if (req.method === 'GET' && m) {
        const labels = this.namespaces[m[1] ?? ''];
        return labels ? reply(200, { metadata: { name: m[1], labels } }) : reply(404, { kind: 'Status', code: 404 });
      }
      m = /^\/api\/v1\/namespaces\/([^/]+)\/pods\/([^/]+)\/eviction/.exec(url);
      if (req.method === 'POST' && m) {
        const pod = `${m[1]}/${m[2]}`;
        if (this.pdbBlocks.has(pod)) return reply(429, { kind: 'Status', apiVersion: 'v1', status: 'Failure', reason: 'TooManyRequests', code: 429, message: 'Cannot evict pod as it would violate the pod\'s disruption budget.' });
        this.evictions.push(pod);
        return reply(201, JSON.parse(body));
      }
      if (req.method === 'POST' && /^\/api\/v1\/namespaces\/default\/events/.test(url)) {
        this.events.push(JSON.parse(body));
        return reply(201, JSON.parse(body));
      }
      reply(404, { kind: 'Status', code: 404, message: `no ${req.method} ${url}` });
    });
  }
}

const pod = (name: string, over: Partial<PodFacts> = {}): PodFacts => ({
  uid: `uid-${name}`, node: 'node-a', namespace: 'apps', name, priority: 0, qos: 'Burstable', exclusiveCpus: 0, cpuRequestMillicores: 100, memoryRequestBytes: 1 * GiB, startedAtMs: 0, finished: false, evicted: false, oomKills: [], oomKillsWithoutLimit: [], ...over,
});

describe('ReliefActor', () => {
  const api = new EvictionApi();
  let store: NodeStore;
  let pods: PodFactsStore;
  let results: ReliefResult[];
  let harms: string[];
  before(() => api.start());
  after(() => new Promise<void>((r) => api.server.close(() => r())));
  beforeEach(() => {
    api.evictions = [];
    api.events = [];
    api.pdbBlocks.clear();
    api.namespaces = { apps: {}, db: { 'oversell.io/protect': 'true' } };
    store = new NodeStore({ retainMs: 120_000, forgetAfterMs: 600_000 });
    pods = new PodFactsStore();
    results = [];
    harms = [];
  });

  /** The node's sample: its working set, and the memory each pod uses (a pod report). */
  let clock = Date.now();
  function report(workingSetGiB: number, usage: Record<string, number>): void {
    store.attach('node-a', 'i-1', null, 1);
    // A sample a second: two reports in one millisecond would share a seq (the store keeps one).
    clock += 1000;
    storeSample(store, 'node-a', 1, nodeSample(clock, {
      capacity: { cpuMillicores: 8000, memoryBytes: CAPACITY }, memoryWorkingSetBytes: workingSetGiB * GiB, podsIncluded: true,
      pods: Object.entries(usage).map(([name, gib]) => ({ uid: `uid-${name}`, qosClass: 'burstable', cpuUsageMillicores: 10, memoryWorkingSetBytes: gib * GiB, containers: [], cpuThrottledMicros: 0 })),
    }), clock);
  }
  /** A sample without a pod report (the agent sends one every --pod-report-every samples): the pods' usage stays the last report's. */
  function sampleOnly(workingSetGiB: number): void {
    clock += 1000;
    storeSample(store, 'node-a', 1, nodeSample(clock, { capacity: { cpuMillicores: 8000, memoryBytes: CAPACITY }, memoryWorkingSetBytes: workingSetGiB * GiB }), clock);
  }
  const actor = (policy: Policy = DEFAULT_POLICY, relieves = true) =>
    new ReliefActor({ kubeConfig: kubeConfigFor(api.url), store, pods, policies: flagsPolicySource(policy), relieves: () => relieves, metrics: { relief: (r) => results.push(r), harm: (pool, tier, by) => harms.push(`${pool}/${tier}/${by}`) }, log: silentLog });

  it('under the relief line: nothing asked', async () => {
    pods.set(pod('batch'));
    report(30, { batch: 8 }); // 30 of 32 GiB: 93.75 %, under 95 %
    assert.deepEqual(await actor().relieve('node-a'), []);
    assert.deepEqual(api.evictions, []);
  });

  it('past it: evicts just enough unprotected pods, lowest priority and most over request first; never a protected one; an Event on the node says why', async () => {
    pods.set(pod('db-0', { namespace: 'db', priority: -1000 })); // protected by its namespace, though it would pay first
    pods.set(pod('pg', { qos: 'Guaranteed', priority: -1000 })); // protected: Guaranteed
    pods.set(pod('batch-1', { priority: -10 }));
    pods.set(pod('batch-2', { priority: -10 }));
    pods.set(pod('web', { priority: 100 }));
    report(31, { 'db-0': 10, pg: 6, 'batch-1': 2, 'batch-2': 1.5, web: 3 }); // 31 GiB: calm (90 %) is 28.8: 2.2 GiB to free
    assert.deepEqual(await actor().relieve('node-a'), ['evicted', 'evicted']);
    assert.deepEqual(api.evictions, ['apps/batch-1', 'apps/batch-2'], 'the two lowest-priority unprotected pods, most over request first; web, db-0 and pg untouched');
    assert.deepEqual(harms, ['flags/unprotected/relief', 'flags/unprotected/relief'], 'each relief counted as harm to an unprotected pod of its pool');
    const deadline = Date.now() + 5000;
    while (api.events.length < 2 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
    assert.equal(api.events.length, 2, 'one Event a relieved pod (written after the eviction, not waited for)');
    assert.equal(api.events[0]?.reason, 'PodRelieved');
    assert.deepEqual(api.events[0]?.involvedObject, { apiVersion: 'v1', kind: 'Node', name: 'node-a' } as never);
    assert.match(api.events[0]?.message ?? '', /evicted apps\/batch-1 through the Eviction API: node node-a's memory working set 31.00 GiB is past the relief line/);
  });

  it('the next sample while the evicted pods terminate (still reported): what they free counts, nothing more is evicted', async () => {
    pods.set(pod('batch-1', { priority: -10 }));
    pods.set(pod('batch-2', { priority: -10 }));
    pods.set(pod('batch-3', { priority: -5 }));
    report(31, { 'batch-1': 2, 'batch-2': 1.5, 'batch-3': 3 });
    const a = actor({ ...DEFAULT_POLICY, relief: { ...DEFAULT_POLICY.relief, perNodePerMinute: 10 } }); // not the rate limit that stops it
    assert.deepEqual(await a.relieve('node-a'), ['evicted', 'evicted']);
    report(31, { 'batch-1': 2, 'batch-2': 1.5, 'batch-3': 3 }); // the kubelet has not stopped them yet
    assert.deepEqual(await a.relieve('node-a'), [], '3.5 GiB already on its way out covers the 2.2 GiB to free');
    assert.deepEqual(api.evictions, ['apps/batch-1', 'apps/batch-2']);
  });

  it('pod usage from before the node\'s memory moved (no report with the crossing sample): nothing until a report shows who grew', async () => {
    pods.set(pod('batch-1', { priority: -10 }));
    pods.set(pod('batch-2', { priority: -10 }));
    pods.set(pod('hog', { priority: -10 }));
    report(20, { 'batch-1': 0.1, 'batch-2': 0.1, hog: 0.01 }); // before the hog grew
    sampleOnly(31); // it grew by 11 GiB: the report is out of date, and on it the batch pods would pay
    const a = actor({ ...DEFAULT_POLICY, relief: { ...DEFAULT_POLICY.relief, perNodePerMinute: 10 } });
    assert.deepEqual(await a.relieve('node-a'), [], 'no victim chosen on a report from before the move');
    report(31, { 'batch-1': 0.1, 'batch-2': 0.1, hog: 11 }); // the agent reports at once (wire/pod-report.ts)
    assert.deepEqual(await a.relieve('node-a'), ['evicted']);
    assert.deepEqual(api.evictions, ['apps/hog'], 'the pod that grew, and just it');
  });

  it('pod usage older than the crossing sample but close to it: one eviction, then nothing until a newer report says what it freed', async () => {
    pods.set(pod('batch-1', { priority: -10 }));
    pods.set(pod('batch-2', { priority: -10 }));
    report(30.6, { 'batch-1': 1.5, 'batch-2': 1.4 });
    sampleOnly(31); // 0.4 GiB more: under 2 % of 32 GiB, the report still describes the node
    const a = actor({ ...DEFAULT_POLICY, relief: { ...DEFAULT_POLICY.relief, perNodePerMinute: 10 } });
    assert.deepEqual(await a.relieve('node-a'), ['evicted'], 'one victim on older usage, not as many as it would take');
    sampleOnly(31); // terminating, still counted
    assert.deepEqual(await a.relieve('node-a'), [], 'no pod report since the eviction: wait');
    report(31, { 'batch-1': 1.5, 'batch-2': 1.4 });
    assert.deepEqual(await a.relieve('node-a'), ['evicted'], 'a newer report: 2.2 GiB to free, 1.5 on its way: one more');
    assert.deepEqual(api.evictions, ['apps/batch-1', 'apps/batch-2']);
  });

  it('a PodDisruptionBudget refuses the first candidate: the next one is taken, the refused one not asked again', async () => {
    pods.set(pod('batch-1', { priority: -10 }));
    pods.set(pod('batch-2', { priority: 0 }));
    api.pdbBlocks.add('apps/batch-1');
    report(31, { 'batch-1': 3, 'batch-2': 3 });
    const a = actor();
    assert.deepEqual(await a.relieve('node-a'), ['blocked', 'evicted']);
    assert.deepEqual(api.evictions, ['apps/batch-2']);
    // batch-2 has gone, and the node is still hot (the next sample): the blocked pod is left out for a minute, not retried in a loop.
    pods.delete('uid-batch-2');
    pods.set(pod('batch-3', { priority: 5 }));
    report(31, { 'batch-1': 3, 'batch-3': 3 });
    assert.deepEqual(await a.relieve('node-a'), ['evicted']);
    assert.deepEqual(api.evictions, ['apps/batch-2', 'apps/batch-3']);
  });

  it('only protected pods left: evicts none', async () => {
    pods.set(pod('pg', { qos: 'Guaranteed' }));
    pods.set(pod('sys', { priority: 2_000_001_000 }));
    report(31.5, { pg: 20, sys: 5 });
    assert.deepEqual(await actor().relieve('node-a'), []);
    assert.deepEqual(api.evictions, []);
  });

  it('a pod whose namespace cannot be read is taken for protected', async () => {
    pods.set(pod('x', { namespace: 'gone' }));
    report(31.5, { x: 20 });
    assert.deepEqual(await actor().relieve('node-a'), []);
  });

  it('DryRun: says what it would evict, evicts nothing', async () => {
    pods.set(pod('batch'));
    report(31.5, { batch: 10 });
    assert.deepEqual(await actor({ ...DEFAULT_POLICY, mode: 'DryRun' }).relieve('node-a'), ['dry-run']);
    assert.deepEqual(api.evictions, []);
  });

  it('at most 2 evictions a node a minute', async () => {
    for (let i = 0; i < 5; i++) pods.set(pod(`b-${i}`));
    report(31.9, Object.fromEntries(Array.from({ length: 5 }, (_, i) => [`b-${i}`, 1])));
    assert.deepEqual(await actor().relieve('node-a'), ['evicted', 'evicted']);
  });

  it('relief off in the policy (spec.relief.enabled false): nothing asked; a policy\'s own line is where it acts', async () => {
    pods.set(pod('batch'));
    report(31.5, { batch: 10 });
    assert.deepEqual(await actor({ ...DEFAULT_POLICY, relief: { ...DEFAULT_POLICY.relief, enabled: false } }).relieve('node-a'), []);
    report(28, { batch: 10 }); // 87.5 %: under the default line, over a line of 85 %
    assert.deepEqual(await actor().relieve('node-a'), []);
    assert.deepEqual(await actor({ ...DEFAULT_POLICY, relief: { ...DEFAULT_POLICY.relief, memoryLine: 0.85, calmLine: 0.8 } }).relieve('node-a'), ['evicted']);
  });

  it('a replica that does not act for the node asks nothing', async () => {
    pods.set(pod('batch'));
    report(31.5, { batch: 10 });
    assert.deepEqual(await actor(DEFAULT_POLICY, false).relieve('node-a'), []);
  });

  it('listening to the store: the sample that crosses the line triggers relief', async () => {
    pods.set(pod('batch'));
    const unwatch = watchSamples({ store, policies: flagsPolicySource(DEFAULT_POLICY), optedIn: () => true, consumers: [actor()] });
    try {
      report(31.5, { batch: 10 });
      const deadline = Date.now() + 5000;
      while (api.evictions.length === 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
      assert.deepEqual(api.evictions, ['apps/batch']);
    } finally {
      unwatch();
    }
  });
});
