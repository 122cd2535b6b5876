// POST /mutate/nodes (gateway/admit/webhook-plugin.ts): what the plugin adds
// around reviewNode() — the body reader, answers to what is no AdmissionReview,
// metrics, and what it keeps of a write — through fastify's inject(); and one
// smoke test over real HTTPS through the whole gateway. The decisions and
// patches themselves are test/gateway/admit/node-review.test.ts.
import assert from 'node:assert/strict';
import { after, before, beforeEach, describe, it } from 'node:test';
import type { Sample__Output } from '../../../proto/gen/oversell/v1/Sample.js';
import { ChangeLog, webhookPlugin } from '../../../gateway/admit/webhook-plugin.js';
import type { NodeObservation } from '../../../gateway/decide/policy.js';
import { toPolicyEntry } from '../../../gateway/policies/policy-spec.js';
import type { Logger } from '../../../lib/log.js';
import { listPolicySource, postHttps, startTestGateway } from '../../helpers/gateway.js';
import { FIXTURE_NODE, NODE_FIXTURE, applied, kubeletReview, nodeSample, patchOf, reviewBench, type NodeReview, type ReviewBench } from '../../helpers/node-reviews.js';
import { pluginApp, type PluginApp } from '../../helpers/plugin-app.js';
import { storeSample } from '../../helpers/store-sample.js';

let clock = 2_000_000;
const now = () => clock;

/** The plugin as gateway.ts registers it without a cluster: real writes are kept in the store. */
async function nodeWebhook(bench: ReviewBench, perNodeMetrics?: boolean): Promise<PluginApp> {
  return pluginApp(webhookPlugin, bench.store, {
    deps: bench.deps,
    observe: (name: string, observed: NodeObservation) => bench.store.observe(name, observed, now()),
    ...(perNodeMetrics !== undefined && { perNodeMetrics }),
  });
}

const send = (app: PluginApp, r: unknown) => app.post('/mutate/nodes', JSON.stringify(r));

describe('webhook plugin: answers to what is no AdmissionReview', () => {
  let app: PluginApp;
  before(async () => {
    app = await nodeWebhook(reviewBench({ now }));
  });
  after(() => app.close());

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
    it(`answers ${what} with ${status} and a message, counted as bad-request`, async () => {
      const before = await app.series('oversell_webhook_request_duration_seconds_count{outcome="bad-request"}');
      const res = await app.post('/mutate/nodes', body, headers);
      assert.equal(res.statusCode, status, res.body);
      assert.match((res.json() as { message: string }).message, message);
      assert.equal(await app.series('oversell_webhook_request_duration_seconds_count{outcome="bad-request"}'), before + 1);
    });
  }
});

