// The whole load of a 10,000-node cluster at once, on one gateway replica
// living under its pod's limits. The gateway runs as deployed against the
// local control plane (scripts/cluster/cluster.sh): gRPC over TLS, agents
// authenticated by TokenReview, query callers by SubjectAccessReview, the
// bound-pods watch on. Meanwhile, from bench/loadgen (Go, pinned to the other
// CPU where there is one): every agent on its own TLS connection with its
// own pod-bound token, one sample a second; kubelet-shaped status reviews,
// open-loop, each naming a different live node; and GetNode calls from a
// viewer. Reported: what the webhook, the query API and the store saw, and
// what the kernel accounted to the gateway's cgroup.
//
//   node --import tsx bench/cluster.ts                 # 10,000 agents, 1,000 reviews/s
//   BENCH_QUICK=1 node --import tsx bench/cluster.ts   # 1,000 agents, 100 reviews/s
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { cpus, tmpdir } from 'node:os';
import { ADMIN_KUBECONFIG, cluster } from '../test/e2e/cluster.js';
import { metricValue, scrapeMetric } from '../test/helpers/metrics.js';
import { sleep } from './agent-overhead.js';
import { useControlPlane } from './control-plane.js';
import { peakRssMiB } from './proc-stats.js';
import { benchCgroup, inCgroup, type CgroupUsage } from './cgroup.js';
import { formatLongRuns, formatSummary, longRuns, summarize, type CpuProfile } from './cpu-profile.js';
import { REVIEWS_PER_NODE_PER_S } from './capacity.js';
import { AGENT_SERVICE_ACCOUNT, BENCH_NAMESPACE, createAgents, deleteAgents } from './cluster-objects.js';
import { ensureLoadgen, PROTO, startLoadgen, waitForLine, type Latencies, type LoadgenRun } from './loadgen.js';
import { deployedMemoryLimitMiB, GATEWAY_NODE_ARGS, log, startGateway, type GatewayProcess } from './processes.js';
import { round, runIfMain, type BenchResult } from './result.js';
import { reviewBody } from './webhook.js';
import { SUMMARY_SEND_EVERY_MS } from '../gateway/config/defaults.js';

const PREFIX = 'sim';
const NODE_PLACEHOLDER = 'bench-node-placeholder';
const UID_PLACEHOLDER = 'bench-uid-placeholder';
/** The target's CPU: deploy/base ships a request of 100m and no CPU limit, so the quota is the target's core. */
const CPU_CORES = 1;
/** GetNode calls a second: a dashboard and a few `oversell top`s. */
const QUERY_RATE = 50;
/** deploy/base/webhook.yaml's timeoutSeconds: the API server stops waiting for an answer then. */
const WEBHOOK_TIMEOUT_S = 2;
/** The second pass's memory limit, when the shipped one is not enough: room to measure the need. */
const ROOMY_MEMORY_MIB = 4096;
/**
 * When 10,000 nodes do not fit the core: the same load for a quarter of the
 * nodes (their agents, reviews and queries), under the shipped limits, to
 * measure what one core does hold (install.md sizes the CPU from it).
 */
const SMALLER_AGENTS = 2500;
/** Twice the target's cluster on the same replica: every review must still be answered, and what was shed is reported. */
const LARGER_AGENTS = 20_000;

interface AgentsResult {
  agents: number; welcomed: number; connectedAtEnd: number; sent: number; messages: number; streamErrors: Record<string, number>; reconnects: number; connectMs: number;
  settingsReceived: number; batchAtEnd: Record<string, number>; [k: string]: unknown;
}
/** What the gateway's load shedder did over the measured window, read from its /metrics every second. */
interface Shedding { sendEveryMaxS: number; sendEveryEndS: number; minSampleIntervalMaxS: number; mainOverloadedS: number; ingestOverloadedS: number; queriesShed: number; agentConnectionsRefused: number }
interface ReviewsResult { sent: number; ok: number; errors: Record<string, number>; rate: number; latencyMs: Latencies; generatorCpuMs: number }
interface QueryResult { calls: number; ok: number; errors: Record<string, number>; latencyMs: Latencies; lagMs: { p50: number; p99: number; max: number }; noSample: number }

const diff = (a: CgroupUsage, b: CgroupUsage) => ({ cpuSeconds: b.cpuSeconds - a.cpuSeconds, throttledSeconds: b.throttledSeconds - a.throttledSeconds, throttledPeriods: b.throttledPeriods - a.throttledPeriods, periods: b.periods - a.periods });

interface Setup {
  loadgen: string;
  agents: number;
  reviewRate: number;
  warmupS: number;
  windowS: number;
  tokens: string;
  viewerToken: string;
  /** taskset prefix for the load generators. */
  pin: string[];
}

