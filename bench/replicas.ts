// Three gateway replicas against the local control plane, and one killed
// mid-run (SIGKILL: no graceful stop). As deployed in a cluster: every agent
// streams to every replica (agent/stream/gateway-set.ts), reviews reach the
// replicas through the Service (round-robin here; bench/replica-reviews.ts
// fails and retries them exactly as the kube-apiserver's webhook client
// does), GetNode calls go to each, and one replica holds the leader Lease.
// The leader is the one killed. Measured: reviews answered before and after
// the kill, what the API server would have left unanswered and why, how long
// until another replica held the Lease, what the agents did, and each
// replica's CPU and memory per agent at the batched message rate. The load is added in phases
// (idle, agents, reviews, GetNode) so that each part's CPU is read apart:
// bench/capacity.ts costs the plan part by part from them.
//
//   node --import tsx bench/replicas.ts                 # 1,000 agents, 100 reviews/s
//   BENCH_QUICK=1 node --import tsx bench/replicas.ts   # 300 agents, 30 reviews/s
// Needs the local control plane with its real node, whose bridge the
// replicas listen on (scripts/cluster/cluster.sh); take the e2e
// lock when others use it: flock /tmp/oversell-e2e.lock node --import tsx bench/replicas.ts
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, networkInterfaces, tmpdir } from 'node:os';
import { join } from 'node:path';
import { CoordinationV1Api, DiscoveryV1Api, KubeConfig } from '@kubernetes/client-node';
import { owners } from '../lib/rendezvous.js';
import { onLines } from '../scripts/harness/processes.js';
import { GATEWAY_DEFAULTS, SUMMARY_SEND_EVERY_MS } from '../gateway/config/defaults.js';
import { ADMIN_KUBECONFIG, cluster } from '../test/e2e/cluster.js';
import { scrapeMetric } from '../test/helpers/metrics.js';
import { sleep } from './agent-overhead.js';
import { AGENT_SERVICE_ACCOUNT, BENCH_NAMESPACE, createAgents, deleteAgents } from './cluster-objects.js';
import { useControlPlane } from './control-plane.js';
import { ensureLoadgen, PROTO, startLoadgen, waitForLine, type Latencies, type LoadgenRun } from './loadgen.js';
import { cpuSeconds, peakRssMiB, rssMiB } from './proc-stats.js';
import { GATEWAY_NODE_ARGS, log, REPO, startGateway, type GatewayProcess } from './processes.js';
import type { ReplicaReviewsConfig, ReplicaReviewsResult } from './replica-reviews.js';
import { mean, round, runIfMain, type BenchResult } from './result.js';
import { reviewBody } from './review-body.js';
import { phaseCosts } from './capacity.js';

const PREFIX = 'sim';
const REPLICAS = 3;
const NODE_PLACEHOLDER = 'bench-node-placeholder';
const UID_PLACEHOLDER = 'bench-uid-placeholder';
/** deploy/base/webhook.yaml's timeoutSeconds: the API server stops waiting then. */
const WEBHOOK_TIMEOUT_MS = 2000;
/** GetNode calls a second over all replicas: a dashboard and a few `oversell top`s. */
const QUERY_RATE = 50;
/**
 * From the kill until the Service stops sending new connections to the dead
 * replica. The harness sees the process exit at once; in a cluster the
 * kubelet notices a dead container at its next PLEG relist (every 1 s), then
 * the pod's Ready condition, the EndpointSlice and kube-proxy follow. 1 s is
 * the floor of that chain, not a measurement of it.
 * OVERSELL_BENCH_ENDPOINT_REMOVAL_MS sets another.
 */
const ENDPOINT_REMOVAL_MS = Number(process.env.OVERSELL_BENCH_ENDPOINT_REMOVAL_MS ?? 1000);
/**
 * OVERSELL_BENCH_REPLICA_STOP=SIGTERM: the leader is stopped as a rollout or
 * a drain stops a pod, with the gateway's default --shutdown-drain of a
 * cluster, instead of killed. Its endpoint leaves the Service
 * ENDPOINT_REMOVAL_MS after the signal (a terminating pod's endpoint is
 * marked not ready at once), while it still answers.
 */
const STOP_SIGNAL: 'SIGKILL' | 'SIGTERM' = process.env.OVERSELL_BENCH_REPLICA_STOP === 'SIGTERM' ? 'SIGTERM' : 'SIGKILL';
const DRAIN = `${GATEWAY_DEFAULTS.shutdownDrainMs / 1000}s`;
/**
 * OVERSELL_BENCH_REPLICA_SHARD=N: the replicas run --shard-copies N, their
 * members read from EndpointSlices the harness writes (one per replica, as
 * the endpoint controller would for the agents' Service), and each node's
 * agent streams to its N owners only, as Settings.shard_copies tells a real
 * agent. The killed replica's slice goes when its endpoint would.
 */
const SHARD_FROM_ENV = Number(process.env.OVERSELL_BENCH_REPLICA_SHARD ?? 0);
const SHARD_SERVICE = 'bench-gateway-agents';
/**
 * Where the replicas listen: the local cluster's own bridge (oversell0,
 * host-internal: scripts/cluster), sharded or not. An EndpointSlice may not
 * list a loopback address, so the sharded replicas' members must name the
 * bridge; and the unsharded run, which bench/capacity.ts costs the sharded
 * plan from, must then cross the same network path (over loopback a replica's
 * agents cost about a fifth less: docs/performance-log.md, 2026-11-29).
 */