describe('webhook plugin: metrics and what it keeps', () => {
  let bench: ReviewBench;
  let app: PluginApp;
  beforeEach(async () => {
    clock += 1000;
    bench = reviewBench({ now });
    app = await nodeWebhook(bench);
  });
  const close = () => app.close();

  /** A 4-core node's kubelet write, no annotations. */
  function fourCores(name: string, cpu = '4'): NodeReview {
    const r = kubeletReview(name);
    delete r.request.oldObject;
    r.request.object.metadata.annotations = {};
    Object.assign(r.request.object.status.allocatable, { cpu, memory: '8Gi' });
    Object.assign(r.request.object.status.capacity, { cpu, memory: '8Gi' });
    return r;
  }
  const fourCoreSample = (over: Partial<Sample__Output> = {}) => nodeSample(clock, {
    cpuUsageMillicores: 200, memoryWorkingSetBytes: 1024 ** 3, capacity: { cpuMillicores: 4000, memoryBytes: 8 * 1024 ** 3 },
    requests: { cpuMillicores: 3000, memoryBytes: 6 * 1024 ** 3, podCount: 10, known: true }, ...over,
  });

  // One row per kind of write: what is sent, and the series each must raise.
  const rows: Array<{ what: string; send: () => unknown; series: string[] }> = [
    {
      what: 'an inflated kubelet write',
      send: () => {
        bench.report(FIXTURE_NODE, nodeSample(clock));
        return kubeletReview();
      },
      series: ['oversell_webhook_request_duration_seconds_count{outcome="patched"}', 'oversell_decisions_total{resource="cpu",bound="cap"}'],
    },
    {
      what: 'a write with stale agent data',
      send: () => {
        bench.report('stale-node', nodeSample(clock));
        clock += 41_000;
        return kubeletReview('stale-node');
      },
      series: ['oversell_decisions_total{resource="cpu",bound="stale"}'],
    },
    { what: 'a write without agent data', send: () => kubeletReview('never-reported'), series: ['oversell_webhook_request_duration_seconds_count{outcome="no-data"}'] },
    {
      what: 'a write that is not ours',
      send: () => {
        const r = kubeletReview();
        delete r.request.subResource;
        return r;
      },
      series: ['oversell_webhook_request_duration_seconds_count{outcome="skipped"}'],
    },
    {
      what: 'a status write by someone other than the node\'s kubelet',
      send: () => {
        bench.report('identity', fourCoreSample());
        const r = fourCores('identity');
        r.request.userInfo = { username: 'system:serviceaccount:kube-system:x' };
        return r;
      },
      series: ['oversell_webhook_request_duration_seconds_count{outcome="not-kubelet"}', 'oversell_webhook_untouched_total{reason="not-kubelet"}'],
    },
    {
      what: 'an allocatable above capacity without our record',
      send: () => {
        bench.report('above', fourCoreSample());
        const r = fourCores('above');
        r.request.object.status.allocatable.cpu = '8';
        return r;
      },
      series: ['oversell_webhook_request_duration_seconds_count{outcome="unverified"}', 'oversell_webhook_untouched_total{reason="above-capacity"}'],
    },
    {
      what: 'an agent reporting requests past the cap',
      send: () => {
        bench.report('wild-agent', fourCoreSample({ requests: { cpuMillicores: 9e18, memoryBytes: 9e18, podCount: 1, known: true } }));
        return fourCores('wild-agent');
      },
      series: ['oversell_node_requests_over_cap{node="wild-agent",resource="cpu"}'],
    },
  ];
  for (const row of rows) {
    it(`${row.what}: answered 200 and counted`, async () => {
      try {
        const res = await send(app, row.send());
        assert.equal(res.statusCode, 200, res.body);
        for (const s of row.series) assert.equal(await app.series(s), 1, s);
      } finally {
        await close();
      }
    });
  }

  it('keeps what a real kubelet write said, never a dry run\'s or another writer\'s', async () => {
    try {
      bench.report('dry', fourCoreSample());
      assert.equal((await send(app, fourCores('dry'))).statusCode, 200);
      assert.equal(bench.store.get('dry')?.raw?.cpuMillicores, 4000n);
      const gauge = 'oversell_node_raw_allocatable{node="dry",resource="cpu"}';
      assert.equal(await app.series(gauge), 4);
      const dry = fourCores('dry', '64');
      dry.request.dryRun = true;
      const res = await send(app, dry);
      assert.ok(patchOf(res.json()).length > 0, 'the dry run still gets the answer a real write would');
      assert.equal(bench.store.get('dry')?.raw?.cpuMillicores, 4000n, 'the stored raw is still 4 CPUs');
      assert.equal(await app.series(gauge), 4);

      bench.report('identity', fourCoreSample());
      const other = fourCores('identity');
      other.request.userInfo = { username: 'system:node:some-other-node' };
      assert.equal((await send(app, other)).statusCode, 200);
      assert.equal(bench.store.get('identity')?.raw, undefined, 'nothing it says is recorded');
    } finally {
      await close();
    }
  });

  it('under a DryRun policy the gauges show the would-be grant (2x) and the applied one (1x)', async () => {
    await close();
    const entry = toPolicyEntry({ metadata: { name: 'pool-dry' }, spec: { nodeSelector: { matchLabels: { pool: 'dry' } }, mode: 'DryRun' } });
    bench = reviewBench({ now, policies: listPolicySource([entry]) });
    app = await nodeWebhook(bench);
    try {
      bench.report('dry-1', nodeSample(clock));
      const r = kubeletReview('dry-1');
      r.request.object.metadata.labels = { 'oversell.io/enabled': 'true', pool: 'dry' };
      assert.equal((await send(app, r)).statusCode, 200);
      assert.equal(await app.series('oversell_node_granted_ratio{node="dry-1",resource="cpu"}'), 2);
      assert.equal(await app.series('oversell_node_applied_ratio{node="dry-1",resource="cpu"}'), 1);
    } finally {
      await close();
    }
  });
});

