// The package bins as an operator runs them: flags, env, --help, exit codes.
// Runs dist/: `npm run build` first (npm test does).
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { X509Certificate } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { cpus, release, tmpdir, totalmem } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { Agent } from 'node:https';
import { postHttps, startTestGateway } from '../helpers/gateway.js';
import { eventually } from '../helpers/grpc.js';

const fixtures = fileURLToPath(new URL('../fixtures', import.meta.url));
const bin = (name: string) => fileURLToPath(new URL(`../../dist/${name}/main.js`, import.meta.url));
const work = mkdtempSync(join(tmpdir(), 'oversell-bin-'));
after(() => rmSync(work, { recursive: true, force: true }));

interface ServingPorts { metrics: number; webhook: number; grpc: number; agent: number }

/** The gateway binary on 127.0.0.1 from environment variables, the kernel picking every port; resolves once its "gateway serving" line names them. */
async function gatewayBin(tlsDir: string, args: string[] = [], env: Record<string, string> = {}) {
  const child = spawn(process.execPath, [bin('gateway'), ...args], {
    env: { ...process.env, OVERSELL_BIND_ADDRESS: '127.0.0.1', OVERSELL_WEBHOOK_PORT: '0', OVERSELL_GRPC_PORT: '0', OVERSELL_AGENT_PORT: '0', OVERSELL_METRICS_PORT: '0', OVERSELL_TLS_DIR: tlsDir, ...env },
  });
  let out = '';
  child.stdout.on('data', (c: Buffer) => (out += c));
  const exited = new Promise<number | null>((resolve) => child.on('exit', resolve));
  try {
    const ports = await eventually(() => {
      const line = out.split('\n').find((l) => l.includes('gateway serving'));
      return line ? (JSON.parse(line) as ServingPorts) : undefined;
    }, 15_000, 'the "gateway serving" line');
    return { child, ports, exited, output: () => out };
  } catch (err) {
    child.kill('SIGKILL');
    throw new Error(`${(err as Error).message}; its output: ${out}`);
  }
}

