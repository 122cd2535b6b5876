// `npm run test:e2e`: bring the local control plane up, run the e2e suite
// against it, print the component logs if anything failed, bring it down.
import { spawnSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
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
// OVERSELL_E2E_ONLY=install runs only the files whose name contains it.
const only = process.env.OVERSELL_E2E_ONLY ?? '';
const files = readdirSync(join(REPO, 'test', 'e2e'))
  .filter((f) => f.endsWith('.e2e.test.ts') && f.includes(only))
  .map((f) => join('test', 'e2e', f));
const suite = spawnSync(process.execPath, ['--import', 'tsx', '--test', '--test-concurrency=1', '--test-reporter=spec', ...files], {
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
process.exit(suite.status ?? 1);
