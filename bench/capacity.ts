// Scale on paper: replicas, CPU and memory per replica for a cluster size,
// from the measured costs in bench/results (no figure typed here). Every
// agent streams to every replica (agent/stream/gateway-set.ts), so each
// replica pays for all agents; webhook reviews are spread over the replicas.
// Then the sharded design for 100,000 nodes (agents split over the replicas,
// k per node), costed from bench/replicas.ts (the runs before --shard-copies).
import { deployedMemoryLimitMiB } from './processes.js';
import { mean, round, type BenchResult } from './result.js';
import { ownedCounts } from '../lib/rendezvous.js';

/** With oversell a kubelet writes nodes/status every 10 s (measured on the real node: docs/install.md). */
export const REVIEWS_PER_NODE_PER_S = 0.1;
/** The install paths: two replicas (deploy/base/gateway.yaml) and its memory limit; the issue's CPU budget is one core. */
const MIN_REPLICAS = 2;
const CPU_BUDGET_M = 1000;
const MEMORY_LIMIT_MIB = deployedMemoryLimitMiB('gateway');
export const PLAN_NODES = [1000, 5000, 10_000, 15_000, 65_000] as const;

export interface PlanRow {
  nodes: number;
  reviewsPerS: number;
  ingestMillicores: number;
  rssMiB: number;
  /** Replicas for the reviews to fit the CPU budget next to the ingest; undefined when the ingest alone does not fit. */
  replicas: number | undefined;
  perReplicaMillicores: number | undefined;
  fitsMemory: boolean;
}

const figure = (r: BenchResult, key: string): number => {
  const v = r.figures[key];
  if (typeof v !== 'number') throw new Error(`${r.name}: no figure ${key}`);
  return v;
};

/** A straight line through the 1,000- and 10,000-agent runs, evaluated at n. */
const line = (r: BenchResult, what: string) => (n: number) => {
  const y1 = figure(r, `agents_1000_${what}`);
  const y2 = figure(r, `agents_10000_${what}`);
  return y1 + ((y2 - y1) * (n - 1000)) / 9000;
};

/**
 * What one TLS connection and token per agent adds over the ingest
 * benchmark's shared plaintext connections, from the cluster benchmark: RSS
 * from the 10,000-agent pass its load fitted in; CPU (less the reviews'
 * share) from that pass, or, when it was throttled at its quota (its CPU is
 * then what it was allowed, not what it needed), from the smaller pass when
 * that one fitted the core. Scaled with the agents; zero without a cluster result.
 */
function perAgentTls(cluster: BenchResult | undefined, ingest: BenchResult, reviewMillicores: number): { millicores: number; mib: number; cpuBound: boolean; cpuFromAgents: number } {
  const limit = cluster?.figures.fitting_limit_mib;
  if (!cluster || typeof limit !== 'number' || figure(cluster, 'agents') !== 10_000) return { millicores: 0, mib: 0, cpuBound: false, cpuFromAgents: 0 };
  const k = `limit_${limit}mib`;
  const tlsMillicores = (prefix: string, agents: number, reviewsPerS: number) =>
    Math.max(0, (figure(cluster, `${prefix}_gateway_millicores`) - reviewsPerS * reviewMillicores - line(ingest, 'gateway_millicores')(agents)) / agents);
  const mib = Math.max(0, (figure(cluster, `${k}_rss_peak_mib`) - figure(ingest, 'agents_10000_gateway_rss_mib')) / 10_000);
  if (figure(cluster, `${k}_throttled_pct_of_window`) < 1) return { millicores: tlsMillicores(k, 10_000, figure(cluster, 'reviews_per_s')), mib, cpuBound: false, cpuFromAgents: 10_000 };
  if (cluster.figures.smaller_fits_core !== 'yes') return { millicores: 0, mib, cpuBound: true, cpuFromAgents: 0 };
  const agents = figure(cluster, 'smaller_agents');
  return { millicores: tlsMillicores(`agents_${agents}_limit_${figure(cluster, 'smaller_limit_mib')}mib`, agents, figure(cluster, 'smaller_reviews_per_s')), mib, cpuBound: false, cpuFromAgents: agents };
}

