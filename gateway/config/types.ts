// The gateway's configuration, by mode: what loadConfig (config.ts) returns.
import type { Policy } from '../decide/policy.js';

/** Where the kubeconfig comes from: the pod's ServiceAccount, or a file. */
export type KubeSource = { kind: 'in-cluster' } | { kind: 'kubeconfig'; file: string };

export type FlagsPolicies = { source: 'flags'; policy: Policy };
export type PoliciesConfig = FlagsPolicies | { source: 'crd' };

export type FileTls = { source: 'files'; certFile: string; keyFile: string };
export type SelfManagedTls = { source: 'self-managed'; dir: string; hosts: string[] };
/** Kept in a Secret by the replicas; webhookConfiguration '' injects the CA nowhere. */
export type SecretTls = { source: 'secret'; namespace: string; name: string; hosts: string[]; webhookConfiguration: string };
export type TlsConfig = FileTls | SelfManagedTls | SecretTls;

export type FileProofKey = { source: 'file'; file: string };
export type ProofKeyConfig = FileProofKey | { source: 'secret'; namespace: string; name: string };

export type NoAuth = { mode: 'none' };
export type AuthConfig =
  | NoAuth
  | { mode: 'kubernetes'; audience: string; serviceAccounts: string[]; tokenReviewsPerSecond: number; tokenReviewsInFlight: number };

/** excludedNamespaces: never injected, whatever the webhook configuration sends. */
export type NoSidecars = { source: 'none'; excludedNamespaces: string[] };
export type FileSidecars = { source: 'file'; file: string; excludedNamespaces: string[] };
export type SidecarsConfig = NoSidecars | FileSidecars | { source: 'configmap'; namespace: string; excludedNamespaces: string[] };

export interface CommonConfig {
  logLevel: string;
  bindAddress: string;
  webhookPort: number;
  grpcPort: number;
  /** Agent streams, on a port and thread of their own. */
  agentPort: number;
  metricsPort: number;
  grpcTls: boolean;
  webhookClientCaFile?: string;
  warmupMs: number;
  shutdownDrainMs: number;
  /** Per listener: connections at once, and how long one may stay silent. */
  connections: { grpcMaxConnections: number; webhookMaxConnections: number; webhookBacklog: number; handshakeTimeoutMs: number };
  /** How agents send: batches of at most maxBatchSamples (0: none), a sample waiting at most sendEveryMs. */
  agentSending: { maxBatchSamples: number; sendEveryMs: number; summaries: boolean };
  /** Load shedding: over loopDelayMs a thread is overloaded (0: never); agents are slowed to at most maxSendEveryMs. */
  shedding: { loopDelayMs: number; maxSendEveryMs: number; maxSampleEveryMs: number };
  /** What query callers may hold on a replica. */
  queryLimits: { watchesPerCaller: number; watches: number; listsInFlight: number; watchStallMs: number };
  /** Streams of the gRPC services without limits of their own, per connection and per gRPC port, and how long any stream but WatchNodes may go unread. */
  grpcStreams: { perConnection: number; total: number; stallMs: number };
  /** Said at start, loudly: settings that are allowed but open something up. */
  warnings: string[];
}

export interface LocalConfig extends CommonConfig {
  mode: 'local';
  policies: FlagsPolicies;
  tls: FileTls | SelfManagedTls;
  proofKey: FileProofKey;
  auth: NoAuth;
  sidecars: NoSidecars | FileSidecars;
}

export interface ClusterConfig extends CommonConfig {
  mode: 'cluster';
  kube: KubeSource;
  cluster: {
    leaseNamespace: string;
    identity: string;
    statusWritesPerSecond: number;
    /** The leader writes the load histories this often, every replica reads them at start; 0: neither. */
    historySnapshotEveryMs: number;
    optInSelector: string;
    watchBoundPods: boolean;
    /** --shard-copies above 0: agents stream to their node's owners among the members the Service lists. */
    shard?: { copies: number; service: { namespace: string; name: string } };
  };
  /** metrics.k8s.io/v1beta1 on this port; undefined: not served. */
  metricsApi?: { port: number };
  /** ConfigMap of the lease namespace the CA is published in; undefined: not published. */
  caConfigMap?: string;
  policies: PoliciesConfig;
  tls: TlsConfig;
  proofKey: ProofKeyConfig;
  auth: AuthConfig;
  sidecars: SidecarsConfig;
}

export type GatewayConfig = LocalConfig | ClusterConfig;

/** A value or combination the gateway refuses; the message says what to change. */
