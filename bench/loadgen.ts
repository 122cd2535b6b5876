// bench/loadgen (Go): the load generators of the cluster benchmark, and the
// Go net/http reference of the webhook benchmark. Compiled, so 10,000 agents
// each on its own TLS connection cost this 2-core machine a fraction of what
// Node would, and its pauses are not the gateway's. Built with the Go module
// proxy into ~/.cache/oversell, keyed by a hash of its sources so an edit
// rebuilds it.
import { createHash } from 'node:crypto';
import { spawn, type ChildProcess } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { onLines } from '../scripts/harness/processes.js';
import { REPO } from './processes.js';
import { ensureTool } from './tools.js';

const DIR = join(REPO, 'bench/loadgen');
export const PROTO = join(REPO, 'proto/oversell/v1/oversell.proto');

function sourceHash(): string {
  const h = createHash('sha256');
  for (const f of readdirSync(DIR).filter((f) => /\.go$|^go\.(mod|sum)$/.test(f)).sort()) h.update(f).update(readFileSync(join(DIR, f)));
  return h.digest('hex').slice(0, 12);
}

/** Path of the loadgen binary; builds it on first use (OVERSELL_LOADGEN names one already built). */
export const ensureLoadgen = () =>
  ensureTool({
    name: 'loadgen',
    version: sourceHash(),
    purpose: 'agents, reviews and queries of the cluster benchmark; Go reference webhook',
    envOverride: 'OVERSELL_LOADGEN',
    minutes: 2,
    build: (root) => ({ command: 'go', args: ['build', '-C', DIR, '-v', '-o', join(root, 'bin', 'loadgen'), '.'] }),
    progress: /^[\w.-]+(\/[\w.@-]+)+$/,
    unit: 'packages',
  });

export interface Latencies {
  p50: number;
  p90: number;
  p99: number;
  p99_9: number;
  max: number;
}

export interface LoadgenRun<R> {
  child: ChildProcess;
  /** Lines of stdout other than the result, as they come. */
  lines: (fn: (line: string) => void) => void;
  /** The `result {json}` line; rejects when the process exits without one. */
  result: Promise<R>;
}

/**
 * `loadgen <subcommand> <args>` as a child process, optionally behind a
 * launcher (taskset, nice); stderr (its progress) is echoed with a prefix.
 */
export function startLoadgen<R>(bin: string, subcommand: string, args: string[], options: { launcher?: string[]; echo?: boolean } = {}): LoadgenRun<R> {
  const argv = [...(options.launcher ?? []), bin, subcommand, ...args];
  const child = spawn(argv[0]!, argv.slice(1), { stdio: ['ignore', 'pipe', 'pipe'] });
  const listeners = new Set<(line: string) => void>();
  let stderrTail: string[] = [];
  onLines(child.stderr, (line) => {
    stderrTail = [...stderrTail.slice(-20), line];
    if (options.echo ?? true) console.log(`  [loadgen ${subcommand}] ${line}`);
  });
  const result = new Promise<R>((resolve, reject) => {
    onLines(child.stdout, (line) => {
      if (line.startsWith('result ')) resolve(JSON.parse(line.slice(7)) as R);
      else for (const l of listeners) l(line);
    });
    child.once('exit', (code, signal) => reject(new Error(`loadgen ${subcommand} exited (code ${code}, signal ${signal}) without a result:\n${stderrTail.join('\n')}`)));
  });
  return { child, lines: (fn) => listeners.add(fn), result };
}

/** Resolves with the first stdout line matching `re`. */
export function waitForLine(run: LoadgenRun<unknown>, re: RegExp, withinMs: number, what: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const t = setTimeout(() => reject(new Error(`${what}: no "${re.source}" from loadgen within ${withinMs / 1000} s`)), withinMs);
    run.lines((line) => {
      if (re.test(line)) {
        clearTimeout(t);
        resolve(line);
      }
    });
    run.result.catch((err: Error) => {
      clearTimeout(t);
      reject(err);
    });
  });
}
