// What buildGateway takes and gives: the options of every part, and the running gateway.
import type { Logger } from '../../lib/log.js';
import type { TemplateSource } from '../inject/template-source.js';
import type { KubeConfig } from '@kubernetes/client-node';
import type { PolicySource } from '../policies/policy-source.js';
import type { GatewayMetrics } from '../metrics/metrics.js';
import type { NodeStore } from '../store/node-store.js';
import type { AgentAuthenticator } from '../auth/agent-authenticator.js';
import type { QueryAuthorizer } from '../auth/query-authorizer.js';
import type { ReviewStats } from '../auth/review-limiter.js';
import type { StreamLimits } from '../tls/stream-guard.js';
import type { QueryLimits } from '../query/query-limits.js';
import type { CommonConfig } from '../config/types.js';
import type { AccessReview } from '../metrics-api/access-review.js';
import type { ShardView } from '../shard/shard-view.js';
import type { PeerInputs } from '../store/peer-inputs.js';

export interface GatewayOptions {
  bindAddress: string;
  /** 0 picks a free port. */
  webhookPort: number;
  grpcPort: number;
  /**
   * Agent streams, served from a thread of their own (0 picks a free port):
   * the main thread keeps the store, webhook and query API.
   */
  agentPort: number;
  /** Their nice value (default INGEST_THREAD_NICE; 0: the main thread's). */
  ingestNice?: number;
  metricsPort: number;
  tls: { cert: string; key: string };
  /** Serve gRPC (agents, query API) over TLS with the same certificate. */
  grpcTls?: boolean;
  /** Client certificates the webhook requires (PEM CA bundle): only the API server's client certificate gets through. */
  webhookClientCa?: string;
  /** Who may stream and query; without these, anyone who reaches the port (local mode). */
  auth?: { agents?: AgentAuthenticator; query?: QueryAuthorizer; reviews?: ReviewStats };
  policies: PolicySource;
  /** Forget nodes whose agent is gone this long. */
  forgetAfterMs: number;
  /** Largest AdmissionReview accepted. */
  bodyLimitBytes: number;
  log: Logger;
  now?: () => number;
  /** With a cluster: the leader lowers allocatable itself and writes policy status. */
  cluster?: {
    kubeConfig: KubeConfig;
    leaseNamespace: string;
    identity: string;
    statusWritesPerSecond: number;
    optInSelector: string;
    /** Watch the pods bound to nodes for bound requests no agent can inflate (default true). */
    watchBoundPods?: boolean;
    /** Keep the nodes' load histories in ConfigMaps of leaseNamespace: the leader writes them this often, every replica reads them at start (0 or unset: neither). */
    historySnapshotEveryMs?: number;
    /**
     * metrics.k8s.io/v1beta1 on its own HTTPS port: pods and the front-proxy
     * CA come from this cluster's API server. review: how access is checked
     * (default: SubjectAccessReviews to that API server, cached).
     */
    metricsApi?: { port: number; review?: AccessReview };
  };
  /** Sidecar injection on pod CREATE (POST /mutate/pods); without it, no templates: pods pass unchanged. */
  sidecars?: {
    source: TemplateSource;
    /** Never injected, whatever the webhook configuration sends: kube-system and the gateway's own namespace. */
    excludedNamespaces: readonly string[];
  };
  /** /readyz stays 503 this long after start, so agents (which find not-ready replicas too) fill the store first. */
  warmupMs?: number;
  /** Connections per listener and how long one may stay silent (default GATEWAY_DEFAULTS.connections). */
  connections?: CommonConfig['connections'];
  /** What query callers may hold (default DEFAULT_QUERY_LIMITS). */
  queryLimits?: Partial<QueryLimits>;
  /** Streams of the other services per connection and per gRPC server, and how long any stream may go unread (default DEFAULT_STREAM_LIMITS; tls/stream-guard.ts). */
  grpcStreams?: Partial<StreamLimits>;
  /**
   * Sharding (Settings.shard_copies): agents stream to this many owners of
   * their node among the Service's ready replicas, and each node's first
   * owner reports its decision inputs to the others, so any replica decides
   * any review (gateway/shard/node-inputs-sender.ts).
   * Absent: every agent streams to every replica. With a cluster, `service`
   * (the agents' Service) lists the members; without one, RunningGateway.shard.set().
   */
  shard?: { copies: number; service?: { namespace: string; name: string } };
  /** What agents are told about batches (default AGENT_SENDING). */
  agentSending?: { maxBatchSamples: number; sendEveryMs: number; summaries?: boolean };
  /**
   * Load shedding (default SHEDDING): over loopDelayMs of event-loop delay a
   * thread is overloaded (0: never shed); agents are then told to send less
   * often, up to maxSendEveryMs, then to sample less often, up to
   * maxSampleEveryMs (unset: SHEDDING's; 0: never), and while it is the main thread
   * queries are refused. periodMs, slowEveryMs, calmForMs: how often it measures, how
   * soon it slows agents again, how long calm before a step back (tests).
   */
  shedding?: { loopDelayMs: number; maxSendEveryMs: number; maxSampleEveryMs?: number; periodMs?: number; slowEveryMs?: number; calmForMs?: number };
  /**
   * The key every replica signs its grants with (docs/security.md). Without
   * one, a random key of this process: records from before a restart are then
   * not trusted and each node's next kubelet write establishes raw again.
   */
  proofKey?: Buffer;
}

export interface RunningGateway {
  /** Swaps the webhook's certificate; new handshakes use it, open connections are not dropped. */
  setTls(tls: { cert: string; key: string }): void;
  store: NodeStore;
  metrics: GatewayMetrics;
  ports: { webhook: number; grpc: number; metrics: number; agent: number; metricsApi?: number };
  /**
   * The first step of a graceful stop: /readyz and gRPC health say not
   * serving, and every webhook answer from now on closes its connection, so
   * the API server's next review dials the Service again and reaches a
   * replica that stays. Everything keeps serving until close().
   */
  drain(): void;
  /** Sharded (GatewayOptions.shard): who owns which node; with a cluster the Service's EndpointSlices keep it. */
  shard?: ShardView;
  /** Sharded: what the other replicas reported of their nodes' decision inputs (shard/node-inputs-sender.ts). */
  peerInputs?: PeerInputs;
  close(): Promise<void>;
}

/** The gateway built, not listening: every part constructed, none started. */
export interface BuiltGateway {
  store: NodeStore;
  metrics: GatewayMetrics;
  /** Starts the parts in the order they were built (listeners first, then watches); on a failure closes them all and rejects. */
  start(): Promise<RunningGateway>;
  /** Closes every part, last built first; before start too. */
  close(): Promise<void>;
}
