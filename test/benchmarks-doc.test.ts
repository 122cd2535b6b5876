// docs/benchmarks.md is generated: the committed page must be what the
// benchmark writes from the committed results, and it only links to the
// performance log, which the benchmark never writes.
import assert from 'node:assert/strict';
import { cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { renderBenchmarks, writeBenchmarks } from '../bench/render.js';

const repo = fileURLToPath(new URL('../', import.meta.url));
const read = (path: string) => readFileSync(join(repo, path), 'utf8');
const work = mkdtempSync(join(tmpdir(), 'oversell-benchdoc-'));
after(() => rmSync(work, { recursive: true, force: true }));

describe('docs/benchmarks.md', () => {
  it('is exactly what bench/render.ts writes from bench/results/*.json (regenerate: node --import tsx bench/render.ts)', () => {
    assert.equal(read('docs/benchmarks.md'), renderBenchmarks(repo));
  });

  it('follows the saved results: a changed figure changes the page, a missed target says missed', () => {
    cpSync(join(repo, 'bench/results'), join(work, 'bench/results'), { recursive: true });
    mkdirSync(join(work, 'docs'));
    const file = join(work, 'bench/results/webhook.json');
    const r = JSON.parse(readFileSync(file, 'utf8')) as { figures: Record<string, number>; targets: { met: boolean }[] };
    r.figures.handler_cpu_us = 123456;
    r.targets[0]!.met = false;
    writeFileSync(file, JSON.stringify(r));
    const page = readFileSync(writeBenchmarks(work), 'utf8');
    assert.match(page, /\| handler_cpu_us \| 123456 \|/);
    assert.match(page, /\| \*\*missed\*\* \|/);
    assert.notEqual(page, read('docs/benchmarks.md'));
  });

  it('links to the performance log and carries none of its history', () => {
    const page = read('docs/benchmarks.md');
    const log = read('docs/performance-log.md');
    assert.match(page, /\]\(performance-log\.md\)/);
    // Every dated entry of the log is under a date heading, and none of it is on the page.
    const dates = [...log.matchAll(/^## (\d{4}-\d{2}-\d{2})$/gm)].map((m) => m[1]);
    assert.ok(dates.length >= 3, `date headings in the log: ${dates.join(', ')}`);
    assert.deepEqual(dates, [...dates].sort(), 'log dates oldest first');
    const entries = log.split('\n').filter((l) => l.startsWith('- ')).map((l) => l.slice(2, 60));
    assert.ok(entries.length > 30);
    for (const e of entries) assert.ok(!page.includes(e), `log entry on the generated page: ${e}`);
  });
});