let HOST = '127.0.0.1';
/** Set by run(): the copies of a sharded run (0: every agent to every replica). */
let SHARD_COPIES = 0;

function bridgeAddress(): string {
  const address = networkInterfaces().oversell0?.find((i) => i.family === 'IPv4')?.address;
  if (!address) throw new Error('the replicas benchmarks listen on the local cluster\'s bridge oversell0: bring the cluster up with its real node (bash scripts/cluster/cluster.sh up)');
  return address;
}
/** Pods a node reports (each with 2 containers), as the cluster benchmark's agents. */
const PODS_PER_NODE = 30;
const LEASE_NAME = 'oversell-gateway';
/** Settled: every replica's main-thread loop delay (p99 over a second) under the gateway's default --shed-loop-delay, this many seconds running. */
const SETTLED_LOOP_DELAY_S = 0.05;
const SETTLED_SECONDS = 5;
const SETTLE_WITHIN_S = 180;

interface AgentsResult { agents: number; welcomed: number; sent: number; messages: number; messageBytes: number; streamErrors: Record<string, number>; reconnects: number; connectMs: number }
interface QueryResult { calls: number; ok: number; errors: Record<string, number>; latencyMs: Latencies }
/** The agents' `status` line, every second. */
interface AgentsStatus { live: number; reconnects: number; streamErrors: Record<string, number>; messages: number }

/** The newest `status` line of an agents run. */
function latestStatus(run: LoadgenRun<AgentsResult>): () => AgentsStatus {
  let last: AgentsStatus = { live: 0, reconnects: 0, streamErrors: {}, messages: 0 };
  run.lines((line) => {
    if (!line.startsWith('status ')) return;
    try {
      last = JSON.parse(line.slice(7)) as AgentsStatus;
    } catch {
      // a line cut short as the process ends: the previous one stands
    }
  });
  return () => last;
}

const total = (counts: Record<string, number>) => Object.values(counts).reduce((s, n) => s + n, 0);
const kinds = (counts: Record<string, number>) => Object.entries(counts).map(([k, n]) => `${n} ${k}`).join(', ') || 'none';

/**
 * Sharded: one EndpointSlice per replica for SHARD_SERVICE (its agent port as
 * "grpc", its webhook port as "webhook": the replicas share one address), and
 * each replica's tokens file holding only the nodes it owns.
 */
async function shardMembers(kc: KubeConfig, gateways: GatewayProcess[], tokens: string, work: string): Promise<string[]> {
  const discovery = kc.makeApiClient(DiscoveryV1Api);
  await deleteShardSlices();
  for (const [i, gw] of gateways.entries()) {
    await discovery.createNamespacedEndpointSlice({
      namespace: BENCH_NAMESPACE,
      body: {
        metadata: { name: `${SHARD_SERVICE}-${i}`, labels: { 'kubernetes.io/service-name': SHARD_SERVICE } },
        addressType: 'IPv4',
        ports: [{ name: 'grpc', port: gw.ports.agent, protocol: 'TCP' }, { name: 'webhook', port: gw.ports.webhook, protocol: 'TCP' }],
        endpoints: [{ addresses: [HOST], conditions: { ready: true } }],
      },
    });
  }
  const keys = gateways.map((gw) => `${HOST}:${gw.ports.agent}`);
  const lines = readFileSync(tokens, 'utf8').split('\n').filter(Boolean);
  return gateways.map((_, i) => {
    const file = join(work, `tokens-${i}`);
    writeFileSync(file, `${lines.filter((l) => owners(l.split(' ')[0]!, keys, SHARD_COPIES).includes(keys[i]!)).join('\n')}\n`);
    return file;
  });
}

/** The survivors' webhook outcomes, reports of node inputs that did not land and queries another replica did not answer, summed (docs/metrics.md): a review answered "no-data" passed unchanged. */
async function shardOutcomes(gateways: GatewayProcess[]): Promise<Record<string, number>> {
  const sum: Record<string, number> = {};
  for (const gw of gateways) {
    for (const outcome of ['patched', 'unchanged', 'no-data']) {
      const n = await scrapeMetric(gw.ports.metrics, 'oversell_webhook_request_duration_seconds_count', `{outcome="${outcome}"}`, HOST);
      sum[outcome] = (sum[outcome] ?? 0) + (Number.isFinite(n) ? n : 0);
    }
    for (const result of ['send-failed', 'refused']) {
      const n = await scrapeMetric(gw.ports.metrics, 'oversell_peer_inputs_total', `{result="${result}"}`, HOST);
      sum[`inputs-${result}`] = (sum[`inputs-${result}`] ?? 0) + (Number.isFinite(n) ? n : 0);
    }
    const peers = await scrapeMetric(gw.ports.metrics, 'oversell_query_peers_failed_total', '', HOST);
    sum['query-peer-failed'] = (sum['query-peer-failed'] ?? 0) + (Number.isFinite(peers) ? peers : 0);
  }
  return sum;
}

async function deleteShardSlices(): Promise<void> {
  const kc = new KubeConfig();
  kc.loadFromFile(ADMIN_KUBECONFIG);
  await kc.makeApiClient(DiscoveryV1Api).deleteCollectionNamespacedEndpointSlice({ namespace: BENCH_NAMESPACE, labelSelector: `kubernetes.io/service-name=${SHARD_SERVICE}` });
}

