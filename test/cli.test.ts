// The CLI: rendering against golden files (UPDATE_GOLDEN=1 rewrites them after a
// deliberate change), and (from source) no token in plain text. The built
// binary against a real gateway is test/bin/cli.test.ts.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import type { NodeStatus__Output } from '../proto/gen/oversell/v1/NodeStatus.js';
import type { PolicyInfo__Output } from '../proto/gen/oversell/v1/PolicyInfo.js';
import type { RiskBudgetState__Output } from '../proto/gen/oversell/v1/RiskBudgetState.js';
import { renderDescribe, renderPolicies, renderTop, rowOfStatus, sortNodes } from '../cli/render.js';
import { plaintextTokenProblem } from '../cli/connect.js';
import { startTestGateway, type TestGateway } from './helpers/gateway.js';

const GI = 1024 ** 3;
const golden = (name: string) => fileURLToPath(new URL(`./fixtures/cli/${name}`, import.meta.url));

function assertGolden(name: string, actual: string): void {
  const file = golden(name);
  if (process.env.UPDATE_GOLDEN === '1' || !existsSync(file)) writeFileSync(file, actual);
  assert.equal(actual, readFileSync(file, 'utf8'), `${name} differs from its golden file (UPDATE_GOLDEN=1 to accept)`);
}

function node(name: string, over: { cpu: number; mem: number; raw: [number, number]; alloc: [number, number]; bound: [string, string]; age: number; psi?: [number, number]; connected?: boolean; policy?: string; dryRun?: boolean; budget?: RiskBudgetState__Output }): NodeStatus__Output {
  const [cpuBound, memoryBound] = over.bound;
  return {
    name,
    connected: over.connected ?? true,
    instanceId: 'agent-1',
    host: { cpuModel: 'Intel Xeon', logicalCpus: 8, memoryTotalBytes: 32 * GI, os: 'Debian 12', kernel: '6.1.0', cgroupMode: 'v2', cgroupDriver: 'systemd' },
    latest: {
      seq: 120, timestampMs: 0, cpuUsageMillicores: over.cpu, memoryWorkingSetBytes: over.mem, rootCgroupMemoryWorkingSetBytes: 0, cpuManager: null,
      capacity: { cpuMillicores: 8000, memoryBytes: 32 * GI },
      pressure: { available: true, cpuSome: { avg10: over.psi?.[0] ?? 0, avg60: 0 }, cpuFull: { avg10: 0, avg60: 0 }, memorySome: { avg10: over.psi?.[1] ?? 0, avg60: 0 }, memoryFull: { avg10: 0, avg60: 0 }, cpuContention: null },
      requests: { cpuMillicores: 6000, memoryBytes: 20 * GI, podCount: 12, known: true },
      podsIncluded: false, pods: [],
      summaries: [], onBeat: false, podNamesAsBefore: false,
    },
    receivedAtMs: 0,
    ageMs: over.age,
    window: { samples: 60, spanMs: 59_000, cpuP95Millicores: over.cpu, memoryMaxBytes: over.mem },
    rawAllocatable: { cpuMillicores: over.raw[0], memoryBytes: over.raw[1] },
    rawAllocatableKnown: true,
    decision: {
      allocatable: { cpuMillicores: over.dryRun ? over.raw[0] : over.alloc[0], memoryBytes: over.dryRun ? over.raw[1] : over.alloc[1] },
      granted: { cpuMillicores: over.alloc[0], memoryBytes: over.alloc[1] },
      floor: { cpuMillicores: over.raw[0], memoryBytes: over.raw[1] },
      cap: { cpuMillicores: over.raw[0] * 2, memoryBytes: Math.floor(over.raw[1] * 1.25) },
      usage: { cpuMillicores: over.cpu, memoryBytes: over.mem },
      cpuBound,
      memoryBound,
      reason: `policy ${over.policy ?? 'default'}; cpu ${over.raw[0]}m->${over.alloc[0]}m (${cpuBound})`,
      dryRun: over.dryRun ?? false,
      budget: over.budget ?? null,
    },
    labels: { pool: 'batch' },
    policy: over.policy ?? 'default',
  };
}

