// Scale on paper: replicas, CPU and memory per replica for a cluster size,
// from the measured costs in bench/results (no figure typed here). Every
// agent streams to every replica (agent/stream/gateway-set.ts), so each
// replica pays for all agents; webhook reviews are spread over the replicas.
import { deployedMemoryLimitMiB } from './processes.js';
import type { BenchResult } from './result.js';

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

export function capacityMarkdown(ingest: BenchResult | undefined, webhook: BenchResult | undefined, cluster?: BenchResult): string {
  if (!ingest || !webhook) return '## capacity on paper\n\nNeeds the ingest and webhook results.\n';
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