/** The smaller pass, when it ran and did not fit either: what it used, for the reader to size from. */
function smallerText(cluster: BenchResult | undefined): string {
  if (cluster?.figures.smaller_fits_core !== 'no') return '';
  const agents = figure(cluster, 'smaller_agents');
  const k = `agents_${agents}_limit_${figure(cluster, 'smaller_limit_mib')}mib`;
  return ` Its ${agents.toLocaleString('en-US')}-node pass did not fit the core either, narrowly: ${figure(cluster, `${k}_gateway_millicores`)} millicores, throttled ${figure(cluster, `${k}_throttled_pct_of_window`)}% of the window.`;
}

export function capacityPlan(ingest: BenchResult, webhook: BenchResult, cluster?: BenchResult): PlanRow[] {
  const reviewMillicores = figure(webhook, '1000_gateway_cpu_us_per_request') / 1000; // CPU-ms per review = millicores per review/s
  const tls = perAgentTls(cluster, ingest, reviewMillicores);
  const plainCpu = line(ingest, 'gateway_millicores');
  const plainRss = line(ingest, 'gateway_rss_mib');
  const cpu = (n: number) => plainCpu(n) + n * tls.millicores;
  const rss = (n: number) => plainRss(n) + n * tls.mib;
  return PLAN_NODES.map((nodes) => {
    const reviewsPerS = nodes * REVIEWS_PER_NODE_PER_S;
    const ingestMillicores = cpu(nodes);
    const reviews = reviewsPerS * reviewMillicores;
    const room = CPU_BUDGET_M - ingestMillicores;
    const replicas = room > 0 ? Math.max(MIN_REPLICAS, Math.ceil(reviews / room)) : undefined;
    const rssMiB = rss(nodes);
    return {
      nodes, reviewsPerS, ingestMillicores, rssMiB, replicas,
      perReplicaMillicores: replicas === undefined ? undefined : ingestMillicores + reviews / replicas,
      fitsMemory: rssMiB <= MEMORY_LIMIT_MIB,
    };
  });
}

export function capacityMarkdown(ingest: BenchResult | undefined, webhook: BenchResult | undefined, cluster?: BenchResult, replicas?: BenchResult, sharded?: BenchResult, peerInputs?: BenchResult): string {
  if (!ingest || !webhook) return '## capacity on paper\n\nNeeds the ingest and webhook results.\n';
  return `${everyReplicaMarkdown(ingest, webhook, cluster)}\n${shardedMarkdown(ingest, webhook, cluster, replicas, sharded, peerInputs)}`;
}

function everyReplicaMarkdown(ingest: BenchResult, webhook: BenchResult, cluster?: BenchResult): string {
  const rows = capacityPlan(ingest, webhook, cluster);
  const tls = perAgentTls(cluster, ingest, figure(webhook, '1000_gateway_cpu_us_per_request') / 1000);
  const tlsText = !(tls.millicores || tls.mib)
    ? 'The ingest figures come from agents sharing 50 plaintext connections: TLS per agent is not in them (no 10,000-agent cluster result that fitted).'
    : tls.cpuBound
      ? `TLS and a token per agent add what the cluster benchmark measured at 10,000 agents over the ingest benchmark's shared plaintext connections: ${(tls.mib * 1024).toFixed(0)} KiB per 1,000 agents, scaled with the agents. Its CPU is not added: that run was throttled at its 1-core quota, so it shows what the replica was allowed, not what it needed, and **the CPU column is too low** by the TLS share (install.md, "Sizing the gateway").${smallerText(cluster)}`
      : `TLS and a token per agent add what the cluster benchmark measured over the ingest benchmark's shared plaintext connections: ${(tls.millicores * 1000).toFixed(0)} millicores per 1,000 agents (from its ${tls.cpuFromAgents.toLocaleString('en-US')}-agent pass${tls.cpuFromAgents === 10_000 ? '' : ', which fitted its core; the 10,000-agent pass was throttled at it'}, less the reviews' share at the rate below; the GetNode calls it served meanwhile are left in) and ${(tls.mib * 1024).toFixed(0)} KiB per 1,000 agents (its RSS peak at 10,000), scaled with the agents.`;
  const n = (v: number) => Math.round(v).toLocaleString('en-US');
  return [
    '## capacity on paper',
    '',
    `From the figures above, not measured at these sizes: each replica receives every agent's stream (ingest CPU and RSS on a straight line through the 1,000- and 10,000-agent runs), and the reviews (${REVIEWS_PER_NODE_PER_S} per node per second: the kubelet's 10 s status interval under oversell) are spread over the replicas at the gateway CPU per review measured at 1,000 req/s. ${tlsText} Replicas: the fewest (at least ${MIN_REPLICAS}) that keep each within ${CPU_BUDGET_M} millicores; memory against the ${MEMORY_LIMIT_MIB} MiB limit.`,
    '',
    `| nodes | reviews/s | ingest per replica | RSS per replica | replicas | CPU per replica | fits ${MEMORY_LIMIT_MIB} MiB |`,
    '|---|---|---|---|---|---|---|',
    ...rows.map((r) => `| ${n(r.nodes)} | ${n(r.reviewsPerS)} | ${n(r.ingestMillicores)}m | ${n(r.rssMiB)} MiB | ${r.replicas ?? '**none fits**: the ingest alone is over budget'} | ${r.perReplicaMillicores === undefined ? '-' : `${n(r.perReplicaMillicores)}m`} | ${r.fitsMemory ? 'yes' : '**no**'} |`),
    '',
  ].join('\n');
}

