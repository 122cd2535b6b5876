// The files of the unit suite (`npm run test:unit`, the quick loop): every
// *.test.ts outside test/e2e/ and test/bin/ but the slow ones and the document
// checks, the slowest first. With --slow: the files of a minute or so each
// (`npm run test:slow`: fuzzing, the simulator and the CLI's runs of it,
// connection timeouts, the whole pipeline, the CLI against real servers, the
// fault, token-flood and authentication scenarios, load shedding and the
// ingest threads: each holds real servers and clocks for seconds). With --docs: the document checks (`npm run test:docs`),
// the tests that regenerate a committed page from its source and compare
// (minutes: docs/outcome.md alone is a simulated day of every policy). All three
// run in `npm test` and CI. The runner starts files in the order given, N at a
// time: a long file started last would keep the suite running on one core
// after the other has nothing left to do.
import { readdirSync } from 'node:fs';

// Wall time of each file, two at a time on 2 cores shared with other work (2026-12-04): outcome-doc 611 s (352 s alone),
// cli/simulate 65 s, fuzz 59 s, connection-limits 27 s, pipeline 20 s, benchmarks-doc 16 s, sim/simulate 15 s, cli-kubeconfig 15 s,
// faults 13 s, auth 12 s, review-reader 11 s, cli 11 s, watch-limits 11 s, frontier-doc 10 s, cli/record 9 s; every other file
// under 9 s. A file missing here only runs later; one listed that no longer exists is an error.
const DOCS = ['outcome-doc', 'frontier-doc', 'caps-doc', 'benchmarks-doc'].map((n) => `test/${n}.test.ts`);
const SLOW = ['cli/simulate', 'fuzz', 'gateway/tls/connection-limits', 'pipeline', 'sim/simulate', 'cli-kubeconfig', 'review-reader', 'cli', 'faults', 'cli/record', 'token-flood', 'auth', 'gateway/ingest/load-shedding', 'gateway/admit/large-body-budget'].map((n) => `test/${n}.test.ts`);
const SLOWEST = ['watch-limits', 'gateway/tls/stream-guard', 'gateway/shard/sharding', 'agent/sample/container-cost'].map((n) => `test/${n}.test.ts`);

const all = readdirSync('test', { recursive: true, encoding: 'utf8' })
  .map((f) => `test/${f.split('\\').join('/')}`)
  .filter((f) => f.endsWith('.test.ts') && !f.startsWith('test/e2e/') && !f.startsWith('test/bin/'))
  .sort();
const missing = [...DOCS, ...SLOW, ...SLOWEST].filter((f) => !all.includes(f));
if (missing.length > 0) throw new Error(`test/unit-files.mjs lists files that do not exist: ${missing.join(', ')}`);
const group = process.argv.includes('--docs') ? DOCS : process.argv.includes('--slow') ? SLOW : [...SLOWEST, ...all.filter((f) => ![...SLOWEST, ...SLOW, ...DOCS].includes(f))];
console.log(group.join('\n'));
