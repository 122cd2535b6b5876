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
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, tmpdir } from 'node:os';
import { join } from 'node:path';
import yaml from 'js-yaml';
import { ADMIN_KUBECONFIG, cluster } from '../test/e2e/cluster.js';
import { benchCgroup, inCgroup, type BenchCgroup, type CgroupUsage } from './cgroup.js';
import { AGENT_SERVICE_ACCOUNT, BENCH_NAMESPACE, createAgents, deleteAgents } from './cluster-objects.js';
import { ensureLoadgen, PROTO, startLoadgen, waitForLine, type Latencies, type LoadgenRun } from './loadgen.js';
import { GATEWAY_NODE_ARGS, log, REPO, startGateway, type GatewayProcess } from './processes.js';
import { round, runIfMain, type BenchResult } from './result.js';
import { reviewBody } from './webhook.js';

const PREFIX = 'sim';
const NODE_PLACEHOLDER = 'bench-node-placeholder';
const UID_PLACEHOLDER = 'bench-uid-placeholder';
/** The target's CPU: deploy/base ships a request of 100m and no CPU limit, so the quota is the target's core. */
const CPU_CORES = 1;
/** GetNode calls a second: a dashboard and a few `oversell top`s. */
const QUERY_RATE = 50;

interface AgentsResult { agents: number; welcomed: number; sent: number; streamErrors: Record<string, number>; reconnects: number; connectMs: number; [k: string]: unknown }
interface ReviewsResult { sent: number; ok: number; errors: Record<string, number>; rate: number; latencyMs: Latencies; generatorCpuMs: number }
interface QueryResult { calls: number; ok: number; errors: Record<string, number>; latencyMs: Latencies; lagMs: { p50: number; p99: number; max: number }; noSample: number }

/** The gateway container's memory limit as deploy/base ships it. */
function shippedMemoryLimitBytes(): number {
  type Doc = { spec?: { template?: { spec?: { containers?: Array<{ name?: string; resources?: { limits?: { memory?: string } } }> } } } };
  const docs = yaml.loadAll(readFileSync(join(REPO, 'deploy/base/gateway.yaml'), 'utf8')) as Doc[];
  const limit = docs.flatMap((d) => d?.spec?.template?.spec?.containers ?? []).find((c) => c.name === 'gateway')?.resources?.limits?.memory;
  const m = /^(\d+)Mi$/.exec(limit ?? '');
  if (!m) throw new Error(`deploy/base/gateway.yaml: the gateway's memory limit is ${limit ?? 'missing'}, not <n>Mi`);
  return Number(m[1]) * 2 ** 20;
}

const clusterRunning = () => {
  try {
    cluster('status');
    return true;
  } catch {
    return false;
  }
};

const metric = async (port: number, name: string, labels = ''): Promise<number> => {
  const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
  const line = text.split('\n').find((l) => l.startsWith(`${name}${labels} `));
  return line ? Number(line.split(' ')[1]) : 0;
};

const peakRssMiB = (pid: number) => Number(/VmHWM:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1] ?? NaN) / 1024;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const diff = (a: CgroupUsage, b: CgroupUsage) => ({ cpuSeconds: b.cpuSeconds - a.cpuSeconds, throttledSeconds: b.throttledSeconds - a.throttledSeconds, throttledPeriods: b.throttledPeriods - a.throttledPeriods, periods: b.periods - a.periods });

