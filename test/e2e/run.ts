// `npm run test:e2e`: bring the local control plane up, run the e2e suite
// against it, print the component logs if anything failed, bring it down.
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { CLUSTER_SH, REPO, STATE } from './cluster.js';
import { LOG_DIR } from './processes.js';

const keep = process.env.OVERSELL_E2E_KEEP === '1';
const step = (what: string) => console.log(`\n=== ${what}`);

function tail(file: string, lines = 40): string {
  return readFileSync(file, 'utf8').split('\n').slice(-lines).join('\n');
}

function dumpLogs(): void {
  for (const dir of [join(STATE, 'logs'), LOG_DIR]) {
    if (!existsSync(dir)) continue;
    for (const f of readdirSync(dir).filter((n) => n.endsWith('.log'))) {
      console.log(`\n--- ${join(dir, f)} (last 40 lines)\n${tail(join(dir, f))}`);
    }
  }
}

/** Each failed test's line and its error block as TAP has it, without durations, the stack cut to its first lines. */
function failuresOf(tap: string, stackLines = 3): string {
  const lines = tap.split('\n');
  const out: string[] = [];
  lines.forEach((line, i) => {
    if (!/^\s*not ok /.test(line)) return;
    const indent = line.search(/\S/);
    out.push(line.trim());
    let stack = -1;
    for (const next of lines.slice(i + 1)) {
      const text = next.trim();
      if (text === '...' || (next.search(/\S/) <= indent && text !== '')) break;
      if (text === '---' || text.startsWith('duration_ms:')) continue;
      if (text.startsWith('stack:')) stack = 0;
      else if (stack >= 0 && ++stack > stackLines) continue;
      out.push(`    ${text}`);
    }
  });
  return out.join('\n');
}

if (!existsSync(join(REPO, 'dist', 'gateway', 'main.js'))) {
  step('building oversell (npm run build)');
  if (spawnSync('npm', ['run', 'build'], { cwd: REPO, stdio: 'inherit' }).status !== 0) process.exit(1);
}

step('starting the local control plane (scripts/cluster/cluster.sh up)');
const up = spawnSync('bash', [CLUSTER_SH, 'up'], { stdio: 'inherit' });
if (up.status !== 0) {
  console.error('the control plane did not come up; component logs follow');
  dumpLogs();
  spawnSync('bash', [CLUSTER_SH, 'down'], { stdio: 'inherit' });
  process.exit(1);
}

step('end-to-end suite');
// OVERSELL_E2E_ONLY=install runs only the files whose name contains it;
// OVERSELL_E2E_ONLY=hold-while,install the files whose name contains either (in the suite's order).
const only = (process.env.OVERSELL_E2E_ONLY ?? '').split(',');
const files = readdirSync(join(REPO, 'test', 'e2e'))
  .filter((f) => f.endsWith('.e2e.test.ts') && only.some((o) => f.includes(o)))
  .map((f) => join('test', 'e2e', f));
// A TAP record beside the spec output: what failed, and why, is printed again
// last, where a CI log's tail shows it rather than the component logs.
const tapFile = join(LOG_DIR, 'e2e-results.tap');
mkdirSync(LOG_DIR, { recursive: true });
const suite = spawnSync(process.execPath, [
  '--import', 'tsx', '--test', '--test-concurrency=1',
  '--test-reporter=spec', '--test-reporter-destination=stdout', '--test-reporter=tap', `--test-reporter-destination=${tapFile}`,
  ...files,
], {
  cwd: REPO,
  stdio: 'inherit',
});
if (suite.status !== 0) {
  console.error('\nthe e2e suite failed; component logs follow');
  dumpLogs();
}

if (keep) {
  console.log(`\nOVERSELL_E2E_KEEP=1: the cluster stays up (KUBECONFIG=${join(STATE, 'admin.kubeconfig')}); stop it with npm run cluster -- down`);
} else {
  step('stopping the local control plane');
  spawnSync('bash', [CLUSTER_SH, 'down'], { stdio: 'inherit' });
}
if (suite.status !== 0 && existsSync(tapFile)) {
  step('failed e2e tests (again, from the TAP record)');
  console.log(failuresOf(readFileSync(tapFile, 'utf8')));
}
process.exit(suite.status ?? 1);