/** Nodes the sharded plan is costed for: Kubernetes' own limit's double, GKE's and EKS's largest clusters. */
export const SHARDED_NODES = [10_000, 65_000, 100_000] as const;
/** Replicas each agent streams to, so losing one replica loses no node's data. */
export const SHARD_COPIES = 2;
/** The fewest replicas of the sharded design: one may be lost and k copies still have somewhere to be. */
const MIN_SHARDED_REPLICAS = SHARD_COPIES + 1;
/**
 * Bytes a message costs on the wire beyond its protobuf encoding: gRPC's
 * length prefix (5), an HTTP/2 DATA frame header (9), and a TLS 1.3 record's
 * header, content type and AEAD tag (5 + 1 + 16). Protocol constants, not measurements.
 */
const FRAMING_BYTES = 5 + 9 + 5 + 1 + 16;

export interface ShardedRow {
  nodes: number;
  replicas: number;
  agentsPerReplica: number;
  reviewsPerReplicaPerS: number;
  /** Reports of nodes' decision inputs a replica receives a second (as many as it sends, on an even share). */
  reportsPerReplicaPerS: number;
  queriesPerReplicaPerS: number;
  millicores: number;
  rssMiB: number;
  /** Bytes a second in and out of one replica: agents, reviews and reports between replicas. */
  networkBytesPerS: number;
  /** False when no replica count up to the plan's largest keeps a replica within the budget (the row is at that count). */
  fits?: boolean;
}

/**
 * What each part of the load costs one replica, from the phases' CPU (each
 * adds one part to the one before): a replica's fixed cost (idle), then per
 * agent, per review and per GetNode call, each as the difference its phase
 * made over the replicas' mean. A difference under the windows' noise can
 * come out below zero: it is reported as measured, never clamped here.
 */
export function phaseCosts(m: { idle: number[]; agents: number[]; reviews: number[]; all: number[] }, agentsPerReplica: number, reviewsPerS: number, queriesPerS: number) {
  const [idle, agents, reviews, all] = [mean(m.idle), mean(m.agents), mean(m.reviews), mean(m.all)];
  return {
    fixed_millicores: round(idle, 1),
    agents_phase_millicores: round(agents, 1),
    reviews_phase_millicores: round(reviews, 1),
    agent_millicores_per_1000: round(((agents - idle) / agentsPerReplica) * 1000, 1),
    // Millicores per (call/s) is CPU-ms per call: * 1000 for µs.
    review_cpu_us: Math.round(((reviews - agents) / reviewsPerS) * 1000),
    query_cpu_us: Math.round(((all - reviews) / queriesPerS) * 1000),
  };
}