/** bench/replica-reviews.ts in its own process; `send` writes a control line to it. */
function startReviews(config: ReplicaReviewsConfig): { child: ChildProcess; send(line: string): void; started: Promise<void>; result: Promise<ReplicaReviewsResult> } {
  // Above the others' priority: on this shared machine a client that falls behind its schedule turns into timeouts the gateway never caused (the API server is on machines of its own).
  const child = spawn('nice', ['-n', '-10', process.execPath, '--import', 'tsx', join(REPO, 'bench/replica-reviews.ts'), JSON.stringify(config)], { cwd: REPO, stdio: ['pipe', 'pipe', 'inherit'] });
  let markStarted = () => {};
  const started = new Promise<void>((resolve) => (markStarted = resolve));
  const result = new Promise<ReplicaReviewsResult>((resolve, reject) => {
    onLines(child.stdout!, (line) => {
      if (line === 'started') markStarted();
      if (!line.startsWith('result ')) return;
      try {
        resolve(JSON.parse(line.slice(7)) as ReplicaReviewsResult);
      } catch (err) {
        reject(new Error(`bench/replica-reviews.ts: its result does not parse (${(err as Error).message})`));
      }
    });
    child.once('exit', (code) => reject(new Error(`bench/replica-reviews.ts exited ${code} without a result`)));
  });
  return { child, send: (line) => child.stdin!.write(`${line}\n`), started, result };
}

/** The Lease's holder now, or undefined. */
async function leaseHolder(api: CoordinationV1Api): Promise<{ holder?: string; durationS?: number }> {
  const lease = await api.readNamespacedLease({ name: LEASE_NAME, namespace: BENCH_NAMESPACE }).catch(() => undefined);
  return { holder: lease?.spec?.holderIdentity ?? undefined, durationS: lease?.spec?.leaseDurationSeconds ?? undefined };
}

/** Starts counting each gateway's CPU; the function returned gives it since then, in millicores. */
function cpuSince(gateways: readonly GatewayProcess[]): () => number[] {
  const cpu0 = gateways.map((gw) => cpuSeconds(gw.pid));
  const t0 = performance.now();
  return () => {
    const windowS = (performance.now() - t0) / 1000;
    return gateways.map((gw, i) => ((cpuSeconds(gw.pid) - cpu0[i]!) / windowS) * 1000);
  };
}

/** Each gateway's CPU over `seconds` from now, in millicores: one phase of the run's load. */
async function cpuWindow(gateways: readonly GatewayProcess[], seconds: number): Promise<number[]> {
  const read = cpuSince(gateways);
  await sleep(seconds * 1000);
  return read();
}

