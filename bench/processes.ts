// The binaries under test as child processes on 127.0.0.1.
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

export const REPO = fileURLToPath(new URL('../', import.meta.url));

export { freePort } from '../test/helpers/wait.js';
import { freePort } from '../test/helpers/wait.js';

export interface Gateway {
  child: ChildProcess;
  ports: { webhook: number; grpc: number; metrics: number };
  tlsDir: string;
  stop(): Promise<void>;
}

export async function startGateway(extra: string[] = []): Promise<Gateway> {
  const ports = { webhook: await freePort(), grpc: await freePort(), metrics: await freePort() };
  const tlsDir = mkdtempSync(join(tmpdir(), 'oversell-bench-tls-'));
  const child = spawn(process.execPath, [join(REPO, 'dist/gateway/main.js'), '--bind-address', '127.0.0.1',
    '--webhook-port', String(ports.webhook), '--grpc-port', String(ports.grpc), '--metrics-port', String(ports.metrics),
    '--tls-dir', tlsDir, '--policies', 'flags', '--log-level', 'warn', ...extra], { stdio: ['ignore', 'inherit', 'inherit'] });
  const deadline = Date.now() + 20_000;
  while (Date.now() < deadline) {
    try {
      if ((await fetch(`http://127.0.0.1:${ports.metrics}/readyz`)).ok) break;
    } catch {
      // not up yet
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  return {
    child,
    ports,
    tlsDir,
    stop: () =>
      new Promise((resolve) => {
        if (child.exitCode !== null) return resolve();
        child.once('exit', () => resolve());
        child.kill('SIGTERM');
      }),
  };
}

/**
 * bench/sim-agents.ts as a child process: `count` agents named <prefix>-<i>
 * streaming one sample a second to address. `ready` resolves once every
 * stream is welcomed. stderr 'pipe' lets the caller read the stream errors.
 */
export function startSimAgents(address: string, count: number, prefix = 'sim', stderr: 'inherit' | 'pipe' = 'inherit'): { child: ChildProcess; ready: Promise<void> } {
  const child = spawn(process.execPath, ['--max-old-space-size=4096', '--import', 'tsx', join(REPO, 'bench/sim-agents.ts'), address, String(count), prefix], { stdio: ['ignore', 'pipe', stderr] });
  const ready = new Promise<void>((resolve, reject) => {
    const t = setTimeout(() => reject(new Error(`${count} simulated agents not all welcomed within 120 s`)), 120_000);
    child.stdout?.on('data', (d: Buffer) => {
      if (/ready/.test(d.toString())) {
        clearTimeout(t);
        resolve();
      }
    });
  });
  return { child, ready };
}