/** What the replicas benchmarks measured, part by part, for the plans. */
export interface MeasuredCosts {
  /** A replica's CPU with no agent, review or query (the idle phase; with a sharded run, the larger of the two runs'), millicores. */
  fixedMillicores: number;
  /**
   * One replica's CPU per agent at the batched rate (TLS, own token): what its
   * agents added over idle (with a sharded run, the larger of the two runs'), millicores.
   */
  millicoresPerAgent: number;
  messagesPerAgentPerS: number;
  /** CPU per agent message (the agents' part over the messages), µs. */
  usPerMessage: number;
  /**
   * CPU per review decided at a replica's review rate, millicores per
   * review/s: linear between the rates measured (the unsharded run's reviews
   * part at its rate per replica, the webhook benchmark's 500 and 1,000/s),
   * flat outside them. The cost falls as the rate rises (fixed costs per
   * wakeup shared by more reviews), so a straight line between two rates lies above it.
   */
  reviewMillicoresAt(reviewsPerS: number): number;
  /** The rates and costs (µs) it is drawn through. */
  reviewPoints: ReadonlyArray<readonly [number, number]>;
  /** CPU of one report of a node's decision inputs to one replica, both ends, building it aside (bench/peer-inputs.ts), millicores per report/s; 0 without that run. */
  reportMillicores: number;
  /** CPU of building one report, once per change of a node whatever the replicas it goes to, millicores per change/s. */
  reportBuildMillicores: number;
  /** Bytes of one report, in the request's body. */
  reportBytes: number;
  /** GetNode calls a second over the whole cluster: the replicas benchmarks' rate (no cluster-size rule exists for it). */
  queriesPerS: number;
  /** CPU per GetNode answered from the replica's own data (the unsharded run), millicores per call/s. */
  queryMillicores: number;
  /**
   * CPU per GetNode that asks the node's owners, over one answered locally
   * (the sharded run's queries against the unsharded run's, scaled by the
   * share it sent to peers); millicores per call/s, 0 without a sharded run.
   */
  peerQueryMillicores: number;
  messageWireBytes: number;
  reviewBytes: number;
  rss(agents: number): number;
}

/** y at x on the line through sorted (x, y) points, flat past either end. */
function between(points: ReadonlyArray<readonly [number, number]>, x: number): number {
  const first = points[0]!;
  const last = points[points.length - 1]!;
  if (x <= first[0]) return first[1];
  if (x >= last[0]) return last[1];
  const i = points.findIndex(([px]) => px >= x);
  const [x0, y0] = points[i - 1]!;
  const [x1, y1] = points[i]!;
  return y0 + ((y1 - y0) * (x - x0)) / (x1 - x0);
}

/** Of the queries a sharded replica receives, the share for nodes it does not own (it asks their owners). */
const peerShare = (replicas: number) => Math.max(0, replicas - SHARD_COPIES) / replicas;

/**
 * The costs of the parts, from the unsharded replicas run; given the sharded
 * run too, the plan's costs: each part that both measured at the larger of
 * the two (the model cannot yet say why they differ, so it takes the one
 * that errs high), and the peer queries' term, which only the sharded run shows.
 */
export function measuredCosts(ingest: BenchResult, webhook: BenchResult, cluster: BenchResult | undefined, replicas: BenchResult, sharded?: BenchResult, peerInputs?: BenchResult): MeasuredCosts {
  const larger = (key: string) => Math.max(figure(replicas, key), sharded ? figure(sharded, key) : Number.NEGATIVE_INFINITY);
  const millicoresPerAgent = larger('agent_millicores_per_1000') / 1000;
  const messagesPerAgentPerS = figure(replicas, 'agent_messages_per_agent_per_s');
  const tls = perAgentTls(cluster, ingest, figure(webhook, '1000_gateway_cpu_us_per_request') / 1000);
  const plainRss = line(ingest, 'gateway_rss_mib');
  const queryMillicores = figure(replicas, 'query_cpu_us') / 1000;
  const reviewPoints: Array<readonly [number, number]> = [
    [figure(replicas, 'replica_reviews_per_s'), figure(replicas, 'review_cpu_us')],
    [500, figure(webhook, '500_gateway_cpu_us_per_request')],
    [1000, figure(webhook, '1000_gateway_cpu_us_per_request')],
  ];
  reviewPoints.sort((x, y) => x[0] - y[0]);
  const peerQueryMillicores = sharded ? Math.max(0, figure(sharded, 'query_cpu_us') / 1000 - queryMillicores) / peerShare(figure(sharded, 'replicas')) : 0;
  return {
    fixedMillicores: larger('fixed_millicores'),
    millicoresPerAgent, messagesPerAgentPerS,
    usPerMessage: (millicoresPerAgent / messagesPerAgentPerS) * 1000,
    reviewPoints, reviewMillicoresAt: (rate) => between(reviewPoints, rate) / 1000,
    queriesPerS: figure(replicas, 'queries_per_s'), queryMillicores, peerQueryMillicores,
    reportMillicores: peerInputs ? (figure(peerInputs, 'report_us_both_ends') - figure(peerInputs, 'build_us_per_report')) / 1000 : 0,
    reportBuildMillicores: peerInputs ? figure(peerInputs, 'build_us_per_report') / 1000 : 0,
    reportBytes: peerInputs ? figure(peerInputs, 'bytes_per_report') : 0,
    messageWireBytes: figure(replicas, 'agent_message_bytes') + FRAMING_BYTES,
    reviewBytes: figure(replicas, 'review_request_bytes') + figure(replicas, 'review_answer_bytes'),
    rss: (n: number) => plainRss(n) + n * tls.mib,
  };
}

