// Local mode only on purpose (issue 19, invariant 12), as the built gateway
// binary does it: with no kubeconfig it binds the loopback. Runs dist/ (npm
// run build first); chooseTransport() itself is test/gateway/config/local-mode.test.ts.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';

const work = mkdtempSync(join(tmpdir(), 'oversell-local-mode-'));
after(() => rmSync(work, { recursive: true, force: true }));

describe('local mode only on purpose: the gateway binary', () => {
  it('the gateway binary with no kubeconfig and no --bind-address listens on 127.0.0.1 only', async () => {
    const env: NodeJS.ProcessEnv = { ...process.env, OVERSELL_WEBHOOK_PORT: '0', OVERSELL_GRPC_PORT: '0', OVERSELL_METRICS_PORT: '0', OVERSELL_TLS_DIR: join(work, 'tls') };
    for (const k of ['KUBECONFIG', 'KUBERNETES_SERVICE_HOST', 'OVERSELL_BIND_ADDRESS', 'OVERSELL_AUTH', 'OVERSELL_GRPC_TLS']) delete env[k];
    const child = spawn(process.execPath, [fileURLToPath(new URL('../../dist/gateway/main.js', import.meta.url))], { env, stdio: ['ignore', 'pipe', 'pipe'] });
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
