// `npm run bench`: every benchmark in one run, a summary table, JSON per
// benchmark in bench/results/, and docs/benchmarks.md written from them.
// BENCH_QUICK=1 shortens every window (for trying the harness, not for figures);
// BENCH_ONLY=webhook,ingest runs a subset. Either saves to the scratch
// directory (result.ts): only a full run replaces published results, or a
// full-length subset with BENCH_PUBLISH=1 its own sections (each is dated:
// re-running one that failed in a 40-minute run, without the other 40 minutes).
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { spawnSync } from 'node:child_process';
import { REPO } from './processes.js';
import { PUBLISHED_DIR, save, scratchDir, type BenchResult } from './result.js';
import { writeBenchmarks } from './render.js';
import { ensureOha } from './oha.js';
import { ensureGhz } from './ghz.js';
import { ensureLoadgen } from './loadgen.js';

/**
 * The order they run in: agent-overhead first, so load generators not built
 * yet build while it runs. Its figures are each process's own CPU time and
 * RSS, which other work on the machine does not add to. agent-real-node
 * last: it brings the control plane up with the real node, which the two
 * before it bring up without (and take down again).
 */
const RUN_ORDER = ['agent-overhead', 'webhook', 'ingest', 'message-cost', 'scaling', 'metrics-api', 'peer-inputs', 'freshness', 'pressure-to-node', 'cluster', 'replicas', 'replicas-sharded', 'agent-real-node'] as const;
const quick = process.env.BENCH_QUICK === '1';
const only = process.env.BENCH_ONLY?.split(',').filter(Boolean);
const publish = !quick && (!only || process.env.BENCH_PUBLISH === '1');
const resultsDir = publish ? PUBLISHED_DIR : scratchDir();
const started = Date.now();

const wanted = RUN_ORDER.filter((name) => !only || only.includes(name));
// scaling, metrics-api and peer-inputs measure in this process; the others start the built binaries.
if (wanted.some((name) => name !== 'scaling' && name !== 'metrics-api' && name !== 'peer-inputs') && !existsSync(join(REPO, 'dist/gateway/main.js'))) {
  console.log('building (npm run build)');
  if (spawnSync('npm', ['run', 'build'], { cwd: REPO, stdio: 'inherit' }).status !== 0) process.exit(1);
}

// One after the other: two compilers at once would only share the 2 cores. A
// failed build is reported by the benchmark that needs the tool.
const builds = [
  ...(wanted.includes('ingest') ? [ensureGhz] : []),
  ...(wanted.some((name) => name === 'webhook' || name === 'message-cost' || name === 'cluster' || name === 'replicas' || name === 'replicas-sharded') ? [ensureLoadgen] : []),
  ...(wanted.includes('webhook') ? [ensureOha] : []),
];
let building = true;
void builds.reduce<Promise<unknown>>((previous, ensure) => previous.then(ensure), Promise.resolve()).catch(() => {}).finally(() => (building = false));

const results: BenchResult[] = [];
for (const name of wanted) {
  const t = Date.now();
  console.log(`\n=== ${name}${quick ? ' (quick)' : ''}  [${Math.round((t - started) / 1000)}s elapsed]`);
  const mod = (await import(`./${name}.js`)) as { run(o: { quick?: boolean }): Promise<BenchResult> };
  try {
    const buildingBefore = building;
    const r = await mod.run({ quick });
    if (buildingBefore && name === 'agent-overhead') {
      (r.notes ??= []).push('the load generators (oha, ghz, loadgen) were being built from source during part of this run, the first on this machine: the CPU figures are each process\'s own, but expect them a little higher than on a quiet machine');
    }
    save(r, resultsDir);
    results.push(r);
    console.log(`  -> ${r.summary} (${Math.round((Date.now() - t) / 1000)} s)`);
  } catch (err) {
    console.error(`  ${name} failed: ${(err as Error).stack ?? err}`);
    results.push({ name, summary: `FAILED: ${(err as Error).message}`, figures: {}, targets: [{ name: `${name} ran`, measured: 'failed', met: false }] });
  }
}

const pad = (s: string, n: number) => s + ' '.repeat(Math.max(0, n - s.length));
console.log(`\n=== summary (${Math.round((Date.now() - started) / 1000)} s)`);
for (const r of results) {
  for (const t of r.targets) console.log(`  ${t.met ? 'met   ' : 'MISSED'}  ${pad(r.name, 15)} ${pad(t.name, 55)} ${t.measured}`);
}

if (publish) {
  // docs/benchmarks.md from every saved result (this run's and earlier ones for benchmarks not run now).
  console.log(`\nwrote ${writeBenchmarks()}`);
} else {
  console.log(`\nresults in ${resultsDir}; ${quick ? 'a quick run' : 'a subset'} leaves bench/results and docs/benchmarks.md as they are (a full npm run bench replaces them)`);
}
process.exit(results.some((r) => r.summary.startsWith('FAILED')) ? 1 : 0);
