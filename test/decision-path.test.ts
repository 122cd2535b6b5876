// One decision, one set of inputs: for random nodes (raw, per-node caps,
// policy) and usage histories, the decision the query API shows after a
// kubelet write (GetNode, and the columns of ListNodeSummaries) is exactly
// what the webhook writes on that kubelet's next write: same caps, same
// previous grant, same bound requests. Local mode: the kubelet-shaped reviews
// are the only source of node metadata.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { after, before, describe, it } from 'node:test';
import fc from 'fast-check';
import jsonpatch from 'fast-json-patch';
import type { NodeSummaries__Output } from '../proto/gen/oversell/v1/NodeSummaries.js';
import { rowsOfSummaries } from '../cli/render.js';
import { toPolicyEntry } from '../gateway/policies/policy-spec.js';
import { formatBytes, formatMilli, milliValue, parseQuantity, value } from '../lib/quantity.js';
import { getNode, queryClient } from './helpers/grpc.js';
import { listPolicySource, postHttps, startTestGateway, type TestGateway } from './helpers/gateway.js';
import { storeSample } from './helpers/store-sample.js';

interface NodeObject {
  metadata: { name: string; labels: Record<string, string>; annotations: Record<string, string> };
  status: { allocatable: Record<string, string>; capacity: Record<string, string> };
}
interface Review {
  request: { uid: string; name: string; userInfo: { username: string }; object: NodeObject; oldObject?: unknown };
}

const fixture = readFileSync(new URL('./fixtures/admission/node-status-update.json', import.meta.url), 'utf8');
const GI = 2 ** 30;
let clock = 10_000_000;

const arbCase = fc.record({
  rawCpu: fc.integer({ min: 1000, max: 64_000 }),
  rawMemoryGi: fc.integer({ min: 2, max: 256 }),
  maxRatioCpu: fc.option(fc.constantFrom('1', '1.1', '1.5', '3', 'nonsense'), { nil: undefined }),
  maxRatioMemory: fc.option(fc.constantFrom('1', '1.05', '2'), { nil: undefined }),
  pool: fc.constantFrom('enforce', 'dry', 'none'),
  samples: fc.array(fc.record({ cpuShare: fc.double({ min: 0, max: 1.2, noNaN: true }), memShare: fc.double({ min: 0, max: 1, noNaN: true }), psi: fc.constantFrom(0, 0, 0, 5, 60) }), { minLength: 1, maxLength: 20 }),
  requestsShare: fc.double({ min: 0, max: 3, noNaN: true }),
  usageDrift: fc.double({ min: 0.8, max: 1.2, noNaN: true }),
  requestsDrift: fc.double({ min: 0.9, max: 1.1, noNaN: true }),
});

function kubeletWrite(name: string, object: NodeObject): Review {
  const r = JSON.parse(fixture) as Review;
  delete r.request.oldObject;
  r.request.uid = `${name}-${clock}`;
  r.request.name = name;
  r.request.userInfo = { username: `system:node:${name}` };
  r.request.object = object;
  return r;
}

async function write(gw: TestGateway, r: Review): Promise<NodeObject> {
  const res = await postHttps(gw, '/mutate/nodes', JSON.stringify(r));
  assert.equal(res.status, 200, res.body);
  const patch = (res.json() as { response: { patch?: string } }).response.patch;
  const ops = patch ? (JSON.parse(Buffer.from(patch, 'base64').toString()) as jsonpatch.Operation[]) : [];
  return jsonpatch.applyPatch(structuredClone(r.request.object), ops, true, false).newDocument;
}