/** One gateway's life under `limits`: undefined figures when it did not survive the agents connecting. */
interface Pass {
  agents: number;
  reviewRate: number;
  memoryMiB: number;
  /** Why the gateway died, when it did. */
  died?: string;
  connectS?: number;
  connectCpuS?: number;
  reviews?: ReviewsResult;
  query?: QueryResult;
  agentRun?: AgentsResult;
  shedding?: Shedding;
  stored?: number;
  millicores?: number;
  throttledPct?: number;
  throttledPeriods?: number;
  rssPeakMiB: number;
  cgroupPeakMiB: number;
  oomKills: number;
  describe: string;
}

/** Pods in each agent's report (OVERSELL_BENCH_CLUSTER_PODS): 30, a busy node's; 0 to weigh what the reports cost. */
const PODS_PER_NODE = Number(process.env.OVERSELL_BENCH_CLUSTER_PODS ?? 30);

/** The kubelets' status writes under oversell, as capacity.ts plans with them. */
const reviewRateFor = (nodes: number) => nodes * REVIEWS_PER_NODE_PER_S;

const total = (counts: Record<string, number>) => Object.values(counts).reduce((s, n) => s + n, 0);

async function pass(setup: Setup, memoryBytes: number): Promise<Pass> {
  const memoryMiB = memoryBytes / 2 ** 20;
  const group = benchCgroup(`oversell-bench-gateway-${process.pid}-${setup.agents}-${memoryMiB}`, { cpuCores: CPU_CORES, memoryBytes });
  log(`gateway in ${group.describe}`);
  let gateway: GatewayProcess | undefined;
  let agentRun: LoadgenRun<AgentsResult> | undefined;
  let rssPeakMiB = NaN;
  // OVERSELL_BENCH_CLUSTER_PROFILE=<dir>: each thread of the gateway under --cpu-prof, summed over the measured window only.
  const profileDir = process.env.OVERSELL_BENCH_CLUSTER_PROFILE ? join(process.env.OVERSELL_BENCH_CLUSTER_PROFILE, `${setup.agents}-agents-${process.pid}`) : undefined;
  let profiled: { fromUs: number; toUs: number; reviews: number } | undefined;
  try {
    gateway = await startGateway({
      // OVERSELL_BENCH_GATEWAY_NODE_FLAGS: Node flags to try beside the deployed ones (space-separated).
      nodeArgs: [...(profileDir ? ['--cpu-prof', `--cpu-prof-dir=${profileDir}`] : []), ...(process.env.OVERSELL_BENCH_GATEWAY_NODE_FLAGS?.split(' ').filter(Boolean) ?? [])],
      launcher: (argv) => inCgroup(group, argv),
      readyWithinMs: 60_000,
      args: ['--kubeconfig', ADMIN_KUBECONFIG, '--lease-namespace', BENCH_NAMESPACE, '--grpc-tls', 'on', '--auth', 'kubernetes',
        '--agent-service-accounts', `${BENCH_NAMESPACE}/${AGENT_SERVICE_ACCOUNT}`, '--sidecars', 'none'],
    });
    const gw = gateway;
    // The kernel's VmHWM of the gateway, read while it lives (an OOM kill takes it along).
    const hwm = setInterval(() => {
      try {
        rssPeakMiB = Math.round(peakRssMiB(gw.pid));
      } catch {
        // exited
      }
    }, 200);
    const died = gw.exited.then(() => `the gateway exited while ${setup.agents} agents connected (${group.usage().oomKills > 0 ? `OOM-killed at the ${memoryMiB} MiB limit` : 'see its output above'})`);
    const ca = join(gw.tlsDir, 'ca.crt');
    const tls = ['--ca', ca, '--server-name', 'localhost', '--proto', PROTO];
    log(`${setup.agents} agents connecting, each on its own TLS connection, each token reviewed by the API server`);
    const connectStart = group.usage();
    // --batch 0: each agent sends as the gateway says (its welcome's batches, the load shedder's Settings), as the agent does.
    agentRun = startLoadgen<AgentsResult>(setup.loadgen, 'agents', ['--address', `127.0.0.1:${gw.ports.agent}`, '--tokens', setup.tokens, '--batch', '0', '--summaries', '1', '--pods', String(PODS_PER_NODE), '--pod-report-every', '1', ...tls], { launcher: setup.pin });
    const connected = await Promise.race([waitForLine(agentRun, /^connected-in-ms \d+/, 15 * 60_000, `${setup.agents} agents`), plateau(agentRun, setup.agents), died]);
    if (!connected.startsWith('connected-in-ms')) {
      clearInterval(hwm);
      const u = group.usage();
      log(connected);
      return { agents: setup.agents, reviewRate: setup.reviewRate, memoryMiB, died: connected, rssPeakMiB, cgroupPeakMiB: Math.round(u.memoryPeakBytes / 2 ** 20), oomKills: u.oomKills, describe: group.describe };
    }
    const connectS = Number(connected.split(' ')[1]) / 1000;
    const connectCpuS = diff(connectStart, group.usage()).cpuSeconds;
    const liveAtStart = Number(connected.split(' ')[2] ?? setup.agents);
    log(`${liveAtStart === setup.agents ? 'all ' : ''}${liveAtStart} of ${setup.agents} agents welcomed in ${connectS.toFixed(1)} s; gateway CPU meanwhile ${connectCpuS.toFixed(1)} s`);

    log(`reviews at ${setup.reviewRate}/s over all ${setup.agents} nodes and GetNode at ${QUERY_RATE}/s: ${setup.warmupS} s of warm-up, then ${setup.windowS} s measured`);
    const review = JSON.parse(reviewBody(NODE_PLACEHOLDER)) as { request: { uid: string } };
    review.request.uid = UID_PLACEHOLDER; // the generator gives every request its own, as the API server does
    const template = join(dirname(setup.tokens), 'review.json');
    writeFileSync(template, JSON.stringify(review));
    const reviews = startLoadgen<ReviewsResult>(setup.loadgen, 'reviews', ['--url', `https://127.0.0.1:${gw.ports.webhook}/mutate/nodes`, '--ca', ca,
      '--template', template, '--placeholder', NODE_PLACEHOLDER, '--uid-placeholder', UID_PLACEHOLDER, '--prefix', PREFIX, '--count', String(setup.agents),
      '--rate', String(setup.reviewRate), '--warmup', `${setup.warmupS}s`, '--duration', `${setup.windowS}s`, '--timeout', `${WEBHOOK_TIMEOUT_S}s`], { launcher: setup.pin });
    const query = startLoadgen<QueryResult>(setup.loadgen, 'query', ['--address', `127.0.0.1:${gw.ports.grpc}`, '--token-file', setup.viewerToken, ...tls,
      '--prefix', PREFIX, '--count', String(setup.agents), '--rate', String(QUERY_RATE), '--warmup', `${setup.warmupS}s`, '--duration', `${setup.windowS}s`], { launcher: setup.pin });
    await sleep(setup.warmupS * 1000);
    const windowStart = group.usage();
    const windowStartAt = performance.now();
    const windowFromUs = nowUs();
    const shedding = watchShedding(gw.ports.metrics);
    await sleep(setup.windowS * 1000);
    const windowUsage = diff(windowStart, group.usage());
    const windowToUs = nowUs();
    const shed = await shedding.stop();
    const windowSeconds = (performance.now() - windowStartAt) / 1000;
    const [r, q] = await Promise.all([reviews.result, query.result]);
    profiled = { fromUs: windowFromUs, toUs: windowToUs, reviews: r.ok };

    agentRun.child.kill('SIGTERM');
    const a = await agentRun.result;
    agentRun = undefined;
    await sleep(2000); // the last samples in flight reach the store
    const stored = await scrapeMetric(gw.ports.metrics, 'oversell_samples_received_total', '{result="stored"}');
    clearInterval(hwm);
    rssPeakMiB = Math.round(peakRssMiB(gw.pid));
    const u = group.usage();
    const p: Pass = {
      agents: setup.agents, reviewRate: setup.reviewRate, memoryMiB, connectS, connectCpuS, reviews: r, query: q, agentRun: a, shedding: shed, stored,
      millicores: Math.round((windowUsage.cpuSeconds / windowSeconds) * 1000),
      throttledPct: round((windowUsage.throttledSeconds / windowSeconds) * 100, 1), throttledPeriods: windowUsage.throttledPeriods,
      rssPeakMiB, cgroupPeakMiB: Math.round(u.memoryPeakBytes / 2 ** 20), oomKills: u.oomKills, describe: group.describe,
    };
    log(`webhook p50 ${r.latencyMs.p50} p99 ${r.latencyMs.p99} p99.9 ${r.latencyMs.p99_9} ms (${total(r.errors)} errors); GetNode p99 ${q.latencyMs.p99} ms; lag p99 ${q.lagMs.p99} ms; gateway ${p.millicores} millicores, throttled ${p.throttledPct}% of the window; RSS peak ${rssPeakMiB} MiB; ${Math.max(0, a.sent - stored)} of ${a.sent} samples not stored`);
    return p;
  } finally {
    if (agentRun) agentRun.child.kill('SIGTERM');
    await gateway?.stop();
    if (profileDir && profiled) summarizeProfiles(profileDir, profiled);
    try {
      group.remove();
    } catch (err) {
      log(`could not remove the gateway's cgroup (${(err as Error).message})`);
    }
  }
}

