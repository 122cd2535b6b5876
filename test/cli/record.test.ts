// `oversell record` against a real gateway (in-process, fed like an agent
// would), and the trace it writes replayed by `oversell simulate --trace`.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import type { NodeStatus__Output } from '../../proto/gen/oversell/v1/NodeStatus.js';
import type { Sample__Output } from '../../proto/gen/oversell/v1/Sample.js';
import { record, traceNodes } from '../../cli/record.js';
import { parseTrace } from '../../sim/trace.js';
import { startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { storeSample } from '../helpers/store-sample.js';

const GiB = 2 ** 30;
const main = fileURLToPath(new URL('../../cli/main.ts', import.meta.url));
const work = mkdtempSync(join(tmpdir(), 'oversell-record-'));

const sample = (seq: number, cpu: number, known = true): Sample__Output => ({
  seq, timestampMs: Date.now(), cpuUsageMillicores: cpu, memoryWorkingSetBytes: 6 * GiB, rootCgroupMemoryWorkingSetBytes: 0, cpuManager: null,
  capacity: { cpuMillicores: 8000, memoryBytes: 32 * GiB }, pressure: null,
  requests: { cpuMillicores: 3000, memoryBytes: 12 * GiB, podCount: 5, known }, summaries: [], onBeat: false, podNamesAsBefore: false, podsIncluded: false, pods: [],
});

function run(...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, ['--import', 'tsx', main, ...args], { encoding: 'utf8', timeout: 60_000, env: { ...process.env, OVERSELL_TOKEN: '', OVERSELL_CA_FILE: '' } }, (err, stdout, stderr) =>
      resolve({ code: err ? Number((err as { code?: number }).code ?? 1) : 0, stdout, stderr }),
    );
  });
}

describe('oversell record', () => {
  let gw: TestGateway;
  before(async () => {
    gw = await startTestGateway();
    let stream = 10;
    for (const [name, cpu] of [['n-1', 1200], ['n-2', 2500]] as const) {
      stream += 1;
      gw.store.attach(name, 'i', null, stream);
      storeSample(gw.store, name, stream, sample(1, cpu), Date.now());
      gw.store.observe(name, { raw: { cpuMillicores: 7500n, memoryBytes: 30n * BigInt(GiB) }, labels: { pool: 'a' }, nodeMaxRatio: {}, lastGrant: undefined }, Date.now());
    }
    // An agent with no raw allocatable established yet: not recordable.
    gw.store.attach('n-3', 'i', null, 99);
    storeSample(gw.store, 'n-3', 99, sample(1, 100), Date.now());
  });
  after(async () => {
    await gw?.close();
    rmSync(work, { recursive: true, force: true });
  });

  it('writes a trace simulate replays: the recorded nodes, their shapes and load', async () => {
    const file = join(work, 'trace.jsonl');
    const rec = await run('--address', `127.0.0.1:${gw.ports.grpc}`, 'record', '--interval', '200ms', '--duration', '600ms', '--out', file);
    assert.equal(rec.code, 0, rec.stderr);
    assert.match(rec.stderr, /^poll 1: 2 nodes, 1 without a sample or raw allocatable left out$/m);
    assert.match(rec.stderr, /wrote .*trace\.jsonl: 3 polls/);
    const trace = parseTrace(readFileSync(file, 'utf8'));
    assert.equal(trace.intervalSeconds, 0.2);
    assert.equal(trace.polls.length, 3);
    assert.deepEqual(trace.polls[0]!.nodes[1], {
      name: 'n-2', capacity: { cpu: 8000, memory: 32 * GiB }, raw: { cpu: 7500, memory: 30 * GiB }, usage: { cpu: 2500, memory: 6 * GiB }, requests: { cpu: 3000, memory: 12 * GiB },
    });

    const sim = await run('simulate', '--trace', file, '--hours', '0.1', '--no-busier', '--output', 'json');
    assert.equal(sim.code, 0, sim.stderr);
    const out = JSON.parse(sim.stdout) as { scenario: { nodes: number }; trace: { nodes: string[] }; policies: { name: string; podsPlaced: number }[] };
    assert.equal(out.scenario.nodes, 2);
    assert.deepEqual(out.trace.nodes, ['n-1', 'n-2']);
    assert.deepEqual(out.policies.map((p) => p.name), ['none', 'static', 'seaiii', 'katalyst', 'koordinator', 'crane', 'peak-predictor', 'limit', 'oversell']);
    const refused = await run('simulate', '--trace', file, '--nodes', '5');
    assert.equal(refused.code, 2);
    assert.match(refused.stderr, /--nodes and --trace/);
  });

  it('keeps nodes with unknown requests, their requests as none, and stops when told', async () => {
    const status = (name: string, known: boolean) => ({ name, latest: sample(1, 100, known), rawAllocatableKnown: true, rawAllocatable: { cpuMillicores: 7500, memoryBytes: 30 * GiB } }) as unknown as NodeStatus__Output;
    const r = traceNodes([status('b', false), status('a', true)]);
    assert.deepEqual(r.nodes.map((n) => [n.name, n.requests.cpu]), [['a', 3000], ['b', 0]]);
    assert.equal(r.requestsUnknown, 1);
    let clock = 0;
    let calls = 0;
    const lines: string[] = [];
    const polls = await record(async () => [status('a', true)], { intervalMs: 1, durationMs: 10_000, out: join(work, 'stopped.jsonl') }, (l) => lines.push(l), () => ++calls > 2, () => (clock += 5));
    assert.equal(polls, 2);
    assert.equal(parseTrace(readFileSync(join(work, 'stopped.jsonl'), 'utf8')).polls.length, 2);
  });
});
