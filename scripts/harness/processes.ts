// A child process the way `npm start`, the benchmarks and the end-to-end tests
// run oversell's binaries and their helpers: its output read line by line
// (kept for a failure message, echoed, or written to a log file), a wait for
// the line that says it is ready, and a stop that cannot hang (SIGTERM, then
// SIGKILL). One implementation, so a fix to how a child is stopped or read
// reaches all three.
import { spawn, type ChildProcess } from 'node:child_process';
import { createWriteStream } from 'node:fs';
import { createInterface } from 'node:readline';

export interface ProcessOptions {
  cwd?: string;
  /** The child's whole environment (default: this process's). */
  env?: NodeJS.ProcessEnv;
  /** Every line the child writes, as it comes. */
  onLine?(line: string, stream: 'stdout' | 'stderr'): void;
  /** Also append everything the child writes to this file. */
  logFile?: string;
  /** The child exited without stop() or kill() asking it to. */
  onUnexpectedExit?(code: number | null, signal: NodeJS.Signals | null, output: string): void;
  /** Output lines kept for output() and for a waitForLine() that asks after its line came (default 40). */
  keepLines?: number;
}

export interface Child {
  name: string;
  proc: ChildProcess;
  pid: number;
  /** The last lines of output, for a failure message. */
  output(): string;
  /** The first line (among those kept, or to come) that matches; rejects after timeoutMs. */
  waitForLine(match: RegExp | ((line: string) => boolean), timeoutMs?: number): Promise<string>;
  /** Resolves when the child has exited. */
  exited: Promise<void>;
  /** Sends signal, once, and resolves when the child has exited. */
  kill(signal?: NodeJS.Signals): Promise<void>;
  /** SIGTERM, then SIGKILL after 5 s. */
  stop(): Promise<void>;
}

const SIGKILL_AFTER_MS = 5000;

export function startProcess(name: string, file: string, args: readonly string[], o: ProcessOptions = {}): Child {
  const proc = spawn(file, args, { stdio: ['ignore', 'pipe', 'pipe'], ...(o.cwd && { cwd: o.cwd }), ...(o.env && { env: o.env }) });
  const keep = o.keepLines ?? 40;
  const kept: string[] = [];
  const waiters = new Set<(line: string) => void>();
  const log = o.logFile ? createWriteStream(o.logFile, { flags: 'a' }) : undefined;
  const line = (stream: 'stdout' | 'stderr') => (text: string) => {
    kept.push(text);
    if (kept.length > keep) kept.shift();
    o.onLine?.(text, stream);
    for (const w of [...waiters]) w(text);
  };
  if (log) {
    proc.stdout?.on('data', (chunk: Buffer) => log.write(chunk));
    proc.stderr?.on('data', (chunk: Buffer) => log.write(chunk));
  }
  onLines(proc.stdout, line('stdout'));
  onLines(proc.stderr, line('stderr'));
  let asked = false;
  const exited = new Promise<void>((resolve) =>
    proc.once('exit', (code, signal) => {
      if (!asked) o.onUnexpectedExit?.(code, signal, kept.join('\n'));
      resolve();
    }),
  );
  if (proc.pid === undefined) throw new Error(`${name} did not start`);
  const running = () => proc.exitCode === null && proc.signalCode === null;
  const kill = async (signal: NodeJS.Signals = 'SIGTERM') => {
    asked = true;
    if (!running()) return;
    proc.kill(signal);
    await exited;
  };
  return {
    name,
    proc,
    pid: proc.pid,
    output: () => kept.join('\n'),
    waitForLine(match, timeoutMs = 20_000) {
      const test = typeof match === 'function' ? match : (l: string) => match.test(l);
      const already = kept.find(test);
      if (already !== undefined) return Promise.resolve(already);
      return new Promise((resolve, reject) => {
        const waiter = (l: string) => {
          if (!test(l)) return;
          clearTimeout(timer);
          waiters.delete(waiter);
          resolve(l);
        };
        const timer = setTimeout(() => {
          waiters.delete(waiter);
          reject(new Error(`${name}: no output line matching ${String(match)} within ${timeoutMs} ms${o.logFile ? `; see ${o.logFile}` : ''}`));
        }, timeoutMs);
        waiters.add(waiter);
      });
    },
    exited,
    kill,
    async stop() {
      asked = true;
      if (!running()) return;
      const force = setTimeout(() => proc.kill('SIGKILL'), SIGKILL_AFTER_MS);
      await kill('SIGTERM');
      clearTimeout(force);
    },
  };
}

/** Each line a child writes to a stream. */
export function onLines(stream: NodeJS.ReadableStream | null | undefined, fn: (line: string) => void): void {
  if (stream) createInterface({ input: stream }).on('line', fn);
}