/** The monotonic clock V8 stamps profile samples with, in µs. */
const nowUs = () => Number(process.hrtime.bigint() / 1000n);

/** A thread busy this long without a pause holds up a review past the webhook's p99 target. */
const LONG_RUN_MS = 10;

/** Each thread's profile over the window, printed and saved beside the profiles. */
function summarizeProfiles(dir: string, window: { fromUs: number; toUs: number; reviews: number }): void {
  const files = readdirSync(dir).filter((f) => f.endsWith('.cpuprofile')).sort();
  if (files.length === 0) log(`no profile in ${dir}: did the gateway exit cleanly?`);
  for (const f of files) {
    const profile = JSON.parse(readFileSync(join(dir, f), 'utf8')) as CpuProfile;
    const summary = `${formatSummary(summarize(profile, window), window.reviews, 40)}\n${formatLongRuns(longRuns(profile, LONG_RUN_MS, window), LONG_RUN_MS)}`;
    writeFileSync(join(dir, `${f}.window.txt`), `${summary}\n`);
    log(`profile of ${f} over the measured window (per answered review):\n${summary}`);
  }
}

/** What the load shedder did over the window: its intervals read every SHED_READ_MS, its counters' rise. */
const SHED_READ_MS = 5000;
function watchShedding(metricsPort: number): { stop(): Promise<Shedding> } {
  const seen: Shedding = { sendEveryMaxS: 0, sendEveryEndS: 0, minSampleIntervalMaxS: 0, mainOverloadedS: 0, ingestOverloadedS: 0, queriesShed: 0, agentConnectionsRefused: 0 };
  const counters = (text: string) => ({
    main: metricValue(text, 'oversell_overloaded_seconds_total', '{thread="main"}') ?? NaN,
    ingest: metricValue(text, 'oversell_overloaded_seconds_total', '{thread="ingest"}') ?? NaN,
    queries: metricValue(text, 'oversell_shed_total', '{what="queries"}') ?? NaN,
  });
  const read = async () => {
    const text = await (await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).text();
    const sendEvery = metricValue(text, 'oversell_agent_send_every_seconds') ?? NaN;
    seen.sendEveryMaxS = Math.max(seen.sendEveryMaxS, sendEvery);
    seen.sendEveryEndS = sendEvery;
    seen.minSampleIntervalMaxS = Math.max(seen.minSampleIntervalMaxS, metricValue(text, 'oversell_agent_min_sample_interval_seconds') ?? 0);
    return text;
  };
  const start = read().then(counters);
  let reading: Promise<unknown> = start;
  const timer = setInterval(() => {
    reading = reading.then(read).catch((err: Error) => log(`  could not read the gateway's /metrics (${err.message})`));
  }, SHED_READ_MS);
  return {
    async stop() {
      clearInterval(timer);
      await reading;
      const text = await read();
      const [a, b] = [await start, counters(text)];
      seen.mainOverloadedS = round(b.main - a.main, 1);
      seen.ingestOverloadedS = round(b.ingest - a.ingest, 1);
      seen.queriesShed = b.queries - a.queries;
      // Over the gateway's life: agents past --max-connections, closed as they arrived (they retry).
      seen.agentConnectionsRefused = metricValue(text, 'oversell_connections_refused_total', '{listener="agent",reason="connection-limit"}') ?? 0;
      return seen;
    },
  };
}