export async function run(options: { quick?: boolean } = {}): Promise<BenchResult> {
  const agents = options.quick ? 1000 : 10_000;
  const reviewRate = options.quick ? 100 : 1000;
  const warmupS = options.quick ? 10 : 30;
  const windowS = options.quick ? 20 : 60;
  const memoryBytes = shippedMemoryLimitBytes();
  const loadgen = await ensureLoadgen();
  // Load generators on the last CPU, the gateway's threads free to use any within its quota.
  const pin = cpus().length > 1 ? ['taskset', '-c', String(cpus().length - 1)] : [];
  const work = mkdtempSync(join(tmpdir(), 'oversell-bench-cluster-'));
  const started = !clusterRunning();
  let group: BenchCgroup | undefined;
  let gateway: GatewayProcess | undefined;
  let agentRun: LoadgenRun<AgentsResult> | undefined;
  const stopped: string[] = [];
  try {
    if (started) {
      log('bringing the local control plane up (scripts/cluster/cluster.sh up, without the real node)');
      process.env.OVERSELL_REAL_NODE = '0';
      cluster('up');
    }
    await deleteAgents({ wait: true }); // what an interrupted earlier run left
    // Its node lifecycle and pod GC controllers would act on Nodes no kubelet heartbeats for (taints, then evictions).
    cluster('stop-component', 'controller-manager');
    stopped.push('controller-manager');
    log(`making ${agents} Nodes, agent pods bound to them and a token each (TokenRequest)`);
    const tokens = join(work, 'tokens');
    const viewerToken = join(work, 'viewer-token');
    await createAgents(PREFIX, agents, tokens, viewerToken);

    group = benchCgroup(`oversell-bench-gateway-${process.pid}`, { cpuCores: CPU_CORES, memoryBytes });
    log(`gateway in ${group.describe}`);
    const g = group;
    gateway = await startGateway({
      launcher: (argv) => inCgroup(g, argv),
      readyWithinMs: 60_000,
      args: ['--kubeconfig', ADMIN_KUBECONFIG, '--lease-namespace', BENCH_NAMESPACE, '--grpc-tls', 'on', '--auth', 'kubernetes',
        '--agent-service-accounts', `${BENCH_NAMESPACE}/${AGENT_SERVICE_ACCOUNT}`, '--sidecars', 'none'],
    });
    const ca = join(gateway.tlsDir, 'ca.crt');
    const tls = ['--ca', ca, '--server-name', 'localhost', '--proto', PROTO];

    log(`${agents} agents connecting, each on its own TLS connection, each token reviewed by the API server`);
    const connectStart = group.usage();
    agentRun = startLoadgen<AgentsResult>(loadgen, 'agents', ['--address', `127.0.0.1:${gateway.ports.agent}`, '--tokens', tokens, ...tls], { launcher: pin });
    const connectedLine = await waitForLine(agentRun, /^connected-in-ms \d+/, 15 * 60_000, `${agents} agents`);
    const connectMs = Number(connectedLine.split(' ')[1]);
    const connectUsage = diff(connectStart, group.usage());
    log(`all ${agents} agents welcomed in ${(connectMs / 1000).toFixed(1)} s; gateway CPU meanwhile ${round(connectUsage.cpuSeconds, 1)} s`);

    const template = join(work, 'review.json');
    const review = JSON.parse(reviewBody(NODE_PLACEHOLDER)) as { request: { uid: string } };
    review.request.uid = UID_PLACEHOLDER; // the generator gives every request its own, as the API server does
    writeFileSync(template, JSON.stringify(review));
    log(`reviews at ${reviewRate}/s over all ${agents} nodes and GetNode at ${QUERY_RATE}/s: ${warmupS} s of warm-up, then ${windowS} s measured`);
    const reviews = startLoadgen<ReviewsResult>(loadgen, 'reviews', ['--url', `https://127.0.0.1:${gateway.ports.webhook}/mutate/nodes`, '--ca', ca,
      '--template', template, '--placeholder', NODE_PLACEHOLDER, '--uid-placeholder', UID_PLACEHOLDER, '--prefix', PREFIX, '--count', String(agents),
      '--rate', String(reviewRate), '--warmup', `${warmupS}s`, '--duration', `${windowS}s`], { launcher: pin });
    const query = startLoadgen<QueryResult>(loadgen, 'query', ['--address', `127.0.0.1:${gateway.ports.grpc}`, '--token-file', viewerToken, ...tls,
      '--prefix', PREFIX, '--count', String(agents), '--rate', String(QUERY_RATE), '--warmup', `${warmupS}s`, '--duration', `${windowS}s`], { launcher: pin });
    await sleep(warmupS * 1000);
    const windowStart = group.usage();
    const windowStartAt = performance.now();
    await sleep(windowS * 1000);
    const windowUsage = diff(windowStart, group.usage());
    const windowSeconds = (performance.now() - windowStartAt) / 1000;
    const [r, q] = await Promise.all([reviews.result, query.result]);

    agentRun.child.kill('SIGTERM');
    const a = await agentRun.result;
    agentRun = undefined;
    await sleep(2000); // the last samples in flight reach the store
    const stored = await metric(gateway.ports.metrics, 'oversell_samples_received_total', '{result="stored"}');
    const total = group.usage();
    const rssPeakMiB = Math.round(peakRssMiB(gateway.pid));
    const dropped = Math.max(0, a.sent - stored);
    const millicores = Math.round((windowUsage.cpuSeconds / windowSeconds) * 1000);
    const throttledPct = round((windowUsage.throttledSeconds / windowSeconds) * 100, 1);
    const reviewErrors = Object.values(r.errors).reduce((s, n) => s + n, 0);
    const queryErrors = Object.values(q.errors).reduce((s, n) => s + n, 0);
    const memLimitMiB = memoryBytes / 2 ** 20;
    const figures = {
      agents, reviews_per_s: reviewRate, queries_per_s: QUERY_RATE, window_s: round(windowSeconds, 1),
      agents_connected_in_s: round(connectMs / 1000, 1), connect_gateway_cpu_s: round(connectUsage.cpuSeconds, 1),
      agent_stream_errors: JSON.stringify(a.streamErrors), agent_reconnects: a.reconnects,
      webhook_p50_ms: r.latencyMs.p50, webhook_p99_ms: r.latencyMs.p99, webhook_p99_9_ms: r.latencyMs.p99_9, webhook_max_ms: r.latencyMs.max,
      webhook_achieved_per_s: round(r.rate, 1), webhook_errors: reviewErrors, webhook_error_kinds: JSON.stringify(r.errors),
      get_node_p50_ms: q.latencyMs.p50, get_node_p99_ms: q.latencyMs.p99, get_node_errors: queryErrors,
      lag_p50_ms: q.lagMs.p50, lag_p99_ms: q.lagMs.p99,
      gateway_millicores: millicores, throttled_pct_of_window: throttledPct, throttled_periods: windowUsage.throttledPeriods, periods: windowUsage.periods,
      rss_peak_mib: rssPeakMiB, cgroup_memory_peak_mib: Math.round(total.memoryPeakBytes / 2 ** 20), oom_kills: total.oomKills,
      samples_sent: a.sent, samples_stored: stored, samples_dropped: dropped,
    };
    log(`webhook p50 ${r.latencyMs.p50} p99 ${r.latencyMs.p99} p99.9 ${r.latencyMs.p99_9} ms (${reviewErrors} errors); GetNode p99 ${q.latencyMs.p99} ms; lag p99 ${q.lagMs.p99} ms; gateway ${millicores} millicores, throttled ${throttledPct}% of the window; RSS peak ${rssPeakMiB} MiB; ${dropped} of ${a.sent} samples not stored`);
    const full = agents >= 10_000;
    return {
      name: 'cluster',
      summary: `${agents} agents on TLS + ${reviewRate} reviews/s + ${QUERY_RATE} GetNode/s, one replica under ${CPU_CORES} core and ${memLimitMiB} MiB: webhook p99 ${r.latencyMs.p99} ms (p99.9 ${r.latencyMs.p99_9}), ${reviewErrors} errors; GetNode p99 ${q.latencyMs.p99} ms; lag p99 ${q.lagMs.p99} ms; ${millicores} millicores, throttled ${throttledPct}%; RSS peak ${rssPeakMiB} MiB; ${dropped} samples dropped; agents connected in ${round(connectMs / 1000, 1)} s`,
      figures,
      targets: full
        ? [
            { name: 'webhook p99 <= 10 ms at 1,000 reviews/s with 10,000 agents streaming', measured: `${r.latencyMs.p99} ms`, met: r.latencyMs.p99 <= 10 },
            { name: 'no webhook errors', measured: `${reviewErrors} of ${r.sent}`, met: reviewErrors === 0 },
            { name: 'GetNode p99 <= 5 ms meanwhile', measured: `${q.latencyMs.p99} ms`, met: q.latencyMs.p99 <= 5 && queryErrors === 0 },
            { name: 'no sample dropped', measured: `${dropped} of ${a.sent}`, met: dropped === 0 },
            { name: `inside ${CPU_CORES} core: throttled < 1% of the window`, measured: `${millicores} millicores, throttled ${throttledPct}%`, met: throttledPct < 1 },
            { name: `inside ${memLimitMiB} MiB: no OOM kill`, measured: `RSS peak ${rssPeakMiB} MiB, ${total.oomKills} OOM kills`, met: total.oomKills === 0 && rssPeakMiB <= memLimitMiB },
          ]
        : [{ name: '(quick run: 10,000-node targets not measured)', measured: `${agents} agents`, met: true }],
      notes: [
        `gateway as deployed: node ${GATEWAY_NODE_ARGS.join(' ')}, --grpc-tls on, --auth kubernetes, agents on --agent-port (the ingest thread), --watch-bound-pods on (the ${agents} agent pods), --policies flags; in ${group.describe}: ${CPU_CORES} core of CFS quota (deploy/base ships a 100m request and no CPU limit: the quota is the target's core) and deploy/base's memory limit`,
        `control plane: scripts/cluster/cluster.sh (etcd, kube-apiserver, kube-scheduler, kwok) on the same machine; kube-controller-manager stopped for the run, so no controller acts on ${agents} Nodes no kubelet heartbeats for`,
        `agents: bench/loadgen agents (Go), each on its own gRPC client connection (TCP + TLS 1.3, the gateway's self-managed CA), authorization: Bearer <token>: a TokenRequest bound to its own agent pod (audience oversell-gateway, ${agents} pods bound to ${agents} Nodes); agent i sends at i/N of each second. Connected-in: from the first dial until every agent was welcomed, through the gateway's TokenReview budget (--token-reviews-per-second, default 100)`,
        `reviews: bench/loadgen reviews, open-loop at ${reviewRate}/s, each request measured from when it was due (no coordinated omission), 36 KB kubelet-shaped AdmissionReviews (bench/webhook.ts) naming node sim-i in a permutation over all ${agents} with a fresh request uid; an answer counts as ok when 200, its uid matches and allowed is true; timeout 10 s, as the API server's`,
        `queries: bench/loadgen query, GetNode on random nodes at ${QUERY_RATE}/s over one TLS connection with a viewer's token (ClusterRole oversell-viewer from deploy/base/rbac.yaml, checked by SubjectAccessReview); lag = the node's received_at - its latest sample's timestamp, from the same answers`,
        `load generators pinned to CPU ${pin.at(-1) ?? '(one CPU only)'} with taskset; the gateway's threads may run on any CPU within its quota. All on one ${cpus().length}-CPU machine, so the generators, the API server and etcd share it with the gateway`,
        `CPU and throttling from the cgroup over the ${windowS} s window after ${warmupS} s of warm-up; RSS peak is the gateway's VmHWM over the whole run (connect storm included); memory peak is the cgroup's (page cache included)`,
        `samples dropped: sent by the simulator over the run minus stored by the gateway (oversell_samples_received_total{result="stored"}) 2 s after the simulator stopped`,
      ],
    };
  } finally {
    if (agentRun) agentRun.child.kill('SIGTERM');
    await gateway?.stop();
    try {
      group?.remove();
    } catch (err) {
      log(`could not remove the gateway's cgroup (${(err as Error).message})`);
    }
    rmSync(work, { recursive: true, force: true });
    for (const c of stopped) cluster('start-component', c);
    if (started) {
      log('taking the local control plane down again');
      cluster('down');
    } else {
      await deleteAgents();
    }
  }
}

runIfMain(import.meta.url, run);