/** Node names shaped like a cloud's (EKS): what the owners are hashed from. */
const planNodeNames = (nodes: number) => Array.from({ length: nodes }, (_, i) => `ip-10-${(i >> 16) & 255}-${(i >> 8) & 255}-${i & 255}.eu-west-1.compute.internal`);
/** Replica pod names shaped like a Deployment's. */
const planReplicaNames = (replicas: number) => Array.from({ length: replicas }, (_, i) => `oversell-gateway-5f7c9d8b6-${(i * 7919).toString(36).padStart(5, 'q')}`);

/** The agents of the replica that owns the most nodes, with the owners from rendezvous hashing (lib/rendezvous.ts) of the node names. */
function heaviestReplica(nodeNames: readonly string[], replicas: number): number {
  return Math.max(...ownedCounts(nodeNames, planReplicaNames(replicas), SHARD_COPIES).values());
}

/** One replica of R in the sharded design at `nodes`: the heaviest, or (`agentsPerReplica` unset) an even share. */
function shardedReplica(c: MeasuredCosts, nodes: number, replicas: number, agentsPerReplica = Math.ceil((nodes * SHARD_COPIES) / replicas)): ShardedRow {
  const reviewsPerReplicaPerS = (nodes * REVIEWS_PER_NODE_PER_S) / replicas;
  const queriesPerReplicaPerS = c.queriesPerS / replicas;
  // A node's first owner reports it to every other replica once per agent message, building the report once (the
  // other owners hold theirs back while its reports keep up): on an even share each replica receives as many reports
  // as it sends, and a report's cost (both ends) is counted once per replica. It builds those of its first-owned nodes.
  const reportsPerReplicaPerS = (nodes * c.messagesPerAgentPerS * (replicas - 1)) / replicas;
  const reportsBuiltPerS = (agentsPerReplica / SHARD_COPIES) * c.messagesPerAgentPerS;
  // Its fixed cost; its agents; the reviews that reach it, each decided there; the reports; its queries, a share asked of the owners.
  const millicores = c.fixedMillicores + agentsPerReplica * c.millicoresPerAgent
    + reviewsPerReplicaPerS * c.reviewMillicoresAt(reviewsPerReplicaPerS)
    + reportsBuiltPerS * c.reportBuildMillicores + reportsPerReplicaPerS * c.reportMillicores
    + queriesPerReplicaPerS * (c.queryMillicores + peerShare(replicas) * c.peerQueryMillicores);
  const networkBytesPerS = agentsPerReplica * c.messagesPerAgentPerS * c.messageWireBytes + reviewsPerReplicaPerS * c.reviewBytes + 2 * reportsPerReplicaPerS * c.reportBytes;
  return { nodes, replicas, agentsPerReplica, reviewsPerReplicaPerS, reportsPerReplicaPerS, queriesPerReplicaPerS, millicores, rssMiB: c.rss(agentsPerReplica), networkBytesPerS };
}