const NODES = [
  node('worker-b', { cpu: 7100, mem: 28 * GI, raw: [7910, 30 * GI], alloc: [7910, 30 * GI], bound: ['pressure', 'pressure'], age: 800, psi: [55, 12] }),
  node('worker-a', { cpu: 600, mem: 6 * GI, raw: [7910, 30 * GI], alloc: [15820, 37.5 * GI], bound: ['cap', 'cap'], age: 1200 }),
  node('worker-c', { cpu: 300, mem: 2 * GI, raw: [3910, 14 * GI], alloc: [3910, 14 * GI], bound: ['stale', 'stale'], age: 45_000, connected: false }),
  node('worker-d', { cpu: 900, mem: 4 * GI, raw: [7910, 30 * GI], alloc: [12000, 33 * GI], bound: ['headroom', 'headroom'], age: 400, policy: 'trial', dryRun: true }),
];

const ROWS = NODES.map(rowOfStatus);

describe('CLI rendering (golden files)', () => {
  it('top nodes, sorted by name', () => assertGolden('top.txt', renderTop(sortNodes(ROWS, 'name'), { color: false })));
  it('top nodes -o wide, sorted by cpu', () => assertGolden('top-wide.txt', renderTop(sortNodes(ROWS, 'cpu'), { color: false }, true)));
  it('colours only when asked: green for inflated, red for pressure and stale', () => {
    const colored = renderTop(sortNodes(ROWS, 'name'), { color: true });
    assert.match(colored, /\x1b\[32m7910m->15820m\x1b\[0m/);
    assert.match(colored, /\x1b\[31m55\/12\x1b\[0m/);
    assert.match(colored, /\x1b\[31m45s\x1b\[0m/);
    assert.doesNotMatch(renderTop(ROWS, { color: false }), /\x1b/);
  });
  it('describe node', () => assertGolden('describe-worker-a.txt', renderDescribe(NODES[1]!, { color: false })));
  it('describe node whose pool spent its CPU risk budget (and not its memory one)', () => {
    const budget = { memoryEnabled: true, memoryOverloads: 0, memorySpentUntilMs: 0, cpuEnabled: true, cpuObservedSeconds: 36_000, cpuOverSeconds: 450, cpuSpentPastShare: 0.01, cpuSpent: true };
    const text = renderDescribe(node('worker-e', { cpu: 7000, mem: 8 * GI, raw: [7910, 30 * GI], alloc: [7910, 37.5 * GI], bound: ['budget', 'cap'], age: 900, budget }), { color: false });
    assertGolden('describe-worker-e.txt', text);
    assert.match(text, /CPU: +1\.250 % of 36000 node-seconds over capacity; spent past 1\.000 %: spent, grants held at 1x/);
    assert.match(text, /Memory: +0 pod\(s\) hurt for lack of memory: not spent/);
    assert.doesNotMatch(renderDescribe(NODES[1]!, { color: false }), /Risk budget/, 'no budget state, no section');
  });
  it('describe node in DryRun', () => assertGolden('describe-worker-d.txt', renderDescribe(NODES[3]!, { color: false })));
  it('get policies', () => {
    const policies: PolicyInfo__Output[] = [
      { name: 'default', priority: -100, mode: 'Enforce', valid: true, error: '', matchedNodes: 3, nodeSelector: 'oversell.io/enabled=true', cpuMaxRatio: 2, memoryMaxRatio: 1.25, source: 'crd' },
      { name: 'broken', priority: 10, mode: '', valid: false, error: 'spec.cpu.maxRatio must be a number in [1, 100], got 0', matchedNodes: 1, nodeSelector: 'pool=gpu', cpuMaxRatio: 0, memoryMaxRatio: 0, source: 'crd' },
    ];
    assertGolden('policies.txt', renderPolicies(policies, { color: false }));
  });
});

describe('the CLI never sends a token in plain text', () => {
  const where = { target: '10.0.0.1:50051', namespace: 'oversell', tokenFrom: 'flag' as const };
  it('refuses a token without a CA, says how to fix it, and lets a token over TLS or no token through', () => {
    assert.match(plaintextTokenProblem({ token: 't' }, where) ?? '', /^refusing to send the bearer token \(--token \/ OVERSELL_TOKEN\) to 10\.0\.0\.1:50051 in plain text: pass --ca-file .*kubectl -n oversell get configmap oversell-gateway-ca .*--token ''/);
    assert.match(plaintextTokenProblem({ token: 't' }, { ...where, tokenFrom: 'kubeconfig' }) ?? '', /the kubeconfig user's token/);
    assert.equal(plaintextTokenProblem({ token: 't', ca: Buffer.from('pem') }, where), undefined);
    assert.equal(plaintextTokenProblem({}, where), undefined);
  });

  describe('the binary (from source)', () => {
    const main = fileURLToPath(new URL('../cli/main.ts', import.meta.url));
    const work = mkdtempSync(join(tmpdir(), 'oversell-cli-'));
    let plain: TestGateway;
    let tls: TestGateway;
    const run = (args: string[], env: NodeJS.ProcessEnv = {}) =>
      new Promise<{ status: number; stdout: string; stderr: string }>((resolve) => {
        execFile(process.execPath, ['--import', 'tsx', main, ...args], { encoding: 'utf8', timeout: 30_000, env: { ...process.env, OVERSELL_TOKEN: '', OVERSELL_CA_FILE: '', ...env } }, (err, stdout, stderr) =>
          resolve({ status: err ? Number((err as { code?: number }).code ?? 1) : 0, stdout, stderr }),
        );
      });
    before(async () => {
      [plain, tls] = await Promise.all([startTestGateway(), startTestGateway({ grpcTls: true })]);
      writeFileSync(join(work, 'ca.crt'), tls.ca);
    });
    after(async () => {
      await Promise.all([plain?.close(), tls?.close()]);
      rmSync(work, { recursive: true, force: true });
    });

    it('--token or OVERSELL_TOKEN to a plain-text address: exit 1 with the fix, and no connection is made', async () => {
      let connections = 0;
      const listener = createServer((socket) => {
        connections += 1;
        socket.destroy();
      });
      await new Promise<void>((resolve) => listener.listen(0, '127.0.0.1', resolve));
      const address = `127.0.0.1:${(listener.address() as AddressInfo).port}`;
      try {
        const flag = await run(['--address', address, '--token', 'secret', 'get', 'policies']);
        assert.equal(flag.status, 1);
        assert.match(flag.stderr, /^error: refusing to send the bearer token \(--token \/ OVERSELL_TOKEN\) to 127\.0\.0\.1:\d+ in plain text: pass --ca-file/);
        const env = await run(['--address', address, 'get', 'policies'], { OVERSELL_TOKEN: 'secret' });
        assert.equal(env.status, 1);
        assert.match(env.stderr, /refusing to send the bearer token/);
        assert.equal(connections, 0);
      } finally {
        listener.close();
      }
    });

    it('the same token over TLS (--ca-file), and no token in plain text, are fine', async () => {
      const overTls = await run(['--address', `127.0.0.1:${tls.ports.grpc}`, '--ca-file', join(work, 'ca.crt'), '--server-name', 'localhost', '--token', 'secret', 'get', 'policies']);
      assert.equal(overTls.status, 0, overTls.stderr);
      assert.match(overTls.stdout, /^flags\s/m);
      const none = await run(['--address', `127.0.0.1:${plain.ports.grpc}`, '--token', '', 'get', 'policies']);
      assert.equal(none.status, 0, none.stderr);
    });
  });
});
