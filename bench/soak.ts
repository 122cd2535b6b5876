// The soak of issue 8, bounded and on loopback: 5,000 simulated agents at
// 1 Hz plus kubelet-shaped webhook traffic at 500 requests/s for SOAK_MINUTES
// (default 10). Errors must be zero and memory flat. Not part of
// `npm run bench` (its budget is 15 minutes): `npm run soak`.
//
// Every 10 s: the gateway's RSS (/proc), V8 heap used and sample counters
// (its metrics port). Memory is judged on the series after a warm-up (the
// first 20% of the run: the 60 s usage window fills, every node has been
// reviewed, the JIT has settled): the mean of the first 2 minutes after it
// against the mean of the last 2 minutes, and the least-squares slope.
import { spawn, type ChildProcess } from 'node:child_process';
import { loadavg } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { metricValue, rssMiB, watchProcess } from './proc-stats.js';
import { REPO, startGateway, startSimAgents } from './processes.js';
import { round, runIfMain, type BenchResult } from './result.js';

const AGENTS = 5000;
const RATE = 500;
const EVERY_S = 10;
/**
 * Flat means: heap growth from the first to the last 2 minutes after warm-up
 * under 10 MiB or 5% of the first, whichever is larger (the two windows'
 * centres are 6 minutes apart in a 10-minute run, ~1.8 million samples and
 * ~180,000 reviews later: a leak of 6 bytes a sample or 60 bytes a review
 * passes 10 MiB; 5% leaves room for where the old-generation sawtooth of
 * ~100 MiB stands in each window), and RSS growth under 10% (RSS also moves
 * with the allocator and V8's heap sizing, so it gets a relative bound).
 */
const HEAP_TOLERANCE_MIB = 10;
const HEAP_TOLERANCE = 0.05;
const RSS_TOLERANCE = 0.1;
const SAMPLE_RESULTS = ['stored', 'duplicate', 'not-current-stream', 'unknown-node', 'rate-limited'];
const OUTCOMES = ['patched', 'unchanged', 'no-data', 'skipped', 'bad-request', 'error'];