/** Past this many replicas the plan stops looking: a size that no count up to it fits is reported as not fitting. */
const MAX_PLAN_REPLICAS = 1000;

/**
 * The fewest replicas (at least MIN_SHARDED_REPLICAS) that keep the heaviest
 * within the CPU budget and the memory limit. Counted by hashing only where an
 * even share already fits: hashing 100,000 names over every count is slow.
 * When no count fits (a cost every replica pays whatever R, such as the
 * reports it receives, is over the budget), the row at MAX_PLAN_REPLICAS,
 * an even share, with fits false.
 */
export function shardedPlan(c: MeasuredCosts, nodes: readonly number[] = SHARDED_NODES): ShardedRow[] {
  const fits = (row: ShardedRow) => row.millicores <= CPU_BUDGET_M && row.rssMiB <= MEMORY_LIMIT_MIB;
  return nodes.map((n) => {
    const names = planNodeNames(n);
    for (let r = MIN_SHARDED_REPLICAS; r <= MAX_PLAN_REPLICAS; r++) {
      if (!fits(shardedReplica(c, n, r))) continue;
      const row = shardedReplica(c, n, r, heaviestReplica(names, r));
      if (fits(row)) return row;
    }
    return { ...shardedReplica(c, n, MAX_PLAN_REPLICAS), fits: false };
  });
}

/** With every agent on every replica: the most nodes one replica's CPU budget and memory limit hold at the batched rate. */
export function everyReplicaLimit(c: MeasuredCosts): { byCpu: number; byMemory: number } {
  let byMemory = 0;
  for (let n = 1000; c.rss(n) <= MEMORY_LIMIT_MIB; n += 100) byMemory = n;
  return { byCpu: Math.floor((CPU_BUDGET_M - c.fixedMillicores) / c.millicoresPerAgent), byMemory };
}

export interface ModelCheckPart {
  part: 'fixed' | 'agents' | 'reviews' | 'queries' | 'total';
  predicted: number;
  measured: number;
}

/**
 * The plan's model at the sharded run's own setup (its replicas, the agents
 * each held, its review and query rates), part by part, against what each of
 * that run's phases added. The prediction leaves out the peer queries' term:
 * it is derived from this run, so counting it would check the run against itself.
 */
export function shardedModelCheck(c: MeasuredCosts, sharded: BenchResult): { replicas: number; agentsPerReplica: number; parts: ModelCheckPart[]; predictedRssMiB: number; measuredRssMiB: number } {
  const replicas = figure(sharded, 'replicas');
  const agentsPerReplica = figure(sharded, 'agents_per_replica');
  const reviewsPerS = figure(sharded, 'replica_reviews_per_s');
  const queriesPerS = figure(sharded, 'replica_queries_per_s');
  const fixed = figure(sharded, 'fixed_millicores');
  const agents = figure(sharded, 'agents_phase_millicores');
  const reviews = figure(sharded, 'reviews_phase_millicores');
  const total = figure(sharded, 'replica_millicores');
  const parts: ModelCheckPart[] = [
    { part: 'fixed', predicted: c.fixedMillicores, measured: fixed },
    { part: 'agents', predicted: agentsPerReplica * c.millicoresPerAgent, measured: agents - fixed },
    { part: 'reviews', predicted: reviewsPerS * c.reviewMillicoresAt(reviewsPerS), measured: reviews - agents },
    { part: 'queries', predicted: queriesPerS * c.queryMillicores, measured: total - reviews },
  ];
  parts.push({ part: 'total', predicted: parts.reduce((sum, p) => sum + p.predicted, 0), measured: total });
  return { replicas, agentsPerReplica, parts, predictedRssMiB: c.rss(agentsPerReplica), measuredRssMiB: figure(sharded, 'replica_rss_mib') };
}

const PART_TEXT: Record<ModelCheckPart['part'], string> = {
  fixed: 'fixed (idle, no agent)',
  agents: 'its agents',
  reviews: 'reviews, each decided where it lands',
  queries: 'GetNode, a third asked of the owners',
  total: '**total**',
};

