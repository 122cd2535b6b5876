// What the gateway's parts share (built once by buildGateway), and the
// timings and helpers more than one part uses.
import type { FastifyInstance } from 'fastify';
import type { Logger } from '../../lib/log.js';
import type { GrantProof } from '../decide/grant-proof.js';
import type { PolicySource } from '../policies/policy-source.js';
import type { PoolHarmLedger } from '../decide/pool-harm.js';
import type { GatewayMetrics } from '../metrics/metrics.js';
import type { Sending } from '../ingest/agent-sending.js';
import type { LoadShedder } from '../ingest/load-shedder.js';
import type { NodeStore } from '../store/node-store.js';
import type { BoundRequests } from '../store/bound-requests.js';
import { DEFAULT_POLICY } from '../decide/policy.js';
import { AGENT_SENDING } from '../config/defaults.js';
import { metricsPlan } from '../metrics-api/metrics-plan.js';
import type { SummaryPlan } from '../../lib/usage/summary-plan.js';
import type { ShardView } from '../shard/shard-view.js';
import type { PeerInputs } from '../store/peer-inputs.js';
import type { PeerQueries } from '../shard/peer-queries.js';
import type { LocalNodes } from '../query/local-nodes.js';
import type { QueryLimits } from '../query/query-limits.js';
import type { StreamLimits } from '../tls/stream-guard.js';
import type { GatewayOptions } from './gateway-options.js';

/** What the parts share: built once by buildGateway. */
export interface Shared {
  options: GatewayOptions;
  log: Logger;
  now: () => number;
  store: NodeStore;
  metrics: GatewayMetrics;
  proof: GrantProof;
  boundRequests: (node: string) => ReturnType<BoundRequests['of']>;
  /** Harm to each pool's pods for lack of memory, the last hour: the harm meter writes it, the policies' entries carry it. */
  poolHarm: PoolHarmLedger;
  /** The options' limits with their defaults, resolved once here: no part merges defaults of its own. */
  connections: NonNullable<GatewayOptions['connections']>;
  queryLimits: QueryLimits;
  streamLimits: StreamLimits;
  /** Why the gateway is not ready, undefined when it is. */
  notReady: () => string | undefined;
  /** Set by RunningGateway.drain(): not ready, and every webhook answer closes its connection. */
  draining: boolean;
  /** With a cluster and no webhook client CA, node gauges follow the node objects rather than reviews. */
  nodeGaugesFromWatch: boolean;
  /** What agents are told now (the ingest thread starts with it, then hears each change). */
  agentSending: () => Sending;
  shedder: LoadShedder;
  /** The nodes this replica holds as the query API shows them (to callers, and when sharded to the other replicas). */
  local: LocalNodes;
  /** Sharded: who owns which node, what the other replicas said of their nodes' decision inputs, and how a query reaches them. */
  shard?: {
    view: ShardView;
    inputs: PeerInputs;
    peers: PeerQueries;
    certificate: () => string;
    /** Replicas that did not answer a query in time: counted, and logged at most once a minute. */
    onPeersFailed: (failed: string[]) => void;
    /** A replica's report of its nodes' inputs refused (node-inputs-wire.ts): counted, and logged at most once a minute. */
    onInputsRefused: (why: string) => void;
  };
}

/** How long a sharded replica waits for the other replicas to answer a query, all of them together; and for a watch's stream to send something before its SYNCED. */
export const PEER_QUERY_DEADLINE_MS = 2000;
/** A replica answers a query on a node itself when it holds data on the node younger than this; otherwise the node's other owners are asked first. */
export const LOCAL_IF_YOUNGER_MS = 10_000;

export const MAX_RECEIVE_MESSAGE_BYTES = 4 * 1024 * 1024;
export const GRPC_SERVICES = ['', 'oversell.v1.NodeUsage'];

export async function listen(app: FastifyInstance, host: string, port: number, backlog?: number): Promise<number> {
  await app.listen({ host, port, ...(backlog !== undefined && { backlog }) });
  const address = app.server.address();
  return typeof address === 'object' && address ? address.port : port;
}

/** The staleness limit of the policy governing a node with these labels. */
export function staleAfterMsOf(policies: PolicySource): (labels: Record<string, string>) => number {
  return (labels) => policies.select(labels)?.policy?.staleAfterMs ?? DEFAULT_POLICY.staleAfterMs;
}

/** The plan agents summarize node CPU by for the metrics API: only with summaries and the metrics API both on. */
export function metricsCpuPlanOf(options: GatewayOptions): SummaryPlan | undefined {
  const sending = options.agentSending;
  return sending?.summaries && options.cluster?.metricsApi ? metricsPlan(sending.sendEveryMs ?? AGENT_SENDING.sendEveryMs) : undefined;
}
