// The webhook's p99 against a bare node:https server's (bench/bare-webhook.ts),
// same run, same load: issue 32's "webhook alone at 1,000 reviews/s: p99 <=
// 1.5x the bare node:https server's". On a shared 2-core machine other work
// comes and goes within a minute, so one run of each, one after the other,
// compares two different machines. Here both servers stay up and are measured
// in alternating rounds (gateway, bare; then bare, gateway; ...), each round a
// pair, and the target is the median of the pairs' ratios; every pair is
// reported, so the spread shows.
//   node --import tsx bench/webhook-vs-bare.ts   (BENCH_QUICK=1: 3 rounds of 8 s)
// OVERSELL_BENCH_GATEWAY_SOURCE=1 runs gateway/main.ts through tsx instead of
// dist/ (to measure an edit without a build).
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ensureOha, oha, OHA_VERSION, type OhaResult } from './oha.js';
import { cpuSeconds } from './proc-stats.js';
import { freePort, GATEWAY_NODE_ARGS, REPO, startChild, startGateway, type Child, type GatewayProcess } from './processes.js';
import { round, runIfMain, type BenchResult, type Target } from './result.js';
import { reviewBody } from './review-body.js';

type Measured = OhaResult & { cpuUsPerRequest: number };

export interface Pair {
  gateway: Measured;
  bare: Measured;
  /** bare-webhook.ts review: node:https doing the review's own work and nothing else. */
  review?: Measured;
  /** gateway p99 / bare p99. */
  ratio: number;
}

export interface Comparison {
  rate: number;
  seconds: number;
  pairs: Pair[];
  /** Median over the pairs of gateway p99 / bare p99. */
  medianRatio: number;
  target: Target;
}

export const median = (xs: readonly number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
};

/** The bare reference in its own process, with the gateway's Node flags and certificate; `review`: doing the review's work too. */
export async function startBare(tlsDir: string, review = false): Promise<Child & { url: string }> {
  const port = await freePort();
  const child = startChild(review ? 'bare-review' : 'bare-webhook', process.execPath, [...GATEWAY_NODE_ARGS, '--import', 'tsx', join(REPO, 'bench/bare-webhook.ts'), String(port), tlsDir, ...(review ? ['review'] : [])]);
  await child.waitForLine((line) => line === 'listening', 20_000);
  return { ...child, url: `https://127.0.0.1:${port}/mutate/nodes` };
}

type Server = { url: string; pid: number };

/**
 * `rounds` pairs of `seconds` at `rate` reviews/s on 50 kept-alive
 * connections (oha -q with latency correction: an open model), alternating
 * which server goes first. All are warmed up first. With `review` (a bare
 * server doing the review's work), each round measures it too, between the two.
 */
