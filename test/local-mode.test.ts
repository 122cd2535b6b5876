// Local mode only on purpose (issue 19, invariant 12): no authentication and
// plaintext gRPC are the defaults only where no kubeconfig is in use, and then
// the gateway binds the loopback.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { chooseTransport } from '../gateway/config/local-mode.js';

const work = mkdtempSync(join(tmpdir(), 'oversell-local-mode-'));
after(() => rmSync(work, { recursive: true, force: true }));

describe('local mode only on purpose', () => {
  it('with a kubeconfig in use (in a pod or --kubeconfig): authentication, TLS and all interfaces by default', () => {
    assert.deepEqual(chooseTransport(true, {}), { auth: 'kubernetes', grpcTls: true, bindAddress: '0.0.0.0' });
  });

  it('without one: local mode, bound to the loopback', () => {
    assert.deepEqual(chooseTransport(false, {}), { auth: 'none', grpcTls: false, bindAddress: '127.0.0.1' });
  });

  it('local-mode settings next to a kubeconfig are honoured, with a warning that says what is open', () => {
    const t = chooseTransport(true, { auth: 'none', grpcTls: false });
    assert.equal(t.auth, 'none');
    assert.equal(t.grpcTls, false);
    assert.match(t.warning ?? '', /not authenticated \(--auth none\) and gRPC is plaintext \(--grpc-tls off\)/);
    assert.equal(chooseTransport(true, { grpcTls: false }).auth, 'kubernetes');
    assert.match(chooseTransport(true, { grpcTls: false }).warning ?? '', /plaintext/);
  });

  it('an explicit bind address wins; an unknown --auth is refused', () => {
    assert.equal(chooseTransport(false, { bindAddress: '0.0.0.0' }).bindAddress, '0.0.0.0');
    assert.throws(() => chooseTransport(false, { auth: 'token' }), /--auth must be "kubernetes" or "none"/);
  });

  it('the gateway binary with no kubeconfig and no --bind-address listens on 127.0.0.1 only', async () => {
    const env: NodeJS.ProcessEnv = { ...process.env, OVERSELL_WEBHOOK_PORT: '0', OVERSELL_GRPC_PORT: '0', OVERSELL_METRICS_PORT: '0', OVERSELL_TLS_DIR: join(work, 'tls') };
    for (const k of ['KUBECONFIG', 'KUBERNETES_SERVICE_HOST', 'OVERSELL_BIND_ADDRESS', 'OVERSELL_AUTH', 'OVERSELL_GRPC_TLS']) delete env[k];
    const child = spawn(process.execPath, [fileURLToPath(new URL('../dist/gateway/main.js', import.meta.url))], { env, stdio: ['ignore', 'pipe', 'pipe'] });
    try {
      let out = '';
      const serving = await new Promise<Record<string, unknown>>((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`no "gateway serving" line in 20 s:\n${out}`)), 20_000);
        child.stdout.on('data', (c: Buffer) => {
          out += c;
          const line = out.split('\n').find((l) => l.includes('"gateway serving"'));
          if (line) {
            clearTimeout(timer);
            resolve(JSON.parse(line) as Record<string, unknown>);
          }
        });
        child.on('exit', (code) => reject(new Error(`gateway exited ${code}:\n${out}`)));
      });
      assert.equal(serving.bindAddress, '127.0.0.1');
    } finally {
      child.kill('SIGTERM');
    }
  });
});