describe('webhook plugin: reviews from callers it cannot verify', () => {
  it('with perNodeMetrics off (no client certificate required, a node watch instead) a forged review moves no node\'s gauges; decisions are still counted', async () => {
    const bench = reviewBench({ now });
    for (const perNodeMetrics of [true, false]) {
      const app = await nodeWebhook(bench, perNodeMetrics);
      try {
        const node = `forged-${perNodeMetrics}`;
        bench.report(node, nodeSample(clock));
        // Anyone who reaches the port can claim to be the node's kubelet: a node of 1,000 cores.
        const r = kubeletReview(node);
        Object.assign(r.request.object.status.allocatable, { cpu: '1000', memory: '8Ti' });
        Object.assign(r.request.object.status.capacity, { cpu: '1000', memory: '8Ti' });
        assert.equal((await send(app, r)).statusCode, 200);
        const raw = await app.series(`oversell_node_raw_allocatable{node="${node}",resource="cpu"}`);
        assert.equal(raw, perNodeMetrics ? 1000 : 0, perNodeMetrics ? 'reviews set the gauges' : 'no gauge for the forged node');
        assert.ok((await app.series('oversell_decisions_total{resource="cpu",bound="cap"}')) >= 1);
      } finally {
        await app.close();
      }
    }
  });
});

describe('webhook plugin over real HTTPS (smoke)', () => {
  it('a kubelet write through the gateway\'s HTTPS listener is inflated', async () => {
    const gw = await startTestGateway({ now });
    try {
      gw.store.attach(FIXTURE_NODE, 'instance-a', null, 1);
      storeSample(gw.store, FIXTURE_NODE, 1, nodeSample(clock), clock);
      const r = kubeletReview();
      const res = await postHttps(gw, '/mutate/nodes', NODE_FIXTURE);
      assert.equal(res.status, 200, res.body);
      const answer = res.json() as { apiVersion: string; kind: string; response: { uid: string; allowed: boolean; patch?: string; patchType?: string } };
      assert.equal(answer.apiVersion, 'admission.k8s.io/v1');
      assert.equal(answer.kind, 'AdmissionReview');
      assert.equal(answer.response.uid, r.request.uid);
      assert.equal(answer.response.allowed, true);
      assert.equal(answer.response.patchType, 'JSONPatch');
      assert.equal(applied(r.request.object, patchOf(answer)).status.allocatable.cpu, '15820m');
    } finally {
      await gw.close();
    }
  });
});

describe('webhook plugin: the grant change log', () => {
  it('says a grant changed once, then stays quiet for the interval even if it changes again', () => {
    const lines: Array<Record<string, unknown>> = [];
    const log = { info: (o: Record<string, unknown>) => lines.push(o) } as unknown as Logger;
    let t = 0;
    const c = new ChangeLog(log, 30_000, () => t);
    assert.equal(c.note('n1', '8000/10', {}), true);
    assert.equal(c.note('n1', '8000/10', {}), false, 'same value');
    t = 1000;
    assert.equal(c.note('n1', '4000/10', {}), false, 'changed, but within the interval');
    assert.equal(c.note('n2', '4000/10', {}), true, 'other nodes are independent');
    t = 31_000;
    assert.equal(c.note('n1', '4000/10', {}), true);
    assert.deepEqual(lines.map((l) => l.node), ['n1', 'n2', 'n1']);
  });
});
