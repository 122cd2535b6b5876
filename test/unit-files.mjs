// The files of the unit suite (`npm run test:unit`): every *.test.ts outside
// test/e2e/ and test/bin/, the slowest first. The runner starts files in the
// order given, N at a time: a long file started last would keep the suite
// running on one core after the other has nothing left to do.
import { readdirSync } from 'node:fs';

// Wall time of each file alone on 2 cores (2026-11-25; outcome-doc, frontier-doc 2026-11-28): outcome-doc 352 s, fuzz 40 s, pipeline 18 s, frontier-doc 16 s,
// faults 13 s, watch-limits 13 s, auth 10 s, cli/record 10 s, cli/simulate 10 s, cli-kubeconfig 9 s, review-reader 9 s,
// token-flood 8 s, cli 7 s (agent/sample/container-cost 20-30 s on a loaded host, 2026-11-28); every other file under 5 s. A file missing here
// only runs later; one listed that no longer exists is an error.
const SLOWEST = ['outcome-doc', 'fuzz', 'pipeline', 'frontier-doc', 'faults', 'watch-limits', 'auth', 'cli/record', 'cli/simulate', 'cli-kubeconfig', 'review-reader', 'token-flood', 'agent/sample/container-cost', 'cli'].map((n) => `test/${n}.test.ts`);

const all = readdirSync('test', { recursive: true, encoding: 'utf8' })
  .map((f) => `test/${f.split('\\').join('/')}`)
  .filter((f) => f.endsWith('.test.ts') && !f.startsWith('test/e2e/') && !f.startsWith('test/bin/'))
  .sort();
const missing = SLOWEST.filter((f) => !all.includes(f));
if (missing.length > 0) throw new Error(`test/unit-files.mjs lists files that do not exist: ${missing.join(', ')}`);
console.log([...SLOWEST, ...all.filter((f) => !SLOWEST.includes(f))].join('\n'));
