// oversell's own binaries as separate processes, the way they run in a cluster,
// so a test can kill one for real.
import { spawn, type ChildProcess } from 'node:child_process';
import { createWriteStream, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { REPO, STATE } from './cluster.js';

export const LOG_DIR = join(STATE, 'logs', 'oversell');

export { freePort } from '../../scripts/harness/wait.js';

export interface Proc {
  child: ChildProcess;
  logFile: string;
  /** Resolves with the first JSON log line whose msg matches. */
  waitFor(msg: RegExp, timeoutMs?: number): Promise<Record<string, unknown>>;
  kill(signal?: NodeJS.Signals): Promise<void>;
}

export function run(name: string, bin: 'gateway' | 'agent', args: string[], env: Record<string, string> = {}): Proc {
  mkdirSync(LOG_DIR, { recursive: true });
  const logFile = join(LOG_DIR, `${name}.log`);
  const log = createWriteStream(logFile, { flags: 'a' });
  const child = spawn(process.execPath, ['--enable-source-maps', join(REPO, 'dist', bin, 'main.js'), ...args], {
    env: { ...process.env, OVERSELL_LOG_LEVEL: 'info', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const lines: Array<Record<string, unknown>> = [];
  const waiters: Array<{ msg: RegExp; resolve: (l: Record<string, unknown>) => void }> = [];
  let buffer = '';
  child.stdout?.on('data', (chunk: Buffer) => {
    log.write(chunk);
    buffer += chunk.toString();
    let nl: number;
    while ((nl = buffer.indexOf('\n')) >= 0) {
      const text = buffer.slice(0, nl);
      buffer = buffer.slice(nl + 1);
      try {
        const line = JSON.parse(text) as Record<string, unknown>;
        lines.push(line);
        for (const w of [...waiters]) {
          if (w.msg.test(String(line.msg))) {
            waiters.splice(waiters.indexOf(w), 1);
            w.resolve(line);
          }
        }
      } catch {
        // not a log line
      }
    }
  });
  child.stderr?.on('data', (chunk: Buffer) => log.write(chunk));
  const exited = new Promise<void>((resolve) => child.on('exit', () => resolve()));
  return {
    child,
    logFile,
    waitFor(msg, timeoutMs = 20_000) {
      const seen = lines.find((l) => msg.test(String(l.msg)));
      if (seen) return Promise.resolve(seen);
      return new Promise((resolve, reject) => {
        const t = setTimeout(() => reject(new Error(`${name}: no log line matching ${msg} within ${timeoutMs} ms; see ${logFile}`)), timeoutMs);
        waiters.push({ msg, resolve: (l) => { clearTimeout(t); resolve(l); } });
      });
    },
    async kill(signal = 'SIGTERM') {
      if (child.exitCode !== null || child.signalCode !== null) return;
      child.kill(signal);
      await exited;
    },
  };
}
