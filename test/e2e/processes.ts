// oversell's own binaries as separate processes, the way they run in a cluster,
// so a test can kill one for real.
import type { ChildProcess } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { startProcess } from '../../scripts/harness/processes.js';
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

/** A JSON log line, or undefined for any other output. */
function logLine(text: string): Record<string, unknown> | undefined {
  try {
    const line: unknown = JSON.parse(text);
    return typeof line === 'object' && line !== null ? (line as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
}

export function run(name: string, bin: 'gateway' | 'agent', args: string[], env: Record<string, string> = {}): Proc {
  mkdirSync(LOG_DIR, { recursive: true });
  const logFile = join(LOG_DIR, `${name}.log`);
  const child = startProcess(name, process.execPath, ['--enable-source-maps', join(REPO, 'dist', bin, 'main.js'), ...args], {
    // Gateways stop at once unless a test asks for a drain (OVERSELL_SHUTDOWN_DRAIN or --shutdown-drain).
    env: { ...process.env, OVERSELL_LOG_LEVEL: 'info', ...(bin === 'gateway' && { OVERSELL_SHUTDOWN_DRAIN: '0s' }), ...env },
    logFile,
    // A test may wait for a line long after it was written: keep them all.
    keepLines: Infinity,
  });
  return {
    child: child.proc,
    logFile,
    async waitFor(msg, timeoutMs = 20_000) {
      const matches = (text: string) => {
        const line = logLine(text);
        return line !== undefined && msg.test(String(line.msg));
      };
      return logLine(await child.waitForLine(matches, timeoutMs)) ?? {};
    },
    kill: (signal = 'SIGTERM') => child.kill(signal),
  };
}
