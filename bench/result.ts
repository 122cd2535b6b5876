// What every benchmark returns: its figures, and for each target whether it held.
import { cpus, totalmem, release } from 'node:os';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

export interface Target {
  /** e.g. "webhook p99 at 1000 req/s <= 5 ms" */
  name: string;
  measured: string;
  met: boolean;
}

export interface BenchResult {
  name: string;
  /** One line for the summary table and docs/benchmarks.md. */
  summary: string;
  /** Named figures, with units in the key: { "p99_ms": 1.2, ... }. */
  figures: Record<string, number | string>;
  targets: Target[];
  /** Reference measured in the same run, when there is one (e.g. node-exporter). */
  reference?: Record<string, number | string>;
  notes?: string[];
}

export function machine(): Record<string, string | number> {
  const c = cpus();
  return {
    cpu: c[0]?.model ?? 'unknown',
    cores: c.length,
    memoryGiB: Math.round(totalmem() / 1024 ** 3),
    kernel: release(),
    node: process.version,
  };
}

/** The published results, which docs/benchmarks.md is written from: only a full `npm run bench` (or `npm run soak`) writes here. */
export const PUBLISHED_DIR = fileURLToPath(new URL('./results/', import.meta.url));

/**
 * Where quick runs (BENCH_QUICK=1), subsets (BENCH_ONLY) and single benchmark
 * files save: OVERSELL_BENCH_SCRATCH, or .oversell/bench/ (not committed). A
 * try of the harness must never replace a published figure.
 */
export function scratchDir(): string {
  return process.env.OVERSELL_BENCH_SCRATCH || fileURLToPath(new URL('../.oversell/bench/', import.meta.url));
}

export function save(result: BenchResult, dir: string): string {
  mkdirSync(dir, { recursive: true });
  const file = join(dir, `${result.name}.json`);
  writeFileSync(file, JSON.stringify({ ...result, machine: machine(), date: new Date().toISOString() }, null, 2) + '\n');
  return file;
}

export const percentile = (sorted: number[], p: number) => sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))] ?? NaN;
export const round = (v: number, digits = 2) => Math.round(v * 10 ** digits) / 10 ** digits;
/** The arithmetic mean; NaN for no values. */
export const mean = (xs: readonly number[]) => xs.reduce((s, x) => s + x, 0) / xs.length;

/**
 * Lets each benchmark file run alone: `node --import tsx bench/<name>.ts` (BENCH_QUICK=1 for short windows).
 * It saves to the scratch directory; `publishes` (the soak, a run of its own) saves a full run with the published results.
 * failOnMissed: exit 1 when a target is missed (the soak is a pass/fail check; benchmarks report and exit 0).
 */
export function runIfMain(moduleUrl: string, run: (o: { quick?: boolean }) => Promise<BenchResult>, print: (r: BenchResult) => void = (r) => console.log(r.summary), failOnMissed = false, publishes = false): void {
  if (!process.argv[1] || moduleUrl !== pathToFileURL(process.argv[1]).href) return;
  const quick = process.env.BENCH_QUICK === '1';
  run({ quick }).then(
    (r) => {
      print(r);
      console.log(`saved ${save(r, publishes && !quick ? PUBLISHED_DIR : scratchDir())}`);
      process.exit(failOnMissed && r.targets.some((t) => !t.met) ? 1 : 0);
    },
    (err: unknown) => {
      console.error(err);
      process.exit(1);
    },
  );
}