function modelCheckMarkdown(m: ReturnType<typeof shardedModelCheck>): string {
  const off = (predicted: number, measured: number) => (measured > 0 ? `${predicted >= measured ? '+' : ''}${Math.round(((predicted - measured) / measured) * 100)}%` : '-');
  const total = m.parts.find((p) => p.part === 'total')!;
  return [
    `**Checked against the sharded run** (replicas-sharded above: ${m.replicas} replicas, each with about ${Math.round(m.agentsPerReplica).toLocaleString('en-US')} agents), part by part: each measured part is what that phase of the run added over the one before (the runs' notes), each predicted one the model with the unsharded run's costs. Memory: ${Math.round(m.predictedRssMiB)} MiB predicted, ${Math.round(m.measuredRssMiB)} MiB measured (${off(m.predictedRssMiB, m.measuredRssMiB)}).`,
    '',
    '| part (millicores per replica) | predicted | measured | model |',
    '|---|---|---|---|',
    ...m.parts.map((p) => `| ${PART_TEXT[p.part]} | ${Math.round(p.predicted)} | ${Math.round(p.measured)} | ${off(p.predicted, p.measured)} |`),
    '',
    total.predicted < total.measured
      ? `From the unsharded run alone, the model is under the sharded run by ${Math.round(total.measured - total.predicted)} millicores. The plan below closes what it can measure: it takes the fixed cost and the cost per agent (which holds the reports between replicas in the sharded run) at the larger of the two runs', and adds the peer queries' and the reports' terms. A part the model predicts over the run stays as predicted.`
      : 'From the unsharded run alone, the model is at or over the sharded run in total: the plan below, which also takes the fixed cost and the cost per agent at the larger of the two runs\' and adds the peer queries\' and the reports\' terms, errs high at this size.',
  ].join('\n');
}