/**
 * When the gateway refuses agents past its connection limit, not every agent
 * is ever welcomed: resolves "connected-in-ms <ms> <live>" once the live count
 * has not grown for PLATEAU_MS (and some are live), the rest retrying.
 */
const PLATEAU_MS = 30_000;
function plateau(run: LoadgenRun<AgentsResult>, agents: number): Promise<string> {
  const started = Date.now();
  let best = 0;
  let grewAt = Date.now();
  return new Promise((resolve) => {
    run.lines((line) => {
      const m = /^status (\{.*\})$/.exec(line);
      if (!m) return;
      const live = (JSON.parse(m[1]!) as { live: number }).live;
      if (live > best) {
        best = live;
        grewAt = Date.now();
      } else if (best > 0 && best < agents && Date.now() - grewAt >= PLATEAU_MS) {
        resolve(`connected-in-ms ${grewAt - started} ${best}`);
      }
    });
  });
}

/** A pass's figures, keyed with its memory limit. */
function passFigures(p: Pass, prefix = ''): Record<string, number | string> {
  const k = `${prefix}limit_${p.memoryMiB}mib`;
  if (p.died) return { [`${k}_outcome`]: p.died, [`${k}_cgroup_memory_peak_mib`]: p.cgroupPeakMiB, [`${k}_oom_kills`]: p.oomKills };
  const r = p.reviews!;
  const q = p.query!;
  const a = p.agentRun!;
  const sh = p.shedding!;
  return {
    [`${k}_agents_connected_in_s`]: round(p.connectS!, 1), [`${k}_connect_gateway_cpu_s`]: round(p.connectCpuS!, 1),
    [`${k}_agent_stream_errors`]: JSON.stringify(a.streamErrors), [`${k}_agent_reconnects`]: a.reconnects,
    [`${k}_webhook_p50_ms`]: r.latencyMs.p50, [`${k}_webhook_p99_ms`]: r.latencyMs.p99, [`${k}_webhook_p99_9_ms`]: r.latencyMs.p99_9, [`${k}_webhook_max_ms`]: r.latencyMs.max,
    [`${k}_webhook_achieved_per_s`]: round(r.rate, 1), [`${k}_webhook_errors`]: total(r.errors), [`${k}_webhook_error_kinds`]: JSON.stringify(r.errors),
    [`${k}_get_node_p50_ms`]: q.latencyMs.p50, [`${k}_get_node_p99_ms`]: q.latencyMs.p99, [`${k}_get_node_errors`]: total(q.errors),
    [`${k}_lag_p50_ms`]: q.lagMs.p50, [`${k}_lag_p99_ms`]: q.lagMs.p99,
    [`${k}_gateway_millicores`]: p.millicores!, [`${k}_throttled_pct_of_window`]: p.throttledPct!, [`${k}_throttled_periods`]: p.throttledPeriods!,
    [`${k}_rss_peak_mib`]: p.rssPeakMiB, [`${k}_cgroup_memory_peak_mib`]: p.cgroupPeakMiB, [`${k}_oom_kills`]: p.oomKills,
    [`${k}_samples_sent`]: a.sent, [`${k}_samples_stored`]: p.stored!, [`${k}_samples_dropped`]: Math.max(0, a.sent - p.stored!),
    [`${k}_agent_messages`]: a.messages, [`${k}_agent_samples_per_message`]: round(a.sent / Math.max(1, a.messages), 2),
    [`${k}_agent_settings_received`]: a.settingsReceived, [`${k}_agents_by_samples_per_message_at_end`]: JSON.stringify(a.batchAtEnd),
    [`${k}_send_every_max_s`]: sh.sendEveryMaxS, [`${k}_send_every_end_s`]: sh.sendEveryEndS, [`${k}_min_sample_interval_max_s`]: sh.minSampleIntervalMaxS,
    [`${k}_agents_connected_at_end`]: a.connectedAtEnd, [`${k}_agent_connections_refused`]: sh.agentConnectionsRefused,
    [`${k}_main_overloaded_s`]: sh.mainOverloadedS, [`${k}_ingest_overloaded_s`]: sh.ingestOverloadedS, [`${k}_queries_shed`]: sh.queriesShed,
  };
}

