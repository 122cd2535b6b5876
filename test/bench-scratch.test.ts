// A try of the benchmark harness never replaces a published figure: a quick
// run, a subset or a single benchmark file saves to the scratch directory and
// leaves bench/results and docs/benchmarks.md as they are. The benchmarks run
// as processes (tests do not import bench/).
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';

const repo = fileURLToPath(new URL('../', import.meta.url));
const work = mkdtempSync(join(tmpdir(), 'oversell-bench-scratch-'));
after(() => rmSync(work, { recursive: true, force: true }));

const published = () => ({ result: readFileSync(join(repo, 'bench/results/scaling.json'), 'utf8'), page: readFileSync(join(repo, 'docs/benchmarks.md'), 'utf8') });

function bench(args: string[], env: Record<string, string>): { status: number | null; out: string } {
  const r = spawnSync(process.execPath, ['--expose-gc', '--import', 'tsx', ...args], {
    cwd: repo, encoding: 'utf8', timeout: 120_000, env: { ...process.env, OVERSELL_BENCH_SCRATCH: work, ...env },
  });
  return { status: r.status, out: `${r.stdout}\n${r.stderr}` };
}

describe('benchmark results: published only by a full run', () => {
  it('a quick single benchmark saves to the scratch directory, not over bench/results', { timeout: 130_000 }, () => {
    const before = published();
    const r = bench(['bench/scaling.ts'], { BENCH_QUICK: '1' });
    assert.equal(r.status, 0, r.out);
    assert.match(r.out, new RegExp(`saved ${join(work, 'scaling.json')}`));
    const saved = JSON.parse(readFileSync(join(work, 'scaling.json'), 'utf8')) as { name: string; figures: Record<string, number> };
    assert.equal(saved.name, 'scaling');
    assert.ok('nodes_1000_handler_us' in saved.figures, 'the quick run measured 100 and 1000 nodes');
    assert.deepEqual(published(), before, 'bench/results/scaling.json and docs/benchmarks.md unchanged');
  });

  it('a subset through npm run bench (BENCH_ONLY) saves to the scratch directory and leaves docs/benchmarks.md alone', { timeout: 130_000 }, () => {
    rmSync(join(work, 'scaling.json'), { force: true });
    const before = published();
    const r = bench(['bench/run.ts'], { BENCH_QUICK: '1', BENCH_ONLY: 'scaling' });
    assert.equal(r.status, 0, r.out);
    assert.ok(existsSync(join(work, 'scaling.json')), r.out);
    assert.match(r.out, /leaves bench\/results and docs\/benchmarks\.md as they are/);
    assert.doesNotMatch(r.out, /wrote .*benchmarks\.md/);
    assert.deepEqual(published(), before);
  });
});