export async function compareWithBare(o: { ohaBin: string; gateway: Server; bare: Server; review?: Server; bodyFile: string; rate?: number; seconds?: number; rounds?: number; log?: (line: string) => void }): Promise<Comparison> {
  const { ohaBin, bodyFile } = o;
  const rate = o.rate ?? 1000;
  const seconds = o.seconds ?? 15;
  const rounds = o.rounds ?? 3;
  const log = o.log ?? console.log;
  const measure = async (server: { url: string; pid: number }) => {
    const cpu0 = cpuSeconds(server.pid);
    const r = await oha(ohaBin, server.url, bodyFile, ['-c', '50', '-q', String(rate), '--latency-correction', '-z', `${seconds}s`]);
    return { ...r, cpuUsPerRequest: ((cpuSeconds(server.pid) - cpu0) * 1e6) / Math.max(1, r.total) };
  };
  for (const server of [o.gateway, o.bare, ...(o.review ? [o.review] : [])]) await oha(ohaBin, server.url, bodyFile, ['-c', '10', '-z', '3s']);
  const pairs: Pair[] = [];
  const line = (what: string, r: Pair['gateway']) =>
    `    ${what.padEnd(16)} p50 ${r.p50} ms  p99 ${r.p99} ms  p99.9 ${r.p99_9} ms  ${Math.round(r.reqPerS)} req/s  failed ${r.failed}  server CPU ${Math.round(r.cpuUsPerRequest)} µs/request`;
  for (let i = 0; i < rounds; i++) {
    log(`  webhook against bare node:https, round ${i + 1} of ${rounds}: ${rate} reviews/s, ${seconds} s each`);
    const order: Array<'gateway' | 'review' | 'bare'> = ['gateway', ...(o.review ? (['review'] as const) : []), 'bare'];
    const got: Partial<Record<'gateway' | 'review' | 'bare', Measured>> = {};
    for (const which of i % 2 === 0 ? order : order.reverse()) got[which] = await measure(which === 'gateway' ? o.gateway : which === 'bare' ? o.bare : o.review!);
    const pair: Pair = { gateway: got.gateway!, bare: got.bare!, ...(got.review && { review: got.review }), ratio: got.gateway!.p99 / got.bare!.p99 };
    pairs.push(pair);
    log(line('gateway', pair.gateway));
    if (pair.review) log(line('node:https+review', pair.review));
    log(line('bare node:https', pair.bare));
    log(`    p99 ratio ${round(pair.ratio, 2)}x${pair.review ? `; node:https doing the review's work: ${round(pair.review.p99 / pair.bare.p99, 2)}x` : ''}`);
  }
  const medianRatio = median(pairs.map((p) => p.ratio));
  const failed = pairs.reduce((n, p) => n + p.gateway.failed + p.bare.failed, 0);
  const ratios = pairs.map((p) => `${round(p.ratio, 2)}x (${p.gateway.p99} against ${p.bare.p99} ms)`).join(', ');
  return {
    rate, seconds, pairs, medianRatio,
    target: {
      name: `webhook p99 <= 1.5x a bare node:https server's at ${rate} reviews/s, same run (median of ${rounds} alternating pairs)`,
      measured: `${round(medianRatio, 2)}x; pairs ${ratios}${failed ? `; ${failed} failed requests` : ''}`,
      met: medianRatio <= 1.5 && failed === 0,
    },
  };
}

/** The figures of a comparison for a BenchResult, keys prefixed. */
export function comparisonFigures(c: Comparison, prefix = 'vs_bare_'): Record<string, number> {
  const ratios = c.pairs.map((p) => p.ratio);
  return {
    [`${prefix}median_p99_ratio`]: round(c.medianRatio, 2),
    [`${prefix}min_p99_ratio`]: round(Math.min(...ratios), 2),
    [`${prefix}max_p99_ratio`]: round(Math.max(...ratios), 2),
    [`${prefix}gateway_median_p99_ms`]: round(median(c.pairs.map((p) => p.gateway.p99)), 2),
    [`${prefix}bare_median_p99_ms`]: round(median(c.pairs.map((p) => p.bare.p99)), 2),
    [`${prefix}gateway_median_p50_ms`]: round(median(c.pairs.map((p) => p.gateway.p50)), 2),
    [`${prefix}bare_median_p50_ms`]: round(median(c.pairs.map((p) => p.bare.p50)), 2),
    [`${prefix}gateway_cpu_us_per_request`]: Math.round(median(c.pairs.map((p) => p.gateway.cpuUsPerRequest))),
    [`${prefix}bare_cpu_us_per_request`]: Math.round(median(c.pairs.map((p) => p.bare.cpuUsPerRequest))),
    ...(c.pairs.every((p) => p.review) && {
      [`${prefix}review_median_p99_ratio`]: round(median(c.pairs.map((p) => p.review!.p99 / p.bare.p99)), 2),
      [`${prefix}review_median_p99_ms`]: round(median(c.pairs.map((p) => p.review!.p99)), 2),
      [`${prefix}review_cpu_us_per_request`]: Math.round(median(c.pairs.map((p) => p.review!.cpuUsPerRequest))),
    }),
  };
}

/** The gateway as the benchmarks start it, or from source with OVERSELL_BENCH_GATEWAY_SOURCE=1. */
export function startBenchGateway(): Promise<GatewayProcess> {
  const fromSource = process.env.OVERSELL_BENCH_GATEWAY_SOURCE === '1';
  return startGateway({
    ...(fromSource && {
      launcher: (argv: string[]) => argv.flatMap((a) => (a.endsWith('dist/gateway/main.js') ? ['--import', 'tsx', join(REPO, 'gateway/main.ts')] : [a])),
    }),
  });
}

export async function run(options: { quick?: boolean } = {}): Promise<BenchResult> {
  const seconds = options.quick ? 8 : 15;
  const ohaBin = await ensureOha();
  const gw = await startBenchGateway();
  // One agent streaming, so reviews are decided from usage as in the webhook benchmark.
  const sim = spawn(process.execPath, ['--import', 'tsx', join(REPO, 'bench/sim-agents.ts'), `127.0.0.1:${gw.ports.agent}`, '1', 'bench'], { stdio: ['ignore', 'ignore', 'inherit'] });
  const dir = mkdtempSync(join(tmpdir(), 'oversell-bench-vs-bare-'));
  const bodyFile = join(dir, 'review.json');
  writeFileSync(bodyFile, reviewBody());
  let bare: (Child & { url: string }) | undefined;
  let review: (Child & { url: string }) | undefined;
  try {
    bare = await startBare(gw.tlsDir);
    review = await startBare(gw.tlsDir, true);
    await new Promise((r) => setTimeout(r, 2500)); // a few samples for the node
    const c = await compareWithBare({ ohaBin, gateway: { url: `https://127.0.0.1:${gw.ports.webhook}/mutate/nodes`, pid: gw.pid }, bare, review, bodyFile, seconds });
    return {
      name: 'webhook-vs-bare',
      summary: `webhook p99 ${round(c.medianRatio, 2)}x a bare node:https server's at ${c.rate} reviews/s (median of ${c.pairs.length} pairs)`,
      figures: comparisonFigures(c),
      targets: [c.target],
      notes: [
        `oha ${OHA_VERSION}, HTTPS/1.1 keep-alive on 50 connections (as the API server calls a webhook: its client keeps connections alive, and a fastify https server offers only HTTP/1.1 in ALPN), -q with --latency-correction; the 37 KB kubelet-shaped review`,
        'each server in its own process with the deployed Node flags, the load generator beside them on the same 2 cores, other work on the machine too',
        'node:https+review: bench/bare-webhook.ts review, a bare server doing the review\'s own work (review-reader.ts, reviewNode(), the answer) and nothing else: what a review costs on any server',
      ],
    };
  } finally {
    await review?.stop();
    await bare?.stop();
    sim.kill('SIGTERM');
    await gw.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}

runIfMain(import.meta.url, run);