/** Whether the load shedder acted: agents told to send or sample less often than the default, queries or connections refused. */
const shedAny = (p: Pass) => {
  const sh = p.shedding!;
  return sh.sendEveryMaxS > SUMMARY_SEND_EVERY_MS / 1000 || sh.minSampleIntervalMaxS > 0 || sh.queriesShed > 0 || sh.agentConnectionsRefused > 0;
};

const shedLine = (p: Pass) => {
  const sh = p.shedding!;
  const a = p.agentRun!;
  const why = sh.agentConnectionsRefused > 0 ? `${sh.agentConnectionsRefused} connections refused past the connection limit, the agents retrying` : 'none refused past the connection limit: the rest were reconnecting';
  const refused = a.connectedAtEnd < p.agents ? `${a.connectedAtEnd} of ${p.agents} agents connected at the end (${why}); ` : '';
  return `${refused}agents told to send every ${sh.sendEveryMaxS} s at most (${sh.sendEveryEndS} s at the end; ${a.settingsReceived} Settings received; ${round(a.sent / Math.max(1, a.messages), 1)} samples a message${sh.minSampleIntervalMaxS > 0 ? `; samples shed: told to sample at most every ${sh.minSampleIntervalMaxS} s` : ''}), main thread overloaded ${sh.mainOverloadedS} s and ingest ${sh.ingestOverloadedS} s of the window, ${sh.queriesShed} queries refused (RESOURCE_EXHAUSTED)`;
};

const passLine = (p: Pass, what = '') => p.died
  ? `${what}under ${p.memoryMiB} MiB: ${p.died}`
  : `${what}under ${p.memoryMiB} MiB: ${p.reviews!.ok === 0 ? `no review answered (${Object.entries(p.reviews!.errors).map(([k, n]) => `${n} ${k}`).join(', ')})` : `webhook p99 ${p.reviews!.latencyMs.p99} ms (p99.9 ${p.reviews!.latencyMs.p99_9}), ${total(p.reviews!.errors)} errors`}; GetNode p99 ${p.query!.latencyMs.p99} ms; lag p99 ${p.query!.lagMs.p99} ms; ${p.millicores} millicores, throttled ${p.throttledPct}%; RSS peak ${p.rssPeakMiB} MiB; ${Math.max(0, p.agentRun!.sent - p.stored!)} samples dropped; agents connected in ${round(p.connectS!, 1)} s; ${shedLine(p)}`;

