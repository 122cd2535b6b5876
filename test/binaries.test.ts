// The package bins as an operator runs them: flags, env, --help, exit codes.
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { X509Certificate } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { cpus, release, tmpdir, totalmem } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { ensureServingCertificate } from '../gateway/tls/self-signed.js';
import { Backoff } from '../lib/backoff.js';
import { TokenBucket } from '../lib/token-bucket.js';
import { ChangeLog } from '../gateway/admit/webhook-plugin.js';
import type { Logger } from '../lib/log.js';
import { parseDuration } from '../lib/duration.js';
import { startTestGateway } from './helpers/gateway.js';
import { eventually } from './helpers/grpc.js';

const fixtures = fileURLToPath(new URL('./fixtures', import.meta.url));
const bin = (name: string) => fileURLToPath(new URL(`../dist/${name}/main.js`, import.meta.url));
const work = mkdtempSync(join(tmpdir(), 'oversell-bin-'));
after(() => rmSync(work, { recursive: true, force: true }));

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

  it('the gateway starts from environment variables alone, writes its CA, serves (agents on the ingest thread too), and stops on SIGTERM', async () => {
    const tlsDir = join(work, 'tls');
    const child = spawn(process.execPath, [bin('gateway')], {
      env: { ...process.env, OVERSELL_BIND_ADDRESS: '127.0.0.1', OVERSELL_WEBHOOK_PORT: '0', OVERSELL_GRPC_PORT: '0', OVERSELL_AGENT_PORT: '0', OVERSELL_METRICS_PORT: '0', OVERSELL_TLS_DIR: tlsDir },
    });
    let out = '';
    child.stdout.on('data', (c: Buffer) => (out += c));
    const ports = await new Promise<{ metrics: number; webhook: number; grpc: number; agent?: number }>((resolve, reject) => {
      const t = setTimeout(() => reject(new Error(`no "gateway serving" line: ${out}`)), 15_000);
      child.stdout.on('data', () => {
        const line = out.split('\n').find((l) => l.includes('gateway serving'));
        if (line) {
          clearTimeout(t);
          resolve(JSON.parse(line) as { metrics: number; webhook: number; grpc: number; agent?: number });
        }
      });
    });
    const ready = await fetch(`http://127.0.0.1:${ports.metrics}/readyz`);
    assert.equal(ready.status, 200);
    assert.ok(ports.agent && ports.agent !== ports.grpc, `an agent port of its own: ${JSON.stringify(ports)}`);
    const ca = new X509Certificate(readFileSync(join(tlsDir, 'ca.crt')));
    const leaf = new X509Certificate(readFileSync(join(tlsDir, 'tls.crt')));
    assert.ok(leaf.verify(ca.publicKey), 'serving certificate is signed by the CA');
    assert.ok(ca.ca);
    child.kill('SIGTERM');
    const code = await new Promise((r) => child.on('exit', r));
    assert.equal(code, 0);
    // A clean stop logs no error (the ingest thread's end once did).
    assert.doesNotMatch(out, /"level":(50|60)/);
  });

  it('the agent reports this machine\'s host facts, read by systeminformation in a child process, and stops on SIGTERM', async () => {
    const gw = await startTestGateway();
    const node = 'bin-host-facts';
    const child = spawn(process.execPath, [bin('agent'), '--node-name', node, '--gateway', `127.0.0.1:${gw.ports.grpc}`,
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

describe('self-managed certificates', () => {
  it('creates once, reuses while valid, re-issues when the hosts change', async () => {
    const dir = join(work, 'certs');
    const a = await ensureServingCertificate(dir, ['localhost', '127.0.0.1', 'oversell-gateway.oversell.svc']);
    assert.equal(a.created, true);
    const leaf = new X509Certificate(a.cert);
    assert.match(leaf.subjectAltName ?? '', /DNS:oversell-gateway\.oversell\.svc/);
    assert.match(leaf.subjectAltName ?? '', /IP Address:127\.0\.0\.1/);
    const b = await ensureServingCertificate(dir, ['localhost', '127.0.0.1', 'oversell-gateway.oversell.svc']);
    assert.equal(b.created, false);
    assert.equal(b.cert, a.cert);
    const c = await ensureServingCertificate(dir, ['localhost', 'other.example']);
    assert.equal(c.created, true);
    assert.notEqual(c.cert, a.cert);
  });
});

describe('small pieces', () => {
  it('backoff grows exponentially to the cap with full jitter, and resets', () => {
    const b = new Backoff({ initialMs: 100, maxMs: 1000 }, () => 1);
    assert.deepEqual([b.next(), b.next(), b.next(), b.next(), b.next()], [100, 200, 400, 800, 1000]);
    b.reset();
    assert.equal(b.next(), 100);
    const jittered = new Backoff({ initialMs: 100, maxMs: 1000 }, () => 0.5);
    assert.equal(jittered.next(), 50);
  });

  it('token bucket: burst, then the steady rate', () => {
    let t = 0;
    const b = new TokenBucket(2, 3, () => t);
    assert.deepEqual([b.take(), b.take(), b.take(), b.take()], [true, true, true, false]);
    t = 499;
    assert.equal(b.take(), false);
    t = 500;
    assert.equal(b.take(), true);
    t = 10_000;
    assert.deepEqual([b.take(), b.take(), b.take(), b.take()], [true, true, true, false]);
  });

  it('durations', () => {
    assert.equal(parseDuration('40s'), 40_000);
    assert.equal(parseDuration('1m30s'), 90_000);
    assert.equal(parseDuration('500ms'), 500);
    assert.equal(parseDuration('250'), 250);
    assert.throws(() => parseDuration('40 s'), /not a duration/);
    assert.throws(() => parseDuration('s'), /not a duration/);
  });
});

describe('change log', () => {
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