describe('binaries', () => {
  for (const name of ['gateway', 'agent']) {
    it(`oversell-${name} --help lists every flag with its environment variable`, () => {
      const r = spawnSync(process.execPath, [bin(name), '--help'], { encoding: 'utf8' });
      assert.equal(r.status, 0, r.stderr);
      assert.match(r.stdout, new RegExp(`Usage: oversell-${name}`));
      const flags = [...r.stdout.matchAll(/^ {2}(--[a-z-]+)/gm)].map((m) => m[1]).filter((f) => f !== '--help');
      assert.ok(flags.length >= 5);
      const envs = [...r.stdout.matchAll(/env:\s+([A-Z_]+)/g)].map((m) => m[1]);
      assert.equal(envs.length, flags.length, `every flag has an env var:\n${r.stdout}`);
    });
  }

  it('the agent refuses a bad --cgroup-root with exit 2 and says what to fix', () => {
    const r = spawnSync(process.execPath, [bin('agent'), '--cgroup-root', work], { encoding: 'utf8', timeout: 20_000 });
    assert.equal(r.status, 2);
    assert.match(r.stdout + r.stderr, /--cgroup-root/);
  });

  it('a bad duration is refused before anything starts', () => {
    const r = spawnSync(process.execPath, [bin('gateway'), '--stale-after', 'soon'], { encoding: 'utf8' });
    assert.notEqual(r.status, 0);
    assert.match(r.stderr, /not a duration/);
  });

  it('a port that is not a number is refused before anything starts', () => {
    for (const bad of ['', 'next']) {
      const r = spawnSync(process.execPath, [bin('gateway'), '--agent-port', bad], { encoding: 'utf8' });
      assert.notEqual(r.status, 0);
      assert.match(r.stderr, /--agent-port.*is not a number/);
    }
  });

  it('the gateway starts from environment variables alone, writes its CA, serves (agents on the ingest thread), and stops on SIGTERM', async () => {
    const tlsDir = join(work, 'tls');
    const { child, ports, exited, output } = await gatewayBin(tlsDir);
    const ready = await fetch(`http://127.0.0.1:${ports.metrics}/readyz`);
    assert.equal(ready.status, 200);
    assert.ok(ports.agent > 0 && ports.agent !== ports.grpc, `an agent port of its own: ${JSON.stringify(ports)}`);
    const ca = new X509Certificate(readFileSync(join(tlsDir, 'ca.crt')));
    const leaf = new X509Certificate(readFileSync(join(tlsDir, 'tls.crt')));
    assert.ok(leaf.verify(ca.publicKey), 'serving certificate is signed by the CA');
    assert.ok(ca.ca);
    child.kill('SIGTERM');
    assert.equal(await exited, 0);
    // A clean stop logs no error (the ingest thread's end once did).
    assert.doesNotMatch(output(), /"level":(50|60)/);
  });

  it('on SIGTERM with --shutdown-drain, the gateway fails /readyz, answers reviews with Connection: close until the drain ends, then exits 0', async () => {
    const tlsDir = join(work, 'tls-drain');
    const { child, ports, exited, output } = await gatewayBin(tlsDir, ['--shutdown-drain', '2s']);
    try {
      const gw = { ports: { webhook: ports.webhook }, ca: readFileSync(join(tlsDir, 'ca.crt'), 'utf8') } as Parameters<typeof postHttps>[0];
      const review = readFileSync(join(fixtures, 'admission', 'node-status-update.json'), 'utf8');
      const keepAlive = new Agent({ keepAlive: true });
      const before = await postHttps(gw, '/mutate/nodes', review, undefined, keepAlive);
      assert.equal(before.status, 200);
      assert.notEqual(before.headers.connection, 'close', 'kept alive while serving');
      const termAt = Date.now();
      child.kill('SIGTERM');
      const readyz = await eventually(async () => {
        const r = await fetch(`http://127.0.0.1:${ports.metrics}/readyz`);
        return r.status === 503 ? r.text() : undefined;
      }, 1500, '/readyz failing once SIGTERM arrives');
      assert.match(readyz, /shutting down: draining reviews to the other replicas/);
      const during = await postHttps(gw, '/mutate/nodes', review, undefined, keepAlive);
      assert.equal(during.status, 200, 'a review during the drain is answered');
      assert.equal((during.json() as { response: { uid: string } }).response.uid, (JSON.parse(review) as { request: { uid: string } }).request.uid);
      assert.equal(during.headers.connection, 'close', 'and its connection closed, so the caller dials the Service again');
      keepAlive.destroy();
      assert.equal(await exited, 0);
      const tookMs = Date.now() - termAt;
      assert.ok(tookMs >= 2000 && tookMs < 12_000, `stopped ${tookMs} ms after SIGTERM: after the 2 s drain`);
      assert.doesNotMatch(output(), /"level":(50|60)/);
    } finally {
      child.kill('SIGKILL');
    }
  });

  it('a second SIGTERM during the drain stops the gateway at once (exit 1)', async () => {
    const { child, exited, output } = await gatewayBin(join(work, 'tls-twice'), ['--shutdown-drain', '15s']);
    try {
      child.kill('SIGTERM');
      await eventually(() => output().includes('"msg":"draining') || undefined, 3000, 'the drain begun');
      const againAt = Date.now();
      child.kill('SIGTERM');
      assert.equal(await exited, 1);
      assert.ok(Date.now() - againAt < 3000, `exited ${Date.now() - againAt} ms after the second signal, not after the 15 s drain`);
    } finally {
      child.kill('SIGKILL');
    }
  });

  it('the agent reports this machine\'s host facts, read by systeminformation in a child process, and stops on SIGTERM', async () => {
    const gw = await startTestGateway();
    const node = 'bin-host-facts';
    const child = spawn(process.execPath, [bin('agent'), '--node-name', node, '--gateway', `127.0.0.1:${gw.ports.agent}`,
      '--cgroup-root', join(fixtures, 'cgroup', 'v2-systemd'), '--metrics-address', '', '--log-level', 'warn']);
    let out = '';
    child.stdout.on('data', (c: Buffer) => (out += c));
    child.stderr.on('data', (c: Buffer) => (out += c));
    try {
      const host = await eventually(() => gw.store.get(node)?.host ?? undefined, 20_000, `host facts at the gateway (agent output: ${out})`);
      assert.equal(host.logicalCpus, cpus().length);
      assert.equal(host.memoryTotalBytes, totalmem());
      assert.equal(host.kernel, release());
      assert.equal(host.cgroupMode, 'v2');
      assert.equal(host.cgroupDriver, 'systemd');
      assert.doesNotMatch(out, /could not read host facts/);
      child.kill('SIGTERM');
      assert.equal(await new Promise((r) => child.on('exit', r)), 0);
    } finally {
      child.kill('SIGKILL');
      await gw.close();
    }
  });
});