describe('one decision path: the query API shows what the webhook writes', () => {
  let gw: TestGateway;
  const entry = (name: string, mode: 'Enforce' | 'DryRun', pool: string) =>
    toPolicyEntry({ metadata: { name }, spec: { nodeSelector: { matchLabels: { pool } }, mode, cpu: { maxRatio: 2.5 }, memory: { maxRatio: 1.5 }, hysteresis: 0.1 } });
  before(async () => {
    gw = await startTestGateway({ now: () => clock, policies: listPolicySource([entry('enforce', 'Enforce', 'enforce'), entry('dry', 'DryRun', 'dry')]) });
  });
  after(() => gw.close());

  it('for random nodes and histories: GetNode and ListNodeSummaries after a write equal the next write\'s allocatable', async () => {
    const calm = Array.from({ length: 10 }, () => ({ cpuShare: 0.05, memShare: 0.1, psi: 0 }));
    const cases = [
      // Known to reach what the query API used to ignore: a per-node cap, and a rise held back by hysteresis.
      { rawCpu: 8000, rawMemoryGi: 32, maxRatioCpu: '1.5', maxRatioMemory: '1.05', pool: 'enforce', samples: calm, requestsShare: 1, usageDrift: 1, requestsDrift: 1 },
      { rawCpu: 8000, rawMemoryGi: 32, maxRatioCpu: undefined, maxRatioMemory: undefined, pool: 'enforce', samples: calm.map((x) => ({ ...x, cpuShare: 0.5 })), requestsShare: 0.9, usageDrift: 1, requestsDrift: 1.03 },
      ...fc.sample(arbCase, 60),
    ];
    const client = queryClient(gw.ports.grpc);
    let hysteresisSeen = 0;
    let capByAnnotation = 0;
    try {
      for (const [i, c] of cases.entries()) {
        clock += 60_000;
        const name = `path-${i}`;
        const capacity = { cpu: c.rawCpu + 500, memory: (c.rawMemoryGi + 1) * GI };
        const raw = { cpu: formatMilli(c.rawCpu), memory: formatBytes(c.rawMemoryGi * GI) };
        const stream = 1000 + i;
        gw.store.attach(name, 'i', null, stream);
        c.samples.forEach((s, k) => storeSample(gw.store, name, stream, {
          seq: k + 1, timestampMs: clock - (c.samples.length - k) * 1000,
          cpuUsageMillicores: Math.round(s.cpuShare * c.rawCpu), memoryWorkingSetBytes: Math.round(s.memShare * c.rawMemoryGi * GI), rootCgroupMemoryWorkingSetBytes: 0, cpuManager: null,
          capacity: { cpuMillicores: capacity.cpu, memoryBytes: capacity.memory },
          pressure: { available: true, cpuSome: { avg10: s.psi, avg60: 0 }, cpuFull: { avg10: 0, avg60: 0 }, memorySome: { avg10: 0, avg60: 0 }, memoryFull: { avg10: 0, avg60: 0 }, cpuContention: null },
          requests: { cpuMillicores: Math.round(c.requestsShare * c.rawCpu), memoryBytes: Math.round(c.requestsShare * c.rawMemoryGi * GI), podCount: 3, known: true },
          podsIncluded: false, pods: [],
          summaries: [], onBeat: false, podNamesAsBefore: false,
        }, clock - 500));
        const annotations: Record<string, string> = {};
        if (c.maxRatioCpu) annotations['oversell.io/max-ratio-cpu'] = c.maxRatioCpu;
        if (c.maxRatioMemory) annotations['oversell.io/max-ratio-memory'] = c.maxRatioMemory;
        const object: NodeObject = {
          metadata: { name, labels: { 'oversell.io/enabled': 'true', pool: c.pool }, annotations },
          status: { allocatable: { ...raw, pods: '110' }, capacity: { cpu: formatMilli(capacity.cpu), memory: formatBytes(capacity.memory), pods: '110' } },
        };
        const first = await write(gw, kubeletWrite(name, object));

        // Usage and requests move a little before the next write: the previous grant then matters (hysteresis).
        const last = gw.store.get(name)!.latest!;
        storeSample(gw.store, name, stream, {
          ...last, seq: c.samples.length + 1, timestampMs: clock,
          cpuUsageMillicores: Math.round(last.cpuUsageMillicores * c.usageDrift),
          requests: { ...last.requests!, cpuMillicores: Math.round(last.requests!.cpuMillicores * c.requestsDrift) },
        }, clock);

        const shown = (await getNode(client, name)).decision;
        const summary = rowsOfSummaries(await new Promise<NodeSummaries__Output>((resolve, reject) =>
          client.ListNodeSummaries({ labelSelector: '', policy: '' }, (err, res) => (err || !res ? reject(err) : resolve(res)))))
          .find((r) => r.name === name)?.decision;

        // The kubelet's next write: its raw values over what the last write left.
        const next = structuredClone(first);
        next.status.allocatable = { ...next.status.allocatable, ...raw };
        const written = await write(gw, kubeletWrite(name, next));
        const wrote = { cpuMillicores: Number(milliValue(parseQuantity(written.status.allocatable.cpu!))), memoryBytes: Number(value(parseQuantity(written.status.allocatable.memory!))) };

        assert.ok(shown, `${name}: the query API shows a decision`);
        assert.deepEqual({ cpuMillicores: shown.allocatable?.cpuMillicores, memoryBytes: shown.allocatable?.memoryBytes }, wrote, `${name} (${JSON.stringify(c)}): GetNode shows what the next write gets`);
        assert.deepEqual({ cpuMillicores: summary?.cpuMillicores, memoryBytes: summary?.memoryBytes }, wrote, `${name}: ListNodeSummaries too`);
        if (shown.cpuBound === 'hysteresis' || shown.memoryBound === 'hysteresis') hysteresisSeen += 1;
        const policyCap = c.pool === 'enforce' ? 2.5 : 1;
        if (c.maxRatioCpu && Number(c.maxRatioCpu) < policyCap && shown.cpuBound === 'cap') capByAnnotation += 1;
      }
    } finally {
      client.close();
    }
    // The generator must reach the inputs the query API used to ignore.
    assert.ok(capByAnnotation > 0, 'some grant capped by a node annotation');
    assert.ok(hysteresisSeen > 0, 'some grant held by hysteresis');
  });
});