export async function run(options: { quick?: boolean } = {}): Promise<BenchResult> {
  // OVERSELL_BENCH_CLUSTER_AGENTS: another cluster size, for trying one (saved to the scratch directory like any single run).
  const agents = Number(process.env.OVERSELL_BENCH_CLUSTER_AGENTS ?? NaN) || (options.quick ? 1000 : 10_000);
  const shippedBytes = (Number(process.env.OVERSELL_BENCH_GATEWAY_MEMORY_MIB ?? NaN) || deployedMemoryLimitMiB('gateway')) * 2 ** 20;
  // Load generators on the last CPU, the gateway's threads free to use any within its quota.
  const pin = cpus().length > 1 ? ['taskset', '-c', String(cpus().length - 1)] : [];
  const work = mkdtempSync(join(tmpdir(), 'oversell-bench-cluster-'));
  const setup: Setup = {
    loadgen: await ensureLoadgen(), agents, reviewRate: reviewRateFor(agents), warmupS: options.quick ? 10 : 30, windowS: options.quick ? 20 : 60,
    tokens: join(work, 'tokens'), viewerToken: join(work, 'viewer-token'), pin,
  };
  const keepAgents = process.env.OVERSELL_BENCH_KEEP_AGENTS === '1';
  const controlPlane = useControlPlane();
  const stopped: string[] = [];
  try {
    // What an interrupted earlier run left; OVERSELL_BENCH_KEEP_AGENTS=1 keeps them, for runs tried one after another at one size.
    if (!keepAgents) await deleteAgents();
    // Its node lifecycle and pod GC controllers would act on Nodes no kubelet heartbeats for (taints, then evictions).
    cluster('stop-component', 'controller-manager');
    stopped.push('controller-manager');
    log(`making ${agents} Nodes, agent pods bound to them and a token each (TokenRequest)`);
    await createAgents(PREFIX, agents, setup.tokens, setup.viewerToken);

    const passes = [await pass(setup, shippedBytes)];
    // What the same load needs when the shipped limit is not enough: the figures install.md sizes from.
    if (passes[0]!.died) passes.push(await pass(setup, ROOMY_MEMORY_MIB * 2 ** 20));
    const shipped = passes[0]!;
    const fitting = passes.find((p) => !p.died);
    const shippedMiB = shipped.memoryMiB;
    const full = agents >= 10_000;
    const fitsCore = (p?: Pass) => !!p && !p.died && p.throttledPct! < 1 && p.reviews!.ok > 0 && total(p.reviews!.errors) === 0;
    let smaller: Pass | undefined;
    if (full && !fitsCore(fitting) && process.env.OVERSELL_BENCH_CLUSTER_SMALLER !== '0') {
      // The first agents' tokens: their nodes are the first SMALLER_AGENTS names, which reviews and queries pick from.
      const tokens = join(work, `tokens-${SMALLER_AGENTS}`);
      writeFileSync(tokens, `${readFileSync(setup.tokens, 'utf8').split('\n').slice(0, SMALLER_AGENTS).join('\n')}\n`, { mode: 0o600 });
      log(`${agents} nodes did not fit ${CPU_CORES} core: the same load for ${SMALLER_AGENTS} nodes, to measure what it holds`);
      smaller = await pass({ ...setup, agents: SMALLER_AGENTS, reviewRate: reviewRateFor(SMALLER_AGENTS), tokens }, shippedBytes);
    }
    // The larger cluster: the agents added to the first ones, their reviews at the rate a cluster of that size makes.
    let larger: Pass | undefined;
    if (full && agents < LARGER_AGENTS && process.env.OVERSELL_BENCH_CLUSTER_LARGER !== '0') {
      const added = join(work, 'tokens-added');
      log(`${LARGER_AGENTS - agents} more Nodes, agent pods and tokens, for ${LARGER_AGENTS} agents on the same replica`);
      await createAgents(PREFIX, LARGER_AGENTS, added, setup.viewerToken, agents);
      const tokens = join(work, `tokens-${LARGER_AGENTS}`);
      writeFileSync(tokens, readFileSync(setup.tokens, 'utf8') + readFileSync(added, 'utf8'), { mode: 0o600 });
      larger = await pass({ ...setup, agents: LARGER_AGENTS, reviewRate: reviewRateFor(LARGER_AGENTS), tokens }, shippedBytes);
    }
    const lr = larger?.reviews;
    const r = fitting?.reviews;
    const q = fitting?.query;
    const dropped = fitting ? Math.max(0, fitting.agentRun!.sent - fitting.stored!) : NaN;
    const under = fitting && fitting !== shipped ? ` (measured under ${fitting.memoryMiB} MiB)` : '';
    return {
      name: 'cluster',
      summary: `${agents} agents on TLS + ${setup.reviewRate} reviews/s + ${QUERY_RATE} GetNode/s on one replica with ${CPU_CORES} core of quota, ${passes.map((p) => passLine(p)).join('; ')}` +
        (smaller ? `; ${passLine(smaller, `${smaller.agents} agents + ${smaller.reviewRate} reviews/s `)}` : '') +
        (larger ? `; ${passLine(larger, `${larger.agents} agents + ${larger.reviewRate} reviews/s `)}` : ''),
      figures: {
        agents, reviews_per_s: setup.reviewRate, queries_per_s: QUERY_RATE, window_s: setup.windowS,
        // Which pass the load fitted in: the capacity plan (capacity.ts) reads its figures.
        fitting_limit_mib: fitting?.memoryMiB ?? 'none',
        ...Object.assign({}, ...passes.map((p) => passFigures(p))),
        ...(smaller && { smaller_agents: smaller.agents, smaller_limit_mib: smaller.memoryMiB, smaller_reviews_per_s: smaller.reviewRate, smaller_fits_core: fitsCore(smaller) ? 'yes' : 'no', ...passFigures(smaller, `agents_${smaller.agents}_`) }),
        ...(larger && { larger_agents: larger.agents, larger_reviews_per_s: larger.reviewRate, ...passFigures(larger, `agents_${larger.agents}_`) }),
      },
      targets: full
        ? [
            { name: `10,000 agents on TLS fit the shipped ${shippedMiB} MiB limit (no OOM kill)`, measured: shipped.died ? `${shipped.died}${fitting ? `; RSS peak ${fitting.rssPeakMiB} MiB under ${fitting.memoryMiB} MiB` : ''}` : `RSS peak ${shipped.rssPeakMiB} MiB`, met: !shipped.died && shipped.oomKills === 0 },
            // Percentiles are of the answered reviews: with none answered they are 0, and say nothing.
            { name: `webhook p99 <= 10 ms at 1,000 reviews/s with 10,000 agents streaming${under}`, measured: !r ? 'not measured' : r.ok === 0 ? `no review answered (${total(r.errors)} errors)` : `${r.latencyMs.p99} ms`, met: !!r && r.ok > 0 && r.latencyMs.p99 <= 10 },
            { name: `no webhook errors${under}`, measured: r ? `${total(r.errors)} of ${r.sent}` : 'not measured', met: !!r && total(r.errors) === 0 },
            { name: `GetNode p99 <= 5 ms meanwhile${under}`, measured: !q ? 'not measured' : q.ok === 0 ? `no call answered (${total(q.errors)} errors)` : `${q.latencyMs.p99} ms, ${total(q.errors)} errors`, met: !!q && q.ok > 0 && q.latencyMs.p99 <= 5 && total(q.errors) === 0 },
            // Issue 46's: the same load with the agents at their default rates, nothing shed.
            { name: `agents at their default rates: webhook p99 <= 50 ms, GetNode p99 <= 20 ms, 0 errors, throttled < 1%, nothing shed${under}`, measured: !fitting || !r || !q ? 'not measured' : `webhook p99 ${r.latencyMs.p99} ms, GetNode p99 ${q.latencyMs.p99} ms, ${total(r.errors) + total(q.errors)} errors, throttled ${fitting.throttledPct}%, ${shedLine(fitting)}`, met: !!fitting && !!r && !!q && r.ok > 0 && q.ok > 0 && r.latencyMs.p99 <= 50 && q.latencyMs.p99 <= 20 && total(r.errors) + total(q.errors) === 0 && fitting.throttledPct! < 1 && !shedAny(fitting) },
            { name: `no sample dropped${under}`, measured: fitting ? `${dropped} of ${fitting.agentRun!.sent}` : 'not measured', met: dropped === 0 },
            { name: `inside ${CPU_CORES} core: throttled < 1% of the window${under}`, measured: fitting ? `${fitting.millicores} millicores, throttled ${fitting.throttledPct}%` : 'not measured', met: !!fitting && fitting.throttledPct! < 1 },
            ...(larger ? [
              { name: `${LARGER_AGENTS.toLocaleString('en-US')} agents (${larger.reviewRate.toLocaleString('en-US')} reviews/s) on the same replica: every review answered`, measured: larger.died ?? (lr ? `${total(lr.errors)} of ${lr.sent} unanswered${total(lr.errors) ? ` (${JSON.stringify(lr.errors)})` : ''}` : 'not measured'), met: !!lr && lr.ok > 0 && total(lr.errors) === 0 },
              { name: `${LARGER_AGENTS.toLocaleString('en-US')} agents: webhook p99 <= 100 ms`, measured: !lr || lr.ok === 0 ? 'no review answered' : `${lr.latencyMs.p99} ms`, met: !!lr && lr.ok > 0 && lr.latencyMs.p99 <= 100 },
              { name: `${LARGER_AGENTS.toLocaleString('en-US')} agents: what was shed, reported`, measured: larger.died ? 'not measured' : shedLine(larger), met: !larger.died },
            ] : []),
          ]
        : [{ name: '(quick run: 10,000-node targets not measured)', measured: `${agents} agents`, met: true }],
      notes: [
        `gateway as deployed: node ${GATEWAY_NODE_ARGS.join(' ')}, --grpc-tls on, --auth kubernetes, agents on --agent-port (the ingest thread), --watch-bound-pods on (the ${agents} agent pods), --policies flags; in a cgroup made by the benchmark (${shipped.describe}): ${CPU_CORES} core of CFS quota (deploy/base ships a 100m request and no CPU limit: the quota is the target's core) and deploy/base's memory limit${passes.length > 1 ? `; the gateway did not survive it, so a second gateway ran the same load under ${ROOMY_MEMORY_MIB} MiB to measure what it needs` : ''}`,
        `control plane: scripts/cluster/cluster.sh (etcd, kube-apiserver, kube-scheduler, kwok) on the same machine; kube-controller-manager stopped for the run, so no controller acts on ${agents} Nodes no kubelet heartbeats for`,
        `agents: bench/loadgen agents (Go), each on its own gRPC client connection (TCP + TLS 1.3, the gateway's self-managed CA), authorization: Bearer <token>: a TokenRequest bound to its own agent pod (audience oversell-gateway, ${agents} pods bound to ${agents} Nodes); agent i samples at i/N of each second and sends as the gateway says (--batch 0): to a gateway with its defaults (summaries), one sample with a window summary and a pod report of ${PODS_PER_NODE} pods every send_every_ms (20 s); to one with batches, a SampleBatch when its oldest sample is send_every_ms old, at most max_batch_samples; from the welcome and then every Settings the load shedder sends, as the agent's ReportStream does (a steady node's samples; the agent's at-once sending of a rise is not simulated). Connected-in: from the first dial until every agent was welcomed, through the gateway's TokenReview budget (--token-reviews-per-second, default 100); refused attempts are retried after 1-2 s, as the agent does`,
        `reviews: bench/loadgen reviews, open-loop at ${setup.reviewRate}/s, each request measured from when it was due (no coordinated omission), 36 KB kubelet-shaped AdmissionReviews (bench/webhook.ts) naming node ${PREFIX}-i in a permutation over all ${agents} with a fresh request uid; an answer counts as ok when 200, its uid matches and allowed is true; timeout ${WEBHOOK_TIMEOUT_S} s, the shipped webhook's timeoutSeconds, after which the API server gives up and the write passes unchanged`,
        `queries: bench/loadgen query, GetNode on random nodes at ${QUERY_RATE}/s over one TLS connection with a viewer's token (ClusterRole oversell-viewer from deploy/base/rbac.yaml, checked by SubjectAccessReview); lag = the node's received_at - its latest sample's timestamp, from the same answers`,
        `load generators pinned to CPU ${pin.at(-1) ?? '(one CPU only)'} with taskset; the gateway's threads may run on any CPU within its quota. All on one ${cpus().length}-CPU machine, so the generators, the API server and etcd share it with the gateway`,
        `CPU and throttling from the cgroup over the ${setup.windowS} s window after ${setup.warmupS} s of warm-up; RSS peak is the gateway's VmHWM over its life (the connect storm included); cgroup memory peak includes page cache`,
        'samples dropped: sent by the simulator over the run minus stored by the gateway (oversell_samples_received_total{result="stored"}) 2 s after the simulator stopped',
        ...(larger ? [`then ${LARGER_AGENTS} agents on a new gateway under the same limits (the larger_ and agents_${LARGER_AGENTS}_ figures): ${LARGER_AGENTS - agents} more Nodes, pods and tokens added to the first ${agents}, reviews at ${larger.reviewRate}/s over all ${LARGER_AGENTS} nodes (a cluster that size with oversell), GetNode at ${QUERY_RATE}/s; the shedding figures are the gateway's intervals read every 5 s over the window (oversell_agent_send_every_seconds, oversell_agent_min_sample_interval_seconds; a scrape, like Prometheus's, costs the gateway CPU) and the rise of oversell_overloaded_seconds_total and oversell_shed_total`] : []),
        ...(smaller ? [`${agents} nodes did not fit ${CPU_CORES} core, so a new gateway under the same limits then ran the same load for ${SMALLER_AGENTS} nodes (the smaller_ and agents_${SMALLER_AGENTS}_ figures): the first ${SMALLER_AGENTS} agents with their tokens, ${reviewRateFor(SMALLER_AGENTS)} reviews/s over their nodes, GetNode over their nodes at ${QUERY_RATE}/s; its bound-pods watch still lists all ${agents} agent pods. smaller_fits_core: throttled < 1% of the window and every review answered`] : []),
      ],
    };
  } finally {
    rmSync(work, { recursive: true, force: true });
    for (const c of stopped) cluster('start-component', c);
    if (controlPlane.started) controlPlane.release();
    else if (!keepAgents) await deleteAgents({ all: true });
  }
}

runIfMain(import.meta.url, run);