function shardedMarkdown(ingest: BenchResult, webhook: BenchResult, cluster: BenchResult | undefined, replicas: BenchResult | undefined, sharded: BenchResult | undefined, peerInputs: BenchResult | undefined): string {
  if (!replicas) return '## 100,000 nodes on paper\n\nNeeds the replicas result (bench/replicas.ts).\n';
  const unsharded = measuredCosts(ingest, webhook, cluster, replicas);
  const c = measuredCosts(ingest, webhook, cluster, replicas, sharded, peerInputs);
  const limit = everyReplicaLimit(unsharded);
  const rows = shardedPlan(c);
  const n = (v: number) => Math.round(v).toLocaleString('en-US');
  const mbps = (bytesPerS: number) => ((bytesPerS * 8) / 1e6).toFixed(1);
  return [
    '## 100,000 nodes on paper',
    '',
    `The sharded gateway is built (\`--shard-copies\`, [architecture.md](architecture.md#sharding---shard-copies-n)). The plan is costed part by part from the two replicas runs above, which add their load in phases and measure each replica's CPU in each (their notes). Where both measured a part, the plan takes the larger (a replica's agents cost more each when it holds fewer, as the sharded ones do: [performance-log.md](performance-log.md), 2026-11-29; at the plan's thousands of agents a replica they cost less, so this errs high): **a replica's fixed cost ${n(c.fixedMillicores)} millicores** (up, watching, no agent: ${n(figure(replicas, 'fixed_millicores'))} unsharded, ${sharded ? n(figure(sharded, 'fixed_millicores')) : '-'} sharded); **${(c.millicoresPerAgent * 1000).toFixed(1)} millicores per 1,000 agents** (${(unsharded.millicoresPerAgent * 1000).toFixed(1)} unsharded, ${sharded ? (figure(sharded, 'agent_millicores_per_1000')).toFixed(1) : '-'} sharded; agents on their own TLS connections, each sending ${figure(replicas, 'agent_samples_per_message')} samples a message, ${figure(replicas, 'agent_messages_per_agent_per_s')} messages a second: ${n(c.usPerMessage)} µs per message); **a review's CPU falls as a replica's review rate rises**: ${c.reviewPoints.map(([r, us]) => `${n(us)} µs at ${n(r)}/s`).join(', ')} (the first from the unsharded run's reviews part, the others from the webhook benchmark); a row costs its rate on the straight line between them, which lies above a cost that falls as fixed per-wakeup costs spread over more reviews, so it errs high; **${n(c.queryMillicores * 1000)} µs per GetNode** answered from its own data, and ${c.peerQueryMillicores > 0 ? `${n(c.peerQueryMillicores * 1000)} µs more for one that asks the node's owners (the sharded run's GetNode part over the unsharded one's, per call it sent to peers)` : 'no more for one that asks the owners (the sharded run measured none over the unsharded one)'}, at the benchmarks' ${c.queriesPerS} GetNode/s for the whole cluster. Memory per agent as in the table above. A report of a node's decision inputs to one other replica: **${c.reportMillicores > 0 ? `${(c.reportMillicores * 1000).toFixed(1)} µs` : 'not measured'}** of CPU, both ends, and ${(c.reportBuildMillicores * 1000).toFixed(1)} µs more to build it, once for every replica it goes to (peer-inputs above: real HTTPS on loopback, batches of a quarter second), ${n(c.reportBytes)} bytes; no review travels between replicas.`,
    '',
    `**Every agent on every replica stops at ${n(Math.min(limit.byCpu, limit.byMemory))} nodes** at the batched rate: one core of ingest holds ${n(limit.byCpu)} agents, and the ${MEMORY_LIMIT_MIB} MiB limit ${n(limit.byMemory)}. More replicas do not help, because each one holds every agent.`,
    '',
    `**Sharded**: each node belongs to ${SHARD_COPIES} replicas. The owners come from rendezvous hashing of the node's name over the replicas the Service's EndpointSlices list (lib/rendezvous.ts: a replica that joins or leaves moves only the nodes it takes or held). Every replica and every agent computes the owners from the same list, with no Lease per shard: two replicas that briefly disagree (one has seen the Service change, the other not yet) both act on the node, and that is harmless here, since both hold its data, an early lowering is pinned to the allocatable it was decided from (a second one fails), and load histories are merged entry by entry. The agent streams to its ${SHARD_COPIES} owners (the gateway's welcome says how many). Each owner reports its nodes' decision inputs to every other replica once per agent message (${figure(replicas, 'agent_messages_per_agent_per_s')} a second per agent here), so a review is decided by the replica the Service picks, from its own data or the report; a query is answered from the replicas that hold the nodes (a get asks the owners, a list every replica). Each replica pays its fixed cost, for about ${SHARD_COPIES}/R of the agents (the table costs the heaviest: the owners of as many cloud-style node names as the row has nodes, hashed over replica pod names by lib/rendezvous.ts), its share of the reviews and of the GetNode calls (the share of GetNode for nodes it does not own asked of their owners), and the reports: a node's first owner reports it (the other owners only when its reports fall a second behind), so one built per message of its first-owned nodes' agents, and nodes x messages a second x (R - 1) / R received (as many sent), each at the report's CPU. Replicas: the fewest (at least ${MIN_SHARDED_REPLICAS}) that keep each within ${CPU_BUDGET_M} millicores and ${MEMORY_LIMIT_MIB} MiB. Network: agent messages (protobuf size measured, plus gRPC, HTTP/2 and TLS framing), reviews in and out (${n(c.reviewBytes)} bytes each) and reports in and out (HTTP and TLS framing not included).`,
    '',
    ...(sharded ? [modelCheckMarkdown(shardedModelCheck(unsharded, sharded)), ''] : ['Not checked against a sharded run: bench/replicas-sharded.ts has not been run.', '']),
    '| nodes | replicas | agents on the heaviest replica | reviews/s per replica | reports received/s per replica | CPU per replica | memory per replica | network per replica |',
    '|---|---|---|---|---|---|---|---|',
    ...rows.map((r) => `| ${n(r.nodes)} | ${r.fits === false ? `does not fit: over the budget at ${r.replicas}` : r.replicas} | ${n(r.agentsPerReplica)} | ${n(r.reviewsPerReplicaPerS)} | ${n(r.reportsPerReplicaPerS)} | ${n(r.millicores)}m | ${n(r.rssMiB)} MiB | ${mbps(r.networkBytesPerS)} Mbit/s |`),
    '',
    'What grows with R: a list or a watch asks every replica for its share, so one costs R requests (or streams) between replicas. What does not shrink with R: every replica receives the reports of every node (nodes x messages a second, less its own), a floor under each replica\'s CPU that more replicas do not lower.',
    '',
  ].join('\n');
}
