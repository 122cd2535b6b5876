// The built `oversell` binary (dist/cli/main.js: npm run build first) against a
// real gateway: output formats, and errors that say what to do.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { after, before, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import type { NodeStatus__Output } from '../../proto/gen/oversell/v1/NodeStatus.js';
import type { Sample__Output } from '../../proto/gen/oversell/v1/Sample.js';
import { startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { storeSample } from '../helpers/store-sample.js';

const GI = 1024 ** 3;
/** An 8-core node using 600m of 6000m requested. */
const SAMPLE: Sample__Output = {
  seq: 120, timestampMs: 0, cpuUsageMillicores: 600, memoryWorkingSetBytes: 6 * GI, rootCgroupMemoryWorkingSetBytes: 0, cpuManager: null,
  capacity: { cpuMillicores: 8000, memoryBytes: 32 * GI },
  pressure: { available: true, cpuSome: { avg10: 0, avg60: 0 }, cpuFull: { avg10: 0, avg60: 0 }, memorySome: { avg10: 0, avg60: 0 }, memoryFull: { avg10: 0, avg60: 0 }, cpuContention: null },
  requests: { cpuMillicores: 6000, memoryBytes: 20 * GI, podCount: 12, known: true },
  podsIncluded: false, pods: [],
  summaries: [], onBeat: false, podNamesAsBefore: false,
};

describe('the oversell binary against a real gateway', () => {
  const bin = fileURLToPath(new URL('../../dist/cli/main.js', import.meta.url));
  let gw: TestGateway;
  // Asynchronous: the gateway answering it lives in this process.
  const run = (args: string[], env: NodeJS.ProcessEnv = process.env) =>
    new Promise<{ status: number; stdout: string; stderr: string }>((resolve) => {
      execFile(process.execPath, [bin, ...args], { encoding: 'utf8', timeout: 20_000, env }, (err, stdout, stderr) =>
        resolve({ status: err ? Number((err as { code?: number }).code ?? 1) : 0, stdout, stderr }),
      );
    });
  const cli = (...args: string[]) => run(['--address', `127.0.0.1:${gw.ports.grpc}`, ...args]);
  before(async () => {
    gw = await startTestGateway();
    gw.store.attach('n1', 'i', null, 1);
    storeSample(gw.store, 'n1', 1, { ...SAMPLE, seq: 1, timestampMs: Date.now() }, Date.now());
    gw.store.observe('n1', { raw: { cpuMillicores: 7910n, memoryBytes: 30n * 2n ** 30n }, labels: { pool: 'batch' }, nodeMaxRatio: {}, lastGrant: undefined }, Date.now());
  });
  after(() => gw.close());

  it('top -o json is the query API\'s answer', async () => {
    const r = await cli('top', '-o', 'json');
    assert.equal(r.status, 0, r.stderr);
    const out = JSON.parse(r.stdout) as { nodes: NodeStatus__Output[] };
    assert.equal(out.nodes[0]?.name, 'n1');
    assert.equal(out.nodes[0]?.decision?.allocatable?.cpuMillicores, 15820);
  });

  it('top prints a table (no colour when not a terminal)', async () => {
    const r = await cli('top', 'nodes', '-l', 'pool=batch');
    assert.equal(r.status, 0, r.stderr);
    assert.match(r.stdout, /^NAME\s+CPU\(cores\)/);
    assert.match(r.stdout, /n1\s+600m\s+8%/);
    assert.doesNotMatch(r.stdout, /\x1b/);
  });

  it('describe node -o yaml, and get policies', async () => {
    const d = await cli('describe', 'node', 'n1', '-o', 'yaml');
    assert.equal(d.status, 0, d.stderr);
    assert.match(d.stdout, /^name: n1$/m);
    const p = await cli('get', 'policies');
    assert.match(p.stdout, /^flags\s+0\s+Enforce\s+4x\s+3x\s+1\s/m);
  });

  it('errors say what to do, with exit code 1', async () => {
    const missing = await cli('describe', 'node', 'nope');
    assert.equal(missing.status, 1);
    assert.match(missing.stderr, /error: no agent has reported for node "nope"/);
    const bad = await cli('top', '-l', 'a in (b');
    assert.equal(bad.status, 1);
    assert.match(bad.stderr, /unbalanced parentheses/);
    const away = await run(['--address', '127.0.0.1:1', 'top']);
    assert.equal(away.status, 1);
    assert.match(away.stderr, /cannot reach the gateway at 127\.0\.0\.1:1.*Is it running\?/);
    const noCluster = await run(['top'], { ...process.env, KUBECONFIG: '/nonexistent', OVERSELL_ADDRESS: '' });
    assert.equal(noCluster.status, 1);
    assert.match(noCluster.stderr, /--address/);
  });

  it('simulate runs from the build (the simulator and the decision it imports are in dist/)', async () => {
    const r = await run(['simulate', '--nodes', '3', '--hours', '0.2', '--no-busier', '--output', 'json']);
    assert.equal(r.status, 0, r.stderr);
    const out = JSON.parse(r.stdout) as { policies: { name: string }[] };
    assert.deepEqual(out.policies.map((p) => p.name), ['none', 'static', 'seaiii', 'katalyst', 'koordinator', 'crane', 'peak-predictor', 'limit', 'oversell']);
  });
});
