// Where a review's time goes: the gateway and the bare node:https reference
// (bench/bare-webhook.ts), each under --cpu-prof, each given the same oha load
// (1000 reviews/s, 50 kept-alive connections, the 37 KB review), one after the
// other in the same run; their profiles summed by self time (cpu-profile.ts),
// in µs per request. Not part of `npm run bench`: a tool for looking.
//   node --import tsx bench/webhook-profile.ts [seconds] [rate] [--source] [--trace-gc]
// --source runs gateway/main.ts through tsx instead of dist/ (to profile an
// edit without a build). Profiles are kept in the printed directory.
import { mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { spawn } from 'node:child_process';
import { formatSummary, mainThreadProfile, summarize } from './cpu-profile.js';
import { ensureOha, oha } from './oha.js';
import { cpuSeconds } from './proc-stats.js';
import { freePort, GATEWAY_NODE_ARGS, REPO, startChild, startGateway } from './processes.js';
import { reviewBody } from './review-body.js';

const args = process.argv.slice(2);
const [seconds = 20, rate = 1000] = args.filter((a) => !a.startsWith('--')).map(Number);
const fromSource = args.includes('--source');
const traceGc = args.includes('--trace-gc');
const dir = mkdtempSync(join(tmpdir(), 'oversell-webhook-profile-'));
const profFlags = (name: string) => ['--cpu-prof', '--cpu-prof-interval=250', `--cpu-prof-dir=${join(dir, name)}`, ...(traceGc ? ['--trace-gc'] : [])];
const bodyFile = join(dir, 'review.json');
writeFileSync(bodyFile, reviewBody());
const ohaBin = await ensureOha();

/** GC lines of --trace-gc in the load window: count and pause milliseconds by kind. */
function gcSummary(lines: string[]): string {
  const kinds = new Map<string, { n: number; ms: number; max: number }>();
  for (const line of lines) {
    const m = /(Scavenge|Mark-Compact|Mark-sweep|Minor Mark-Sweep)[^,]*?,\s*([\d.]+)\s*\/\s*([\d.]+)\s*ms/.exec(line);
    if (!m) continue;
    const k = kinds.get(m[1]!) ?? { n: 0, ms: 0, max: 0 };
    k.n += 1;
    k.ms += Number(m[2]);
    k.max = Math.max(k.max, Number(m[2]));
    kinds.set(m[1]!, k);
  }
  return [...kinds].map(([k, v]) => `${k} ${v.n}x, ${v.ms.toFixed(0)} ms pause (max ${v.max.toFixed(1)} ms)`).join('; ') || 'none';
}

async function load(url: string, pid: number, lines: string[]) {
  await oha(ohaBin, url, bodyFile, ['-c', '10', '-z', '3s']);
  lines.length = 0;
  const cpu0 = cpuSeconds(pid);
  const fromUs = Number(process.hrtime.bigint() / 1000n);
  const r = await oha(ohaBin, url, bodyFile, ['-c', '50', '-q', String(rate), '--latency-correction', '-z', `${seconds}s`]);
  const window = { fromUs, toUs: Number(process.hrtime.bigint() / 1000n) };
  const cpuUs = ((cpuSeconds(pid) - cpu0) * 1e6) / r.total;
  return { r, cpuUs, gc: gcSummary(lines), window };
}

const gwLines: string[] = [];
const gw = await startGateway({
  echo: false,
  launcher: ([node, ...rest]) => {
    const script = rest.findIndex((a) => a.endsWith('dist/gateway/main.js'));
    const nodeFlags = rest.slice(0, script);
    const entry = fromSource ? ['--import', 'tsx', join(REPO, 'gateway/main.ts')] : [rest[script]!];
    return [node!, ...nodeFlags, ...profFlags('gateway'), ...entry, ...rest.slice(script + 1)];
  },
});
gw.proc.stdout?.on('data', (d: Buffer) => gwLines.push(...d.toString().split('\n')));
const sim = spawn(process.execPath, ['--import', 'tsx', join(REPO, 'bench/sim-agents.ts'), `127.0.0.1:${gw.ports.agent}`, '1', 'bench'], { stdio: ['ignore', 'ignore', 'inherit'] });
const results: Record<string, Awaited<ReturnType<typeof load>>> = {};
try {
  await new Promise((r) => setTimeout(r, 2500));
  console.log(`gateway (${fromSource ? 'source' : 'dist'}): ${rate} reviews/s for ${seconds} s`);
  results.gateway = await load(`https://127.0.0.1:${gw.ports.webhook}/mutate/nodes`, gw.pid, gwLines);
  const port = await freePort();
  const bareLines: string[] = [];
  const bare = startChild('bare-webhook', process.execPath, [...GATEWAY_NODE_ARGS, ...profFlags('bare'), '--import', 'tsx', join(REPO, 'bench/bare-webhook.ts'), String(port), gw.tlsDir], { echo: false });
  bare.proc.stdout?.on('data', (d: Buffer) => bareLines.push(...d.toString().split('\n')));
  try {
    await bare.waitForLine((line) => line === 'listening', 20_000);
    console.log(`bare node:https: ${rate} reviews/s for ${seconds} s`);
    results.bare = await load(`https://127.0.0.1:${port}/mutate/nodes`, bare.pid, bareLines);
  } finally {
    await bare.stop();
  }
} finally {
  sim.kill('SIGTERM');
  await gw.stop();
}
for (const [name, { r, cpuUs, gc, window }] of Object.entries(results)) {
  const profile = mainThreadProfile(readdirSync(join(dir, name)));
  console.log(`\n=== ${name}: p50 ${r.p50} ms  p99 ${r.p99} ms  p99.9 ${r.p99_9} ms  ${Math.round(r.reqPerS)} req/s  failed ${r.failed}  process CPU ${cpuUs.toFixed(0)} µs/request`);
  if (traceGc) console.log(`GC in the window: ${gc}`);
  // The main thread's samples in the load window only: start-up, module loading and the warm-up are left out.
  if (profile) console.log(formatSummary(summarize(JSON.parse(readFileSync(join(dir, name, profile), 'utf8')), window), r.total));
}
console.log(`\nprofiles in ${dir}`);