/** shardCopies (default OVERSELL_BENCH_REPLICA_SHARD, else 0): run the replicas sharded, published as replicas-sharded. */
export async function run(options: { quick?: boolean; shardCopies?: number } = {}): Promise<BenchResult> {
  SHARD_COPIES = options.shardCopies ?? SHARD_FROM_ENV;
  const agents = Number(process.env.OVERSELL_BENCH_REPLICAS_AGENTS ?? NaN) || (options.quick ? 300 : 1000);
  const reviewRate = options.quick ? 30 : 100;
  const warmupS = options.quick ? 10 : 15;
  const beforeS = options.quick ? 15 : 30;
  // Long enough for the Lease to change hands (its duration, 15 s, plus a retry period).
  const afterS = options.quick ? 30 : 40;
  // The phases that cost the load apart (bench/capacity.ts): idle, then agents, then reviews, then GetNode.
  const phase = { startS: options.quick ? 5 : 20, idleS: options.quick ? 5 : 30, agentsS: options.quick ? 8 : 15, reviewsS: options.quick ? 8 : 15, queryWarmupS: 5 };
  const pin = cpus().length > 1 ? ['taskset', '-c', String(cpus().length - 1)] : [];
  const work = mkdtempSync(join(tmpdir(), 'oversell-bench-replicas-'));
  const tokens = join(work, 'tokens');
  const loadgen = await ensureLoadgen();
  // The replicas listen on the real node's bridge (HOST).
  const controlPlane = useControlPlane({ realNode: true });
  HOST = bridgeAddress();
  const stopped: string[] = [];
  const gateways: GatewayProcess[] = [];
  const agentRuns: Array<LoadgenRun<AgentsResult> | undefined> = [];
  const queries: Array<LoadgenRun<QueryResult> | undefined> = [];
  let reviews: ReturnType<typeof startReviews> | undefined;
  try {
    await deleteAgents();
    // Its node lifecycle and pod GC controllers would act on Nodes no kubelet heartbeats for.
    cluster('stop-component', 'controller-manager');
    stopped.push('controller-manager');
    log(`making ${agents} Nodes, agent pods bound to them and a token each (TokenRequest)`);
    await createAgents(PREFIX, agents, tokens, join(work, 'viewer-token'));
    const kc = new KubeConfig();
    kc.loadFromFile(ADMIN_KUBECONFIG);
    const leases = kc.makeApiClient(CoordinationV1Api);

    const sharedTls = join(work, 'tls');
    mkdirSync(sharedTls);
    for (let i = 0; i < REPLICAS; i++) {
      gateways.push(await startGateway({
        readyWithinMs: 60_000,
        host: HOST,
        // Sharded replicas report node inputs and ask each other queries: one serving certificate, as from the cluster's Secret.
        ...(SHARD_COPIES > 0 && { tlsDir: sharedTls }),
        // Their refusals while every agent's token is reviewed would bury the run's lines; an unexpected exit still prints its output.
        echo: false,
        args: ['--kubeconfig', ADMIN_KUBECONFIG, '--lease-namespace', BENCH_NAMESPACE, '--identity', `replica-${i}`, '--grpc-tls', 'on', '--auth', 'kubernetes',
          '--agent-service-accounts', `${BENCH_NAMESPACE}/${AGENT_SERVICE_ACCOUNT}`, '--sidecars', 'none', ...(STOP_SIGNAL === 'SIGTERM' ? ['--shutdown-drain', DRAIN] : []),
          ...(SHARD_COPIES > 0 ? ['--shard-copies', String(SHARD_COPIES), '--shard-service', `${BENCH_NAMESPACE}/${SHARD_SERVICE}`] : [])],
      }));
    }
    const tokensOf = SHARD_COPIES > 0 ? await shardMembers(kc, gateways, tokens, work) : gateways.map(() => tokens);
    const agentsPerReplica = tokensOf.map((f) => readFileSync(f, 'utf8').split('\n').filter(Boolean).length);
    log(SHARD_COPIES > 0
      ? `${REPLICAS} replicas up, sharded (--shard-copies ${SHARD_COPIES}); each of ${agents} agents streams to its node's ${SHARD_COPIES} owners (${agentsPerReplica.join(', ')} agents on the replicas)`
      : `${REPLICAS} replicas up; ${agents} agents streaming to each (summaries, one message per ${SUMMARY_SEND_EVERY_MS / 1000} s with a pod report of ${PODS_PER_NODE} pods, as a steady agent sends by default)`);
    // A replica's fixed cost: up, leading or not, watching its members, no agent yet (after its start's lists and Lease).
    await sleep(phase.startS * 1000);
    const idleMillicores = await cpuWindow(gateways, phase.idleS);
    log(`idle (no agent yet), ${phase.idleS} s: ${idleMillicores.map((m) => `${Math.round(m)}m`).join(', ')}`);
    const tlsArgs = (gw: GatewayProcess) => ['--ca', join(gw.tlsDir, 'ca.crt'), '--server-name', 'localhost', '--proto', PROTO];
    const statuses: Array<() => AgentsStatus> = [];
    for (const gw of gateways) {
      // As agents run by default: summaries of their window, one message every SUMMARY_SEND_EVERY_MS as the welcome says, a pod report in each.
      const run = startLoadgen<AgentsResult>(loadgen, 'agents', ['--address', `${HOST}:${gw.ports.agent}`, '--tokens', tokensOf[gateways.indexOf(gw)]!, '--batch', '0', '--summaries', '1', '--pods', String(PODS_PER_NODE), '--pod-report-every', '1', ...tlsArgs(gw)], { launcher: pin, echo: false });
      agentRuns.push(run);
      statuses.push(latestStatus(run));
    }
    await Promise.all(agentRuns.map((a, i) => waitForLine(a!, /^connected-in-ms \d+/, 10 * 60_000, `the agents of replica-${i}`)));
    log('every agent welcomed by every replica');

    // Wait for one of these replicas to lead (an earlier run's Lease may still name a gone holder).
    const identities = gateways.map((_, i) => `replica-${i}`);
    let lease = await leaseHolder(leases);
    for (let t = 0; t < 60 && !identities.includes(lease.holder ?? ''); t++) {
      await sleep(1000);
      lease = await leaseHolder(leases);
    }
    const leaderIndex = identities.indexOf(lease.holder ?? '');
    if (leaderIndex < 0) throw new Error(`no replica took Lease ${BENCH_NAMESPACE}/${LEASE_NAME} within 60 s (holder: ${lease.holder ?? 'none'})`);
    log(`replica-${leaderIndex} holds the Lease (duration ${lease.durationS} s): it is the one to be killed`);

    // Measure the kill on replicas that have settled: right after every agent connected, a replica's main
    // thread can lag seconds behind on this shared machine (measured: ~2 s for ~30 s), and reviews then time out
    // whatever happens to the leader. How long settling took is reported.
    const settleStart = Date.now();
    let calm = 0;
    while (calm < SETTLED_SECONDS && Date.now() - settleStart < SETTLE_WITHIN_S * 1000) {
      await sleep(1000);
      const delays = await Promise.all(gateways.map((gw) => scrapeMetric(gw.ports.metrics, 'oversell_event_loop_delay_seconds', '{thread="main"}', HOST).catch(() => Number.POSITIVE_INFINITY)));
      calm = delays.every((d) => d < SETTLED_LOOP_DELAY_S) ? calm + 1 : 0;
    }
    const settleS = round((Date.now() - settleStart) / 1000, 0);
    log(calm >= SETTLED_SECONDS ? `every replica's main loop under ${SETTLED_LOOP_DELAY_S * 1000} ms for ${SETTLED_SECONDS} s, ${settleS} s after the agents connected` : `the replicas did not settle within ${SETTLE_WITHIN_S} s: measuring anyway`);
    const agentsMillicores = await cpuWindow(gateways, phase.agentsS);
    log(`agents only, ${phase.agentsS} s: ${agentsMillicores.map((m) => `${Math.round(m)}m`).join(', ')}`);

    const review = JSON.parse(reviewBody(NODE_PLACEHOLDER)) as { request: { uid: string } };
    review.request.uid = UID_PLACEHOLDER;
    const template = join(work, 'review.json');
    writeFileSync(template, JSON.stringify(review));
    reviews = startReviews({
      endpoints: gateways.map((gw, i) => ({ name: `replica-${i}`, url: `https://${HOST}:${gw.ports.webhook}/mutate/nodes`, ca: join(gw.tlsDir, 'ca.crt') })),
      rate: reviewRate, warmupS, durationS: phase.reviewsS + phase.queryWarmupS + beforeS + afterS, prefix: PREFIX, count: agents, timeoutMs: WEBHOOK_TIMEOUT_MS, template, nodePlaceholder: NODE_PLACEHOLDER, uidPlaceholder: UID_PLACEHOLDER,
    });
    await reviews.started;
    await sleep(warmupS * 1000);
    const reviewsMillicores = await cpuWindow(gateways, phase.reviewsS);
    log(`agents and reviews, ${phase.reviewsS} s: ${reviewsMillicores.map((m) => `${Math.round(m)}m`).join(', ')}`);
    for (const gw of gateways) {
      queries.push(startLoadgen<QueryResult>(loadgen, 'query', ['--address', `${HOST}:${gw.ports.grpc}`, '--token-file', join(work, 'viewer-token'), ...tlsArgs(gw),
        '--prefix', PREFIX, '--count', String(agents), '--rate', String(QUERY_RATE / REPLICAS), '--warmup', `${phase.queryWarmupS}s`, '--duration', `${beforeS + afterS}s`], { launcher: pin, echo: false }));
    }
    log(`GetNode at ${QUERY_RATE}/s beside reviews at ${reviewRate}/s round-robin over the ${REPLICAS} replicas: ${phase.queryWarmupS} s warm-up, ${beforeS} s measured, then replica-${leaderIndex} is killed, then ${afterS} s more`);
    await sleep(phase.queryWarmupS * 1000);
    const cpuOfWindow = cpuSince(gateways);
    const messages0 = statuses.map((st) => st().messages);
    const stored0 = await Promise.all(gateways.map((gw) => scrapeMetric(gw.ports.metrics, 'oversell_samples_received_total', '{result="stored"}', HOST)));
    const window0 = performance.now();
    await sleep(beforeS * 1000);
    const windowS = (performance.now() - window0) / 1000;
    const millicores = cpuOfWindow();
    const stored = await Promise.all(gateways.map(async (gw, i) => ((await scrapeMetric(gw.ports.metrics, 'oversell_samples_received_total', '{result="stored"}', HOST)) - stored0[i]!) / windowS));
    const messagesPerAgentPerS = statuses.map((st, i) => (st().messages - messages0[i]!) / agents / windowS);
    const rss = gateways.map((gw) => rssMiB(gw.pid));
    // How busy the machine was besides: a shared host's other work shows here, not in the replicas' CPU.
    const loadAvg = readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 2).map(Number);
    const rssPeak = gateways.map((gw) => peakRssMiB(gw.pid));

    // The kill.
    const killed = gateways[leaderIndex]!;
    const atKill = statuses.map((st) => st());
    const killAt = Date.now();
    reviews.send('mark');
    // A killed replica's endpoint goes ENDPOINT_REMOVAL_MS after its exit; a stopped one's that long after the signal, while it drains.
    const exited = killed.kill(STOP_SIGNAL);
    if (STOP_SIGNAL === 'SIGKILL') await exited;
    log(STOP_SIGNAL === 'SIGKILL'
      ? `replica-${leaderIndex} killed (SIGKILL); its endpoint leaves the Service ${ENDPOINT_REMOVAL_MS} ms after its exit`
      : `replica-${leaderIndex} sent SIGTERM (--shutdown-drain ${DRAIN}); its endpoint leaves the Service ${ENDPOINT_REMOVAL_MS} ms later`);
    await sleep(ENDPOINT_REMOVAL_MS);
    reviews.send(`remove replica-${leaderIndex}`);
    if (SHARD_COPIES > 0) await kc.makeApiClient(DiscoveryV1Api).deleteNamespacedEndpointSlice({ name: `${SHARD_SERVICE}-${leaderIndex}`, namespace: BENCH_NAMESPACE });
    await exited;
    if (STOP_SIGNAL === 'SIGTERM') log(`replica-${leaderIndex} exited ${((Date.now() - killAt) / 1000).toFixed(1)} s after SIGTERM`);
    // Agents drop a replica their EndpointSlice no longer lists (agent/stream/gateway-set.ts), and so does a query client's resolver.
    agentRuns[leaderIndex]!.child.kill('SIGTERM');
    queries[leaderIndex]!.child.kill('SIGTERM');
    const killedAgents = await agentRuns[leaderIndex]!.result;
    const killedQuery = await queries[leaderIndex]!.result;
    agentRuns[leaderIndex] = undefined;
    queries[leaderIndex] = undefined;

    let failoverMs = Number.NaN;
    let newLeader = '';
    while (Date.now() - killAt < (afterS - 2) * 1000) {
      const now = await leaseHolder(leases);
      if (now.holder && now.holder !== lease.holder && identities.includes(now.holder)) {
        failoverMs = Date.now() - killAt;
        newLeader = now.holder;
        break;
      }
      await sleep(100);
    }
    log(Number.isFinite(failoverMs) ? `${newLeader} holds the Lease ${(failoverMs / 1000).toFixed(1)} s after the kill` : `no replica took the Lease within ${afterS - 2} s of the kill`);

    const r = await reviews.result;
    reviews = undefined;
    const survivors = gateways.map((_, i) => i).filter((i) => i !== leaderIndex);
    const queryResults = await Promise.all(survivors.map((i) => queries[i]!.result));
    for (const i of survivors) queries[i] = undefined;
    log(`answered/unanswered per second from the client's start (warm-up included; the kill at ${warmupS + phase.reviewsS + phase.queryWarmupS + beforeS} s): ${r.perSecond.map((x) => (x ? `${x[0]}/${x[1]}` : '-')).join(' ')}`);
    const unanswered = r.unanswered;
    const whatIfAnswered = r.whatIfAnswered;
    log(`reviews before the kill: ${r.before.ok}/${r.before.sent} answered, p99 ${r.before.latencyMs.p99} ms; after: ${r.after.ok}/${r.after.sent}, p99 ${r.after.latencyMs.p99} ms (${kinds(r.after.errors)}); a client retrying elsewhere would have had ${whatIfAnswered} of the ${unanswered} unanswered`);

    // Sharded: what the survivors did with the reviews they got (decided from their data or their peers' reports, or without data).
    const outcomes = SHARD_COPIES > 0 ? await shardOutcomes(survivors.map((i) => gateways[i]!)) : undefined;
    if (outcomes) log(`sharded survivors' reviews: ${JSON.stringify(outcomes)}`);

    // From the kill to the end of the run.
    const survivorAgents = await Promise.all(survivors.map(async (i) => {
      agentRuns[i]!.child.kill('SIGTERM');
      const a = await agentRuns[i]!.result;
      agentRuns[i] = undefined;
      return { ...a, reconnectsAfterKill: a.reconnects - atKill[i]!.reconnects, streamErrorsAfterKill: total(a.streamErrors) - total(atKill[i]!.streamErrors) };
    }));

    const samplesPerMessage = mean(survivorAgents.map((a) => a.sent / a.messages));
    const messageBytes = mean(survivorAgents.map((a) => a.messageBytes / a.messages));
    const survivorReconnects = survivorAgents.reduce((s, a) => s + a.reconnectsAfterKill, 0);
    const survivorStreamErrors = survivorAgents.reduce((s, a) => s + a.streamErrorsAfterKill, 0);
    const killedReconnects = killedAgents.reconnects - atKill[leaderIndex]!.reconnects;
    const killedErrors = Object.fromEntries(Object.entries(killedAgents.streamErrors).map(([k, v]) => [k, v - (atKill[leaderIndex]!.streamErrors[k] ?? 0)]).filter(([, v]) => (v as number) > 0));
    const q = { calls: queryResults.reduce((s, x) => s + x.calls, 0), ok: queryResults.reduce((s, x) => s + x.ok, 0), errors: queryResults.reduce((s, x) => s + total(x.errors), 0), p99: Math.max(...queryResults.map((x) => x.latencyMs.p99)) };
    const allErrors: Record<string, number> = { ...r.before.errors };
    for (const [k, v] of Object.entries(r.after.errors)) allErrors[k] = (allErrors[k] ?? 0) + v;
    const onKilled = r.unansweredOn[`replica-${leaderIndex}`] ?? 0;
    const lastFailureMs = r.lastFailureAtMs ?? Number.NaN;
    const met = unanswered === 0;
    const costs = phaseCosts({ idle: idleMillicores, agents: agentsMillicores, reviews: reviewsMillicores, all: millicores }, mean(agentsPerReplica), reviewRate / REPLICAS, QUERY_RATE / REPLICAS);
    log(`per replica: fixed ${costs.fixed_millicores}m, ${costs.agent_millicores_per_1000} millicores per 1,000 agents, ${costs.review_cpu_us} µs per review, ${costs.query_cpu_us} µs per GetNode`);
    return {
      name: SHARD_COPIES > 0 ? 'replicas-sharded' : 'replicas',
      summary: `${REPLICAS} replicas, ${agents} agents ${SHARD_COPIES > 0 ? `streaming to their node's ${SHARD_COPIES} owners (--shard-copies ${SHARD_COPIES})` : 'streaming to each'}, ${reviewRate} reviews/s round-robin, leader ${STOP_SIGNAL === 'SIGKILL' ? 'killed (SIGKILL)' : `stopped (SIGTERM, --shutdown-drain ${DRAIN})`} mid-run: before, ${r.before.ok}/${r.before.sent} reviews answered, p99 ${r.before.latencyMs.p99} ms; after, ${r.after.ok}/${r.after.sent}, p99 ${r.after.latencyMs.p99} ms` +
        `, ${unanswered} unanswered as the API server sends them (${kinds(allErrors)}; ${onKilled} on the killed replica, the last ${Number.isFinite(lastFailureMs) ? `${lastFailureMs} ms` : '-'} after the kill), ${whatIfAnswered} of them answered by a retry on another replica` +
        `; Lease to ${newLeader || 'nobody'} in ${Number.isFinite(failoverMs) ? `${(failoverMs / 1000).toFixed(1)} s` : `more than ${afterS - 2} s`}; agents: ${killedReconnects} reconnect attempts to the killed replica before its endpoint went, ${survivorReconnects} on the survivors`,
      figures: {
        replicas: REPLICAS, agents, settled_after_connect_s: calm >= SETTLED_SECONDS ? settleS : `not within ${SETTLE_WITHIN_S}`, reviews_per_s: reviewRate, queries_per_s: QUERY_RATE, before_window_s: beforeS, after_window_s: afterS, endpoint_removal_ms: ENDPOINT_REMOVAL_MS, stop_signal: STOP_SIGNAL,
        before_reviews_sent: r.before.sent, before_reviews_answered: r.before.ok, before_webhook_p50_ms: r.before.latencyMs.p50, before_webhook_p99_ms: r.before.latencyMs.p99, before_webhook_max_ms: r.before.latencyMs.max,
        after_reviews_sent: r.after.sent, after_reviews_answered: r.after.ok, after_webhook_p50_ms: r.after.latencyMs.p50, after_webhook_p99_ms: r.after.latencyMs.p99, after_webhook_max_ms: r.after.latencyMs.max,
        reviews_unanswered: unanswered, reviews_unanswered_kinds: JSON.stringify(allErrors), reviews_unanswered_on_killed_replica: onKilled,
        reviews_unanswered_last_ms_after_kill: Number.isFinite(lastFailureMs) ? lastFailureMs : 'none',
        reviews_answered_by_a_retry_elsewhere: whatIfAnswered, retry_elsewhere_max_ms: r.whatIfMaxMs ?? 'none', reviews_unanswered_on: JSON.stringify(r.unansweredOn),
        review_client_dispatch_lag_max_ms: r.dispatchLagMaxMs, review_client_cpu_ms: r.cpuMs,
        reviews_resent_by_go_transport: r.transparentRetries, reviews_answered_by: JSON.stringify(r.answeredBy),
        lease_duration_s: lease.durationS ?? 'unknown', leader_failover_s: Number.isFinite(failoverMs) ? round(failoverMs / 1000, 1) : 'none', new_leader: newLeader || 'none',
        killed_replica_agent_reconnects: killedReconnects, killed_replica_agent_stream_errors: JSON.stringify(killedErrors),
        survivor_agent_reconnects: survivorReconnects, survivor_agent_stream_errors: survivorStreamErrors,
        get_node_calls_survivors: q.calls, get_node_errors_survivors: q.errors, get_node_p99_ms_survivors: q.p99, get_node_errors_killed_replica: total(killedQuery.errors),
        host_load_average_1m_at_kill: loadAvg[0]!, host_load_average_5m_at_kill: loadAvg[1]!, host_cpus: cpus().length,
        agents_per_replica: round(mean(agentsPerReplica), 0), agents_per_replica_each: JSON.stringify(agentsPerReplica),
        idle_window_s: phase.idleS, agents_window_s: phase.agentsS, reviews_window_s: phase.reviewsS,
        idle_millicores_each: JSON.stringify(idleMillicores.map((m) => Math.round(m))),
        agents_phase_millicores_each: JSON.stringify(agentsMillicores.map((m) => Math.round(m))),
        reviews_phase_millicores_each: JSON.stringify(reviewsMillicores.map((m) => Math.round(m))),
        ...costs,
        replica_millicores: round(mean(millicores), 0), replica_millicores_each: JSON.stringify(millicores.map((m) => Math.round(m))),
        replica_reviews_per_s: round(reviewRate / REPLICAS, 1), replica_queries_per_s: round(QUERY_RATE / REPLICAS, 1),
        replica_rss_mib: round(mean(rss), 0), replica_rss_peak_mib: round(Math.max(...rssPeak), 0),
        stored_samples_per_agent_per_s: round(mean(stored) / agents, 3),
        agent_messages_per_agent_per_s: round(mean(messagesPerAgentPerS), 3), agent_samples_per_message: round(samplesPerMessage, 2), agent_message_bytes: Math.round(messageBytes),
        review_request_bytes: r.requestBytes, review_answer_bytes: r.answerBytes,
        ...(outcomes && { shard_copies: SHARD_COPIES, shard_survivor_review_outcomes: JSON.stringify(outcomes) }),
      },
      targets: [
        { name: '3 replicas: every review answered when one replica is killed mid-run (failed and retried as the kube-apiserver does)', measured: met ? `${r.after.ok} of ${r.after.sent} after the kill` : `${unanswered} unanswered (${kinds(allErrors)}), ${whatIfAnswered} of them answered by a retry on another replica`, met },
        { name: 'agents on the surviving replicas keep their streams through the kill', measured: `${survivorReconnects} reconnects, ${survivorStreamErrors} stream errors`, met: survivorReconnects === 0 && survivorStreamErrors === 0 },
      ],
      notes: [
        ...(SHARD_COPIES > 0 ? [`sharded (OVERSELL_BENCH_REPLICA_SHARD=${SHARD_COPIES}): --shard-copies ${SHARD_COPIES}, the replicas listening on the local cluster's bridge address (an EndpointSlice may not list loopback) with one serving certificate and grant key, their members from one EndpointSlice per replica; each replica's agents are the nodes it owns (the agent notes below say "every replica": here it is the owners); shard_survivor_review_outcomes: the survivors' webhook outcomes over the whole run (patched or unchanged: decided from their own data or their peers' reports of the node; no-data: passed unchanged), reports of node inputs that did not land (inputs-send-failed, inputs-refused), and query-peer-failed (a replica that did not answer a survivor's query: a GetNode for a node the survivor holds no usage of asks the node's owners)`] : []),
        `gateways from dist/ as deployed (node ${GATEWAY_NODE_ARGS.join(' ')}), each with its own ports on the local cluster's bridge address (oversell0, as pods reach each other over a pod network, not loopback), --identity replica-i, --grpc-tls on, --auth kubernetes, agents on --agent-port; no cgroup: ${REPLICAS} replicas share this ${cpus().length}-CPU machine with the API server, etcd and the load generators, so per-replica CPU is what each used, not a quota`,
        `the reviews start once the replicas have settled after every agent connected (each main thread's loop delay under ${SETTLED_LOOP_DELAY_S * 1000} ms for ${SETTLED_SECONDS} s running; settled_after_connect_s): on this shared machine a replica's main thread lagged about 2 s for some 30 s after 3,000 agent connections, and reviews sent meanwhile timed out`,
        `agents: bench/loadgen agents, one process per replica (every agent streams to every replica), each agent on its own TLS connection with its own pod-bound token; sampling every second and sending as the gateway's welcome says, as agents do by default (--agent-summaries on: one sample with its window's summaries every ${SUMMARY_SEND_EVERY_MS / 1000} s, each with a pod report of ${PODS_PER_NODE} pods of 2 containers; a real agent also sends at once on a change, which a steady node does not make)`,
        `reviews: bench/replica-reviews.ts, open-loop at ${reviewRate}/s, 36 KB kubelet-shaped reviews over ${agents} nodes, round-robin over the endpoints the Service lists, HTTPS keep-alive, timeout ${WEBHOOK_TIMEOUT_MS / 1000} s (the webhook's timeoutSeconds), latency from when each was due`,
        'failures as the kube-apiserver fails them: its mutating dispatcher calls the webhook once (k8s.io/apiserver/pkg/admission/plugin/webhook/mutating/dispatcher.go: client.Post().Body(...).Do(ctx), no WithExponentialBackoff; DefaultShouldRetry and WithExponentialBackoff in k8s.io/apiserver/pkg/util/webhook serve the authn, authz and audit webhooks only); client-go\'s rest.Request retries a transport error only for GET and a response only when it is 429 or 5xx with Retry-After (rest/request.go, with_retry.go); Go\'s net/http re-sends on a new connection only when a reused keep-alive connection failed before any byte of the request was written. So a refused connection, a reset after the review was sent and a timeout leave the review unanswered: with failurePolicy Ignore the status write passes unchanged (raw allocatable until the next one, 10 s later). reviews_answered_by_a_retry_elsewhere: the same review tried once more on another listed replica within its 2 s, as a retrying client would, never counted as answered',
        `the Service: the killed replica's endpoint stays listed ${ENDPOINT_REMOVAL_MS} ms after the kill (a floor: the kubelet notices a dead container at its next relist, every 1 s, before the EndpointSlice and kube-proxy follow); new connections to it meanwhile are refused. The kube-apiserver reaches a webhook Service through its ClusterIP (kube-proxy picks an endpoint per connection) unless --enable-aggregator-routing, which picks from the EndpointSlices itself`,
        `leader failover: the Lease ${BENCH_NAMESPACE}/${LEASE_NAME} read every 100 ms from the kill until another replica holds it; the survivors take an unrenewed Lease after its duration`,
        `agents of the killed replica: stopped ${ENDPOINT_REMOVAL_MS} ms after the kill, as an agent drops a replica its EndpointSlices no longer list; their reconnects and stream errors are those of that window. The survivors' agents: reconnects and stream errors from the kill to the end of the run (the connect storm before it, refusals while tokens are reviewed, not counted); messages per agent per second over the window before the kill`,
        `the load's parts, costed apart (bench/capacity.ts reads them): each replica's CPU over ${phase.idleS} s idle (${phase.startS} s after its members were listed, before any agent: fixed_millicores), ${phase.agentsS} s with its agents only (once settled), ${phase.reviewsS} s with the reviews added (after their ${warmupS} s warm-up), then the window before the kill with GetNode added (after a ${phase.queryWarmupS} s warm-up); agent_millicores_per_1000, review_cpu_us and query_cpu_us are what each phase added over the one before, on the replicas' mean, per agent it holds, per review and per GetNode it received; each window is short and the machine shared, so a part smaller than the windows' noise can come out below zero and is reported as measured. The reviews' "before" figures cover the reviews' window, the GetNode warm-up and the window before the kill`,
        `per replica (before the kill): CPU from /proc over the ${beforeS} s window, serving ${SHARD_COPIES > 0 ? `about ${Math.round(mean(agentsPerReplica))} agents (the nodes it owns)` : `${agents} agents`}, ${round(reviewRate / REPLICAS, 1)} reviews/s and ${round(QUERY_RATE / REPLICAS, 1)} GetNode/s each; agent_message_bytes is the protobuf message (gRPC, HTTP/2 and TLS framing not included)`,
      ],
    };
  } finally {
    reviews?.child.kill('SIGTERM');
    for (const a of [...agentRuns, ...queries]) a?.child.kill('SIGTERM');
    for (const gw of gateways) await gw.stop().catch(() => {});
    rmSync(work, { recursive: true, force: true });
    if (SHARD_COPIES > 0) await deleteShardSlices().catch(() => {});
    for (const c of stopped) cluster('start-component', c);
    if (controlPlane.started) controlPlane.release();
    else await deleteAgents({ all: true });
  }
}

runIfMain(import.meta.url, run);
