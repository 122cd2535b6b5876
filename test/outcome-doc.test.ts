// docs/outcome.md, its charts and its JSON are generated: the committed files
// must be exactly what `oversell simulate --demand saturating --nodes-needed
// --out docs` writes from the default scenario (regenerate: npm run simulate --
// --demand saturating --nodes-needed --out docs).
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';

const repo = fileURLToPath(new URL('../', import.meta.url));
const work = mkdtempSync(join(tmpdir(), 'oversell-outcome-'));
after(() => rmSync(work, { recursive: true, force: true }));

describe('docs/outcome.md', () => {
  it('is what `oversell simulate --demand saturating --nodes-needed --out docs` writes, charts and JSON included', { timeout: 1_800_000 }, async () => {
    // Two saturated days of 100 nodes under nine policies, each after a warm-up
    // day, and a binary search of nodes needed per policy (docs/simulate.md,
    // Speed): 917 s of CPU measured; twice that as the limit.
    const args = [join(repo, 'cli/main.ts'), 'simulate', '--demand', 'saturating', '--nodes-needed', '--out', work];
    const stderr = await new Promise<string>((resolve, reject) =>
      execFile(process.execPath, ['--import', 'tsx', ...args], { encoding: 'utf8', timeout: 1_790_000 }, (err, _out, err2) =>
        err ? reject(new Error(`${err.message}\n${err2}`)) : resolve(err2),
      ),
    );
    const written = stderr.split('\n').filter(Boolean).map((l) => l.replace(`wrote ${work}/`, ''));
    assert.deepEqual(written.sort(), ['outcome.json', 'outcome.md', 'outcome/pods-placed.svg', 'outcome/risk-gain.svg', 'outcome/utilisation-cpu.svg', 'outcome/utilisation-memory.svg']);
    for (const file of written) {
      assert.equal(readFileSync(join(repo, 'docs', file), 'utf8'), readFileSync(join(work, file), 'utf8'), `docs/${file} is stale: npm run simulate -- --demand saturating --nodes-needed --out docs`);
    }
    assert.deepEqual(readdirSync(join(repo, 'docs/outcome')).sort(), written.filter((f) => f.startsWith('outcome/')).map((f) => f.slice(8)).sort(), 'no stale chart left in docs/outcome/');
  });

  it('leads with the nodes oversell saves, and says whether each target of issue 31 is met', () => {
    const page = readFileSync(join(repo, 'docs/outcome.md'), 'utf8');
    const rows = page.split('\n').filter((l) => /^\| .* \| (yes|\*\*no\*\*) \| /.test(l));
    assert.equal(rows.length, 3, 'three targets, one row each');
    assert.ok(page.indexOf('**Nodes saved:') > 0 && page.indexOf('**Nodes saved:') < page.indexOf('## What the run shows'), 'nodes saved first');
  });
});