interface Point { t: number; rssMiB: number; heapMiB: number; stored: number }
interface CannonResult {
  latency: { p50: number; p90: number; p99: number; p99_9: number; max: number };
  requests: number;
  non2xx: number;
  errors: number;
  timeouts: number;
  /** The load generator's own CPU over its life. */
  millicores: number;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const mean = (a: number[]) => a.reduce((x, y) => x + y, 0) / Math.max(1, a.length);
const MiB = 2 ** 20;

/** Least-squares slope of y over x. */
function slope(xs: number[], ys: number[]): number {
  const mx = mean(xs);
  const my = mean(ys);
  let num = 0;
  let den = 0;
  for (let i = 0; i < xs.length; i++) {
    num += (xs[i]! - mx) * (ys[i]! - my);
    den += (xs[i]! - mx) ** 2;
  }
  return den === 0 ? 0 : num / den;
}

/** Each line a child writes to a stream. */
function onLines(stream: NodeJS.ReadableStream | null | undefined, fn: (line: string) => void): void {
  if (stream) createInterface({ input: stream }).on('line', fn);
}

const exited = (child: ChildProcess) =>
  new Promise<void>((resolve) => (child.exitCode !== null || child.signalCode !== null ? resolve() : child.once('exit', () => resolve())));

export async function run(): Promise<BenchResult> {
  const minutes = Number(process.env.SOAK_MINUTES ?? 10);
  if (!(minutes > 0)) throw new Error(`SOAK_MINUTES must be a positive number, not ${process.env.SOAK_MINUTES}`);
  const durationS = Math.round(minutes * 60);
  const warmupS = durationS * 0.2;
  const compareS = Math.min(120, durationS * 0.2);
  const load = { start: loadavg()[0]!, end: 0 };

  const gw = await startGateway();
  const gwPid = gw.child.pid ?? 0;
  const scrape = async () => (await fetch(`http://127.0.0.1:${gw.ports.metrics}/metrics`)).text();
  const sim = startSimAgents(`127.0.0.1:${gw.ports.grpc}`, AGENTS, 'sim', 'pipe');
  let streamErrors = 0;
  let sent = 0;
  onLines(sim.child.stderr, (line) => {
    streamErrors += 1;
    if (streamErrors <= 5) console.error(`  agent stream error: ${line}`);
  });
  onLines(sim.child.stdout, (line) => {
    const m = /^sent (\d+)/.exec(line);
    if (m) sent = Number(m[1]);
  });
  let cannon: ChildProcess | undefined;
  try {
    const t0 = Date.now();
    await sim.ready;
    console.log(`soak: ${AGENTS} agents welcomed in ${round((Date.now() - t0) / 1000, 1)} s; ${RATE} webhook requests/s for ${minutes} min (load average ${load.start.toFixed(2)})`);
    await sleep(5000); // a few samples for every node before its first review

    cannon = spawn(process.execPath, ['--import', 'tsx', join(REPO, 'bench/soak-cannon.ts'), `https://127.0.0.1:${gw.ports.webhook}/mutate/nodes`, String(RATE), String(durationS), String(AGENTS), 'sim'], {
      // The load generator trusts the gateway's self-signed certificate; nothing else does.
      env: { ...process.env, NODE_TLS_REJECT_UNAUTHORIZED: '0' },
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    let seen = { responses: 0, non2xx: 0, errors: 0 };
    let begin = 0;
    let watch: { gateway: ReturnType<typeof watchProcess>; agents: ReturnType<typeof watchProcess> } | undefined;
    const result = new Promise<CannonResult>((resolve, reject) => {
      onLines(cannon!.stdout, (line) => {
        if (line === 'started') {
          begin = Date.now();
          watch = { gateway: watchProcess(gwPid, 60_000), agents: watchProcess(sim.child.pid ?? 0, 60_000) };
        }
        if (line.startsWith('progress ')) seen = JSON.parse(line.slice(9)) as typeof seen;
        if (line.startsWith('result ')) resolve(JSON.parse(line.slice(7)) as CannonResult);
      });
      cannon!.once('exit', (code) => reject(new Error(`webhook load generator exited ${code} without a result`)));
    });
    while (!begin) await sleep(50);
    const points: Point[] = [];
    let scraping = Promise.resolve();
    const tick = setInterval(() => {
      scraping = (async () => {
        const t = Math.round((Date.now() - begin) / 1000);
        const text = await scrape();
        const p = { t, rssMiB: rssMiB(gwPid), heapMiB: (metricValue(text, 'oversell_gateway_nodejs_heap_size_used_bytes') ?? NaN) / MiB, stored: metricValue(text, 'oversell_samples_received_total', '{result="stored"}') ?? 0 };
        points.push(p);
        console.log(`  [${String(t).padStart(4)} s] gateway RSS ${p.rssMiB.toFixed(0)} MiB  heap ${p.heapMiB.toFixed(1)} MiB  webhook ${Math.round(seen.responses / t)} req/s  non-2xx ${seen.non2xx}  errors ${seen.errors}  samples stored ${p.stored} / sent ${sent}  stream errors ${streamErrors}`);
      })().catch((err: unknown) => console.error(`  scrape failed: ${(err as Error).message}`));
    }, EVERY_S * 1000);
    const cannonResult = await result;
    clearInterval(tick);
    await scraping;
    const usage = { gateway: watch!.gateway.stop(), agents: watch!.agents.stop() };
    load.end = loadavg()[0]!;

    // Stop the agents (the simulator prints its final count), let the gateway drain, then count.
    sim.child.kill('SIGTERM');
    await exited(sim.child);
    await sleep(2000);
    const text = await scrape();
    const samples = Object.fromEntries(SAMPLE_RESULTS.map((r) => [r, metricValue(text, 'oversell_samples_received_total', `{result="${r}"}`) ?? 0]));
    const outcomes = Object.fromEntries(OUTCOMES.map((o) => [o, metricValue(text, 'oversell_webhook_request_duration_seconds_count', `{outcome="${o}"}`) ?? 0]));

    // Memory after warm-up: first and last windows, slope per minute.
    const after = points.filter((p) => p.t > warmupS);
    const k = Math.max(1, Math.round(compareS / EVERY_S));
    const first = after.slice(0, k);
    const last = after.slice(-k);
    const heap = { start: points[0]?.heapMiB ?? NaN, end: points.at(-1)?.heapMiB ?? NaN, first: mean(first.map((p) => p.heapMiB)), last: mean(last.map((p) => p.heapMiB)) };
    const rss = { start: points[0]?.rssMiB ?? NaN, end: points.at(-1)?.rssMiB ?? NaN, first: mean(first.map((p) => p.rssMiB)), last: mean(last.map((p) => p.rssMiB)) };
    const heapSlope = slope(after.map((p) => p.t / 60), after.map((p) => p.heapMiB));
    const rssSlope = slope(after.map((p) => p.t / 60), after.map((p) => p.rssMiB));
    const heapGrowth = heap.last - heap.first;
    const rssGrowth = rss.last - rss.first;

    const lat = cannonResult.latency;
    const failed = cannonResult.non2xx + cannonResult.errors + cannonResult.timeouts;
    const expected = RATE * durationS;
    const refused = SAMPLE_RESULTS.filter((r) => r !== 'stored').reduce((n, r) => n + samples[r]!, 0);
    const undecided = outcomes['no-data']! + outcomes.skipped! + outcomes['bad-request']! + outcomes.error!;
    const gatewayMillicores = Math.round(usage.gateway.millicores);
    console.log(`soak: ${cannonResult.requests} reviews, p99 ${lat.p99} ms, failed ${failed}; stream errors ${streamErrors}; heap ${round(heap.first, 1)} -> ${round(heap.last, 1)} MiB (slope ${round(heapSlope, 2)} MiB/min), RSS ${round(rss.first)} -> ${round(rss.last)} MiB`);
    return {
      name: 'soak',
      summary: `${minutes} min, ${AGENTS} agents at 1 Hz + ${RATE} webhook req/s: ${failed} failed reviews, ${streamErrors} stream errors, p99 ${lat.p99} ms; heap ${round(heap.first, 1)} -> ${round(heap.last, 1)} MiB after warm-up (${round(heapSlope, 2)} MiB/min), RSS ${Math.round(rss.first)} -> ${Math.round(rss.last)} MiB`,
      figures: {
        minutes,
        agents: AGENTS,
        webhook_rate_target_per_s: RATE,
        webhook_requests_total: cannonResult.requests,
        webhook_req_per_s: round(cannonResult.requests / durationS, 1),
        webhook_non2xx: cannonResult.non2xx,
        webhook_errors: cannonResult.errors,
        webhook_timeouts: cannonResult.timeouts,
        webhook_p50_ms: lat.p50,
        webhook_p90_ms: lat.p90,
        webhook_p99_ms: lat.p99,
        webhook_p99_9_ms: lat.p99_9,
        webhook_max_ms: lat.max,
        ...Object.fromEntries(OUTCOMES.map((o) => [`reviews_${o.replace('-', '_')}`, outcomes[o]!])),
        agent_stream_errors: streamErrors,
        samples_sent: sent,
        ...Object.fromEntries(SAMPLE_RESULTS.map((r) => [`samples_${r.replace(/-/g, '_')}`, samples[r]!])),
        gateway_millicores: gatewayMillicores,
        sim_agents_millicores: Math.round(usage.agents.millicores),
        webhook_load_generator_millicores: cannonResult.millicores,
        gateway_rss_start_mib: round(rss.start, 1),
        gateway_rss_end_mib: round(rss.end, 1),
        gateway_rss_max_mib: round(Math.max(...points.map((p) => p.rssMiB)), 1),
        gateway_heap_start_mib: round(heap.start, 1),
        gateway_heap_end_mib: round(heap.end, 1),
        warmup_s: warmupS,
        compare_window_s: k * EVERY_S,
        heap_first_window_mean_mib: round(heap.first, 1),
        heap_last_window_mean_mib: round(heap.last, 1),
        heap_growth_mib: round(heapGrowth, 1),
        heap_slope_mib_per_min: round(heapSlope, 3),
        rss_first_window_mean_mib: round(rss.first, 1),
        rss_last_window_mean_mib: round(rss.last, 1),
        rss_growth_mib: round(rssGrowth, 1),
        rss_slope_mib_per_min: round(rssSlope, 3),
        load_average_1m_start: round(load.start),
        load_average_1m_end: round(load.end),
        memory_series: points.map((p) => `${p.t}s:${p.rssMiB.toFixed(0)}/${p.heapMiB.toFixed(1)}`).join(' '),
      },
      targets: [
        { name: 'webhook: no non-2xx, errors or timeouts', measured: `${cannonResult.non2xx} non-2xx, ${cannonResult.errors} errors, ${cannonResult.timeouts} timeouts`, met: failed === 0 },
        { name: `webhook rate held: >= 98% of ${RATE} req/s`, measured: `${cannonResult.requests} of ${expected}`, met: cannonResult.requests >= 0.98 * expected },
        { name: 'no review held past the 2 s webhook timeout', measured: `max ${lat.max} ms`, met: lat.max < 2000 },
        { name: 'every review a decision (no no-data, skipped, bad-request, error)', measured: String(undecided), met: undecided === 0 },
        { name: 'agent streams: no errors', measured: String(streamErrors), met: streamErrors === 0 },
        // The last 50 ms slice the simulator wrote before SIGTERM may not have left it: allow 0.1%.
        { name: 'samples: none refused, >= 99.9% of sent stored', measured: `${samples.stored} stored of ${sent} sent, ${refused} refused`, met: refused === 0 && samples.stored! >= 0.999 * sent },
        ...(minutes >= 5
          ? [
              { name: `heap flat: growth < ${HEAP_TOLERANCE_MIB} MiB or ${HEAP_TOLERANCE * 100}% after warm-up`, measured: `${round(heapGrowth, 1)} MiB (${round((100 * heapGrowth) / heap.first, 1)}%, ${round(heapSlope, 2)} MiB/min)`, met: heapGrowth < Math.max(HEAP_TOLERANCE_MIB, HEAP_TOLERANCE * heap.first) },
              { name: `RSS flat: growth < ${RSS_TOLERANCE * 100}% after warm-up`, measured: `${round(rssGrowth, 1)} MiB (${round((100 * rssGrowth) / rss.first, 1)}%)`, met: rssGrowth < RSS_TOLERANCE * rss.first },
            ]
          : [{ name: '(run under 5 min: memory not judged, the 60 s usage window is still filling)', measured: `heap ${round(heapGrowth, 1)} MiB, RSS ${round(rssGrowth, 1)} MiB`, met: true }]),
      ],
      notes: [
        `memory every ${EVERY_S} s: RSS from /proc, heap = oversell_gateway_nodejs_heap_size_used_bytes; warm-up the first ${warmupS} s; flat compares the mean of the first ${k * EVERY_S} s after warm-up with the mean of the last ${k * EVERY_S} s; slope by least squares over the series after warm-up`,
        `webhook: autocannon 9 in its own process, 10 instances of 4 HTTPS keep-alive connections at ${RATE / 10}/s each, started 100 ms apart (autocannon sends each second's quota in a burst), 36 KB nodes/status reviews naming sim-0 .. sim-${AGENTS - 1} in turn (each node every ${AGENTS / RATE} s, the kubelet's status period); latency from every response, no coordinated-omission fill`,
        `agents: one simulator process, ${AGENTS} real AgentStream streams over several HTTP/2 connections; stream errors are the lines on its stderr`,
        'gateway, simulator, load generator and the metrics scrape share the same 2 cores, with other work on the machine (load average in the figures)',
      ],
    };
  } finally {
    cannon?.kill('SIGTERM');
    sim.child.kill('SIGTERM');
    await gw.stop();
  }
}

runIfMain(import.meta.url, run, (r) => {
  console.log(r.summary);
  for (const t of r.targets) console.log(`  ${t.met ? 'met   ' : 'MISSED'}  ${t.name}: ${t.measured}`);
}, true);
