// The gateway as a function: every listener on its own port, all of them
// closable, so tests start it on random ports and main.ts starts it on fixed ones.
// buildGateway() constructs the parts (store, metrics, servers, watches), each
// registering its own start and close (lib/lifecycle.ts); start() listens and
// watches in the order built, close() undoes it in reverse.
//
//   ingest (gRPC AgentStream) -> store -> decide -> admit (HTTPS webhook)
//                                      \-> query (gRPC NodeUsage)
//   inject (sidecar templates) -> admit (HTTPS webhook, pod CREATE)
import * as grpc from '@grpc/grpc-js';
import { randomBytes } from 'node:crypto';
import type { Server as TlsServer } from 'node:tls';
import Fastify, { type FastifyInstance } from 'fastify';
import { ReflectionService } from '@grpc/reflection';
import { HealthImplementation } from 'grpc-health-check';
import { oversellV1, packageDefinition } from '../proto/load.js';
import type { Logger } from '../lib/log.js';
import { fixStreamDecoder, streamDecoderWarning } from '../lib/grpc-stream-decoder.js';
import { webhookPlugin } from './admit/webhook-plugin.js';
import { LargeBodyBudget, limitLargeBodies } from './admit/large-body-budget.js';
import { GrantProof } from './decide/grant-proof.js';
import { podWebhookPlugin } from './admit/pod-webhook-plugin.js';
import { bindingWebhookPlugin } from './admit/binding-webhook-plugin.js';
import { bindingDeps } from './admit/binding-sources.js';
import { noTemplates, type TemplateSource } from './inject/template-source.js';
import type { KubeConfig } from '@kubernetes/client-node';
import { policyOrNone, type PolicySource } from './policies/policy-source.js';
import { withPoolHarm } from './policies/with-pool-harm.js';
import { PoolHarmLedger } from './decide/pool-harm.js';
import { LeaderLease } from './act/leader-lease.js';
import { StatusWriter } from './act/status-writer.js';
import { HistorySnapshots } from './act/history-snapshots.js';
import { GatewayMetrics } from './metrics/metrics.js';
import { probesPlugin } from './http/probes-plugin.js';
import { agentStreamService, storeTarget } from './ingest/agent-stream-service.js';
import { startSupervisedIngest, type IngestWorker } from './ingest/ingest-worker.js';
import { AgentSending } from './ingest/agent-sending.js';
import { LoadShedder } from './ingest/load-shedder.js';
import { shedLimits } from './ingest/shed.js';
import { nodeUsageDefinition, nodeUsageService } from './query/node-usage-service.js';
import { NodeStore } from './store/node-store.js';
import { BoundRequests } from './store/bound-requests.js';
import { watchBoundPods } from './ingest/bound-pods-watch.js';
import { ReliefActor } from './act/relief-actor.js';
import { watchSamples } from './act/sample-watch.js';
import { PodFactsStore } from './store/pod-facts.js';
import { meterHarm } from './metrics/harm-meter.js';
import { CpuHarmMeter } from './metrics/cpu-harm-meter.js';
import { namespaceLabelsFrom, type NamespaceLabels } from './policies/namespace-labels.js';
import { NodeWatch } from './ingest/node-watch.js';
import { decideObserved, type StoredNodeObservation } from './decide/node-decision.js';
import type { Watching } from '../lib/list-watch.js';
import { Lifecycle, type Part } from '../lib/lifecycle.js';
import type { NodeObservation } from './decide/policy.js';
import type { AgentAuthenticator } from './auth/agent-authenticator.js';
import type { QueryAuthorizer } from './auth/query-authorizer.js';
import type { ReviewStats } from './auth/review-limiter.js';
import { GRPC_SERVER_OPTIONS, listenGrpc, type GrpcListener } from './tls/grpc-listener.js';
import { DEFAULT_STREAM_LIMITS, methodPaths, streamGuard, type StreamLimits } from './tls/stream-guard.js';
import { DEFAULT_QUERY_LIMITS, listLimitInterceptor, overloadInterceptor, type QueryLimits } from './query/query-limits.js';
import { AGENT_SENDING, GATEWAY_DEFAULTS, SHEDDING } from './config/defaults.js';
import type { CommonConfig } from './config/types.js';
import { DEFAULT_POLICY } from './decide/policy.js';
import { PodDirectory } from './store/pod-directory.js';
import { watchFrontProxyTrust, type FrontProxyTrust } from './metrics-api/front-proxy.js';
import { cachedAccessReview, kubernetesAccessReview, type AccessReview } from './metrics-api/access-review.js';
import { buildMetricsApiServer } from './metrics-api/metrics-api-server.js';
import { ShardView } from './shard/shard-view.js';
import { ReviewForwarder } from './shard/review-forwarder.js';
import { PeerClient } from './shard/peer-client.js';
import { PeerQueries } from './shard/peer-queries.js';
import { peerPlugin } from './shard/peer-plugin.js';
import { LocalNodes } from './query/local-nodes.js';
import { MetricsReader, type MetricsQuery } from './metrics-api/metrics-reader.js';
import { OncePer } from '../lib/once-per.js';
import { selfMatcher, watchShardMembers } from './shard/shard-members.js';

export interface GatewayOptions {
  bindAddress: string;
  /** 0 picks a free port. */
  webhookPort: number;
  grpcPort: number;
  /**
   * Also serve agent streams on this port from a worker thread (0 picks a
   * free port); the main thread then keeps only the store, webhook and query
   * API. Undefined: agents use grpcPort, on the main thread.
   */
  agentPort?: number;
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
   * their node among the Service's ready replicas, and a review for a node
   * without fresh data here is forwarded to an owner (gateway/shard/review-forwarder.ts).
   * Absent: every agent streams to every replica. With a cluster, `service`
   * (the agents' Service) lists the members; without one, RunningGateway.shard.set().
   */
  shard?: { copies: number; service?: { namespace: string; name: string } };
  /** What agents are told about batches (default AGENT_SENDING). */
  agentSending?: { maxBatchSamples: number; sendEveryMs: number };
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
  /**
   * metrics.k8s.io/v1beta1 on its own HTTPS port (needs `cluster`: pods and
   * the front-proxy CA come from its API server). review: how access is
   * checked (default: SubjectAccessReviews to that API server, cached).
   */
  metricsApi?: { port: number; review?: AccessReview };
}

export interface RunningGateway {
  /** Swaps the webhook's certificate; new handshakes use it, open connections are not dropped. */
  setTls(tls: { cert: string; key: string }): void;
  store: NodeStore;
  metrics: GatewayMetrics;
  ports: { webhook: number; grpc: number; metrics: number; agent?: number; metricsApi?: number };
  /**
   * The first step of a graceful stop: /readyz and gRPC health say not
   * serving, and every webhook answer from now on closes its connection, so
   * the API server's next review dials the Service again and reaches a
   * replica that stays. Everything keeps serving until close().
   */
  drain(): void;
  /** Sharded (GatewayOptions.shard): who owns which node; with a cluster the Service's EndpointSlices keep it. */
  shard?: ShardView;
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

/** What the parts share: built once by buildGateway. */
interface Shared {
  options: GatewayOptions;
  log: Logger;
  now: () => number;
  store: NodeStore;
  metrics: GatewayMetrics;
  proof: GrantProof;
  boundRequests: (node: string) => ReturnType<BoundRequests['of']>;
  /** Harm to each pool's pods for lack of memory, the last hour: the harm meter writes it, the policies' entries carry it. */
  poolHarm: PoolHarmLedger;
  connections: NonNullable<GatewayOptions['connections']>;
  /** Why the gateway is not ready, undefined when it is. */
  notReady: () => string | undefined;
  /** Set by RunningGateway.drain(): not ready, and every webhook answer closes its connection. */
  draining: boolean;
  /** With a cluster and no webhook client CA, node gauges follow the node objects rather than reviews. */
  nodeGaugesFromWatch: boolean;
  /** What the main thread's agent streams are told; the ingest thread keeps its own copy. */
  agentSending: AgentSending;
  shedder: LoadShedder;
  /** The nodes this replica holds as the query API shows them (to callers, and when sharded to the other replicas). */
  local: LocalNodes;
  /** Sharded: who owns which node, how a review reaches an owner, and how a query reaches the other replicas. */
  shard?: {
    view: ShardView;
    forwarder: ReviewForwarder;
    peers: PeerQueries;
    certificate: () => string;
    /** Replicas that did not answer a query in time: counted, and logged at most once a minute. */
    onPeersFailed: (failed: string[]) => void;
  };
}

/** How long a sharded replica waits for a node's owners to answer a forwarded review: half the API server's 2 s (each owner a share, shard/hedged.ts). */
const FORWARD_DEADLINE_MS = 1000;
/** How long a sharded replica waits for the other replicas to answer a query, all of them together; and for a watch's stream to send something before its SYNCED. */
const PEER_QUERY_DEADLINE_MS = 2000;
/** A replica decides a review itself when it holds data on the node younger than this; otherwise the node's other owners are asked first. */
const LOCAL_IF_YOUNGER_MS = 10_000;

const MAX_RECEIVE_MESSAGE_BYTES = 4 * 1024 * 1024;
const GRPC_SERVICES = ['', 'oversell.v1.NodeUsage', 'oversell.v1.AgentStream'];

/** The gRPC port: agent streams on the main thread, the query API, health and reflection. */
function grpcPart(s: Shared) {
  const { options, store, metrics, log, now } = s;
  const queryLimits = { ...DEFAULT_QUERY_LIMITS, ...options.queryLimits };
  const lists = new Set(['/oversell.v1.NodeUsage/ListNodes', '/oversell.v1.NodeUsage/ListNodeSummaries']);
  const server = new grpc.Server({
    ...GRPC_SERVER_OPTIONS,
    'grpc.max_receive_message_length': MAX_RECEIVE_MESSAGE_BYTES,
    // The stream guard nearest the transport: it sees every write's completion. Then overload: a refused query takes no list slot and no token review.
    interceptors: [
      streamGuard({
        limits: { ...DEFAULT_STREAM_LIMITS, ...options.grpcStreams },
        // Limited and ended by the query API itself (--query-watches-per-caller, --query-watches, --query-watch-stall).
        selfGuarded: new Set(['/oversell.v1.NodeUsage/WatchNodes']),
        uncounted: methodPaths(oversellV1().AgentStream.service),
        onRefused: (reason) => metrics.streamRefused('grpc', reason),
        onEnded: (service) => metrics.streamEnded('grpc', service),
      }),
      overloadInterceptor('/oversell.v1.NodeUsage/', () => s.shedder.refuseQuery()),
      listLimitInterceptor(lists, queryLimits.listsInFlight, (reason) => metrics.queryRefused(reason)),
    ],
  });
  server.addService(oversellV1().AgentStream.service, agentStreamService({ store: storeTarget(store), metrics, log, now, sending: s.agentSending, shardCopies: options.shard?.copies ?? 0, ...(options.auth?.agents && { authenticate: options.auth.agents }) }));
  server.addService(nodeUsageDefinition(), nodeUsageService({
    local: s.local, policies: options.policies, notReady: s.notReady, now,
    ...(s.shard && {
      peers: {
        nodes: s.shard.peers,
        localIfYoungerMs: LOCAL_IF_YOUNGER_MS,
        onFailed: s.shard.onPeersFailed,
      },
    }),
    ...(options.auth?.query && { authorize: options.auth.query, onRefused: (failure: string) => metrics.authRefused('query', failure) }),
    onWatchEnded: (reason) => metrics.watchEnded(reason),
    limits: queryLimits,
    onLimited: (reason) => metrics.queryRefused(reason),
  }));
  // grpcurl and load balancers work without our proto files.
  const health = new HealthImplementation(Object.fromEntries(GRPC_SERVICES.map((service) => [service, 'NOT_SERVING'])));
  health.addToServer(server);
  new ReflectionService(packageDefinition()).addToServer(server);
  let listener: GrpcListener | undefined;
  // As the health service starts: every service NOT_SERVING.
  let serving = false;
  return {
    name: 'gRPC port',
    get port() {
      return listener?.port ?? NaN;
    },
    // Set every second, sent to Health/Watch streams only when it changes.
    setServing: (now: boolean) => {
      if (now === serving) return;
      serving = now;
      for (const service of GRPC_SERVICES) health.setStatus(service, now ? 'SERVING' : 'NOT_SERVING');
    },
    setTls: (tls: { cert: string; key: string }) => listener?.setTls(tls),
    async start() {
      listener = await listenGrpc(server, {
        host: options.bindAddress,
        port: options.grpcPort,
        ...(options.grpcTls && { tls: options.tls }),
        limits: { maxConnections: s.connections.grpcMaxConnections, handshakeTimeoutMs: s.connections.handshakeTimeoutMs },
        onRefused: (reason) => metrics.connectionRefused('grpc', reason),
      });
    },
    async close() {
      await new Promise<void>((resolve) => {
        server.tryShutdown(() => resolve());
        // Open agent streams would hold tryShutdown forever.
        setTimeout(() => {
          server.forceShutdown();
          resolve();
        }, 2000).unref();
      });
      await listener?.close();
    },
  };
}

async function listen(app: FastifyInstance, host: string, port: number, backlog?: number): Promise<number> {
  await app.listen({ host, port, ...(backlog !== undefined && { backlog }) });
  const address = app.server.address();
  return typeof address === 'object' && address ? address.port : port;
}

/** The webhook's HTTPS port: node status reviews and sidecar injection. */
async function webhookPart(s: Shared, templates: TemplateSource, directory: PodDirectory | undefined, sources: ClusterSources | undefined) {
  const { options, store, metrics, log, now } = s;
  const { connections } = s;
  const webhook = Fastify({
    // Slow clients: headers must arrive within 5 s and a whole request within 10 s,
    // checked every second (Node's default check runs every 30 s), so connections
    // held open by dribbling bytes are closed, not accumulated.
    https: {
      cert: options.tls.cert, key: options.tls.key, headersTimeout: 5_000, connectionsCheckingInterval: 1_000,
      // Node's default is 120 s: a connection that never sends its ClientHello is closed sooner.
      handshakeTimeout: connections.handshakeTimeoutMs,
      // A caller without a certificate from this CA fails the handshake; the API server then applies failurePolicy (Ignore).
      ...(options.webhookClientCa && { ca: options.webhookClientCa, requestCert: true, rejectUnauthorized: true }),
      // Sharded, the other replicas prove who they are with the serving certificate as client certificate (shard/peer-plugin.ts); the API server may send none.
      ...(s.shard && { requestCert: true, rejectUnauthorized: false }),
    },
    keepAliveTimeout: 30_000,
    bodyLimit: options.bodyLimitBytes,
    logger: false,
    // The API server's own timeout is seconds; a client that dribbles a body longer than this is not it.
    requestTimeout: 10_000,
    connectionTimeout: 10_000,
  });
  // A kept-alive connection would bring the API server back here after the drain; closed, its next review goes through the Service again.
  webhook.addHook('onSend', async (_request, reply, payload) => {
    if (s.draining) reply.header('connection', 'close');
    return payload;
  });
  let port = NaN;
  const part = {
    name: 'webhook port',
    get port() {
      return port;
    },
    setTls: (tls: { cert: string; key: string }) =>
      (webhook.server as unknown as TlsServer).setSecureContext({ cert: tls.cert, key: tls.key, ...(options.webhookClientCa && { ca: options.webhookClientCa }) }),
    async start() {
      // libuv accepts one connection per turn of the event loop: when the
      // main thread is busy, a connection waits in the kernel's queue for
      // as many turns as are ahead of it. A short queue keeps the ones
      // accepted young enough that their caller still waits for the answer.
      port = await listen(webhook, options.bindAddress, options.webhookPort, connections.webhookBacklog);
    },
    close: () => webhook.close(),
  };
  limitLargeBodies(webhook, new LargeBodyBudget(), () => metrics.webhookRefused('large-body-rate'));
  await webhook.register(webhookPlugin, {
    deps: {
      usage: (name) => store.usage(name, now()),
      policyFor: (labels) => options.policies.select(labels),
      proof: s.proof,
      boundRequests: s.boundRequests,
    },
    // One source of node inputs: with a cluster the node watch reads them from
    // the stored objects; without one the kubelet-shaped reviews are all there is.
    ...(!options.cluster && { observe: (name: string, observed: NodeObservation) => store.observe(name, observed, now()) }),
    // Without the API server's client certificate any caller may post reviews: with a cluster, node gauges follow what it stored.
    perNodeMetrics: !s.nodeGaugesFromWatch,
    ...(s.shard && { shard: { ...s.shard, localIfYoungerMs: LOCAL_IF_YOUNGER_MS, deadlineMs: FORWARD_DEADLINE_MS } }),
    metrics,
    log,
  });
  const countTemplates = () => {
    const all = templates.templates();
    metrics.sidecarTemplates(all.filter((t) => t.template).length, all.filter((t) => t.error).length);
  };
  templates.onChange(countTemplates);
  countTemplates();
  if (s.shard) {
    const view = s.shard.view;
    await webhook.register(peerPlugin, {
      local: s.local, certificate: s.shard.certificate,
      watch: { streams: (node, standingInFor) => (standingInFor ? view.standsIn(node, standingInFor) : view.streams(node)), onMembersChange: (listener) => view.onChange(listener), stallMs: { ...DEFAULT_QUERY_LIMITS, ...options.queryLimits }.watchStallMs },
      ...(directory && { metrics: { reader: new MetricsReader({ store, directory, staleAfterMs: staleAfterMsOf(options.policies) }), now } }),
    });
  }
  await webhook.register(podWebhookPlugin, {
    deps: {
      templates: () => templates.templates(),
      excludedNamespaces: new Set(['kube-system', ...(options.sidecars?.excludedNamespaces ?? [])]),
    },
    metrics,
    log,
  });
  if (sources?.podFacts && options.cluster) {
    await webhook.register(bindingWebhookPlugin, {
      deps: bindingDeps({ kubeConfig: options.cluster.kubeConfig, nodes: sources.nodes, proof: s.proof, policies: options.policies, pods: sources.podFacts, namespaceLabels: sources.namespaceLabels, log }),
      metrics,
      log,
    });
  }
  // Past the cap, Node closes each new connection as it is accepted ('drop').
  webhook.server.maxConnections = connections.webhookMaxConnections;
  webhook.server.on('drop', () => metrics.connectionRefused('webhook', 'connection-limit'));
  webhook.server.on('tlsClientError', (err: NodeJS.ErrnoException) => {
    if (err.code === 'ERR_TLS_HANDSHAKE_TIMEOUT') metrics.connectionRefused('webhook', 'handshake-timeout');
  });
  return part;
}

/** /metrics, /healthz and /readyz on their own port. */
async function probesPart(s: Shared, warmingUp: () => string | undefined) {
  const probes = Fastify({ logger: false });
  await probes.register(probesPlugin, { metrics: s.metrics, notReady: () => s.notReady() ?? warmingUp() });
  let port = NaN;
  return {
    name: 'metrics port',
    get port() {
      return port;
    },
    async start() {
      port = await listen(probes, s.options.bindAddress, s.options.metricsPort);
    },
    close: () => probes.close(),
  };
}

/** Agent streams on their own port, decoded by the ingest thread (--agent-port). */
function ingestThreadPart(s: Shared, agentPort: number, onDown: (reason: string | undefined) => void, onLoad: (loopDelayMs: number) => void) {
  const { options } = s;
  let worker: IngestWorker | undefined;
  return {
    name: 'ingest thread',
    get port() {
      return worker?.port;
    },
    setTls: (tls: { cert: string; key: string }) => worker?.setTls(tls),
    setSending: (sending: { maxBatchSamples: number; sendEveryMs: number }) => worker?.setSending(sending),
    async start() {
      worker = await startSupervisedIngest({
        store: s.store, metrics: s.metrics, log: s.log, bindAddress: options.bindAddress, port: agentPort, maxReceiveMessageBytes: MAX_RECEIVE_MESSAGE_BYTES,
        ...(options.ingestNice !== undefined && { nice: options.ingestNice }),
        ...(options.grpcTls && { tls: options.tls }),
        limits: { maxConnections: s.connections.grpcMaxConnections, handshakeTimeoutMs: s.connections.handshakeTimeoutMs },
        streams: { ...DEFAULT_STREAM_LIMITS, ...options.grpcStreams },
        ...(options.auth?.agents && { authenticate: options.auth.agents }),
        sending: s.shedder.sending,
        shardCopies: options.shard?.copies ?? 0,
        onDown,
        onLoad,
      });
    },
    close: () => worker?.close(),
  };
}

/** With a cluster, what every replica keeps of it and the webhook reads too: the opted-in node objects, the bound pods' tier facts, namespaces' labels. */
interface ClusterSources {
  nodes: NodeWatch;
  /** Relief, the harm count and the protected-room check read each bound pod's tier facts, from the same watch as its requests. */
  podFacts: PodFactsStore | undefined;
  namespaceLabels: NamespaceLabels;
}

function clusterSources(s: Shared, cluster: NonNullable<GatewayOptions['cluster']>): ClusterSources {
  const { store, metrics, log, now, proof } = s;
  const { policies } = s.options;
  const { kubeConfig, optInSelector } = cluster;
  const nodes = new NodeWatch({
    kubeConfig, optInSelector, store, proof, log, now,
    ...(s.nodeGaugesFromWatch && {
      onObserved: (name: string, o: StoredNodeObservation) => {
        if (!o.raw) return;
        const d = decideObserved(o.raw, o, { usage: store.usage(name, now()), entry: policies.select(o.labels), boundRequests: s.boundRequests(name) });
        if (d.cpu.decidedBy === 'no-data') return;
        metrics.nodeGauges(name, 'cpu', d.cpu);
        metrics.nodeGauges(name, 'memory', d.memory);
      },
    }),
  });
  return { nodes, podFacts: cluster.watchBoundPods !== false ? new PodFactsStore() : undefined, namespaceLabels: namespaceLabelsFrom(kubeConfig, now) };
}

/** With a cluster: the pods bound to nodes (for the decision and the metrics API's directory), the node objects, and the leader's status writes. */
function clusterParts(s: Shared, cluster: NonNullable<GatewayOptions['cluster']>, sources: ClusterSources, bound: BoundRequests, directory: PodDirectory | undefined): Part[] {
  const { store, metrics, log, now, proof } = s;
  const { policies } = s.options;
  const { kubeConfig, leaseNamespace, identity, statusWritesPerSecond } = cluster;
  const { nodes, podFacts, namespaceLabels } = sources;
  const parts: Part[] = [];
  const stores = { ...(cluster.watchBoundPods !== false && { requests: bound }), ...(directory && { directory }), ...(podFacts && { facts: podFacts }) };
  if (stores.requests || stores.directory) {
    let boundPods: Watching | undefined;
    parts.push({
      name: 'bound pods watch',
      start: async () => void (boundPods = await watchBoundPods(kubeConfig, stores, log)),
      close: () => boundPods?.stop(),
    });
  }
  parts.push({ name: 'node watch', start: () => nodes.start(), close: () => nodes.stop() });
  const shard = s.shard;
  const service = s.options.shard?.service;
  if (shard && service) {
    let members: Watching | undefined;
    parts.push({
      name: 'shard members watch',
      start: async () => void (members = await watchShardMembers({ kubeConfig, namespace: service.namespace, service: service.name, webhookPort: s.options.webhookPort, view: shard.view, log })),
      close: () => members?.stop(),
    });
  }
  const lease = new LeaderLease(kubeConfig, { namespace: leaseNamespace, name: 'oversell-gateway', identity, log });
  const writer = new StatusWriter({
    kubeConfig, nodes, store, policies, lease, metrics, log, proof, writesPerSecond: statusWritesPerSecond, now,
    notReady: s.notReady,
    identity,
    boundRequests: s.boundRequests,
    ...(shard && { lowers: (node: string) => shard.view.isFirstOwner(node) }),
  });
  // The writer listens for the lease before the lease runs: it hears the first leadership.
  let stopLeaving = () => {};
  parts.push({
    name: 'status writer',
    start: () => {
      writer.start();
      // A pod being deleted on a hot node: lower it now, before the pod is gone and its replacement is scheduled.
      stopLeaving = bound.onLeaving((node) => writer.check(node));
    },
    close: () => {
      stopLeaving();
      writer.stop();
    },
  });
  if (podFacts) {
    // The replica that lowers a node relieves it, and only an opted-in node.
    meterHarm({ pods: podFacts, nodes, policies, namespaceLabels, metrics, log, ledger: s.poolHarm, now });
    const actsFor = (node: string) => nodes.get(node) !== undefined && (shard ? shard.view.isFirstOwner(node) : lease.isLeader);
    const relief = new ReliefActor({ kubeConfig, store, pods: podFacts, policies, metrics, log, now, namespaceLabels, relieves: actsFor });
    const cpuHarm = new CpuHarmMeter({ pods: podFacts, namespaceLabels, metrics, actsFor, ledger: s.poolHarm, now });
    let unwatch = () => {};
    parts.push({
      name: 'relief and CPU harm meter',
      start: () => {
        unwatch = watchSamples({ store, policies, optedIn: (node) => nodes.get(node) !== undefined, consumers: [relief, cpuHarm] });
      },
      close: () => unwatch(),
    });
  }
  if (cluster.historySnapshotEveryMs) {
    const histories = new HistorySnapshots({
      kubeConfig, namespace: leaseNamespace, store, nodes, lease, log, everyMs: cluster.historySnapshotEveryMs,
      ...(shard && { holds: (node: string) => shard.view.isFirstOwner(node) }),
    });
    parts.push({ name: 'load history snapshots', start: () => histories.start(), close: () => histories.stop() });
  }
  parts.push({ name: 'leader lease', start: () => lease.start(), close: () => lease.stop() });
  return parts;
}

/**
 * metrics.k8s.io: the front-proxy CA watched, then the port (a caller that
 * arrives before the CA is read gets 401, before the bound pods watch has
 * named the pods in `directory` a 503).
 */
async function metricsApiParts(s: Shared, kubeConfig: KubeConfig, o: NonNullable<GatewayOptions['metricsApi']>, directory: PodDirectory) {
  const { store, log, now, options } = s;
  let trust: FrontProxyTrust | undefined;
  const server = await buildMetricsApiServer({
    bindAddress: options.bindAddress,
    port: o.port,
    tls: options.tls,
    handshakeTimeoutMs: s.connections.handshakeTimeoutMs,
    routes: {
      store,
      directory,
      staleAfterMs: staleAfterMsOf(options.policies),
      trust: () => trust?.current(),
      review: o.review ?? cachedAccessReview(kubernetesAccessReview(kubeConfig)),
      notReady: () => trust?.problem() ?? (directory.synced ? undefined : 'pods not listed yet'),
      now,
      log,
      ...(s.shard && { peers: { ask: (query: MetricsQuery) => s.shard!.peers.metrics(query), onFailed: s.shard.onPeersFailed } }),
    },
  });
  const parts: Part[] = [
    {
      name: 'metrics API front-proxy CA',
      start: async () => {
        trust = await watchFrontProxyTrust(kubeConfig, log);
        trust.onChange(() => server.trustChanged());
        server.trustChanged();
      },
      close: () => trust?.stop(),
    },
    { name: 'metrics API port', start: async () => void (await server.start()), close: () => server.close() },
  ];
  return { parts, server };
}

/** The staleness limit of the policy governing a node with these labels. */
function staleAfterMsOf(policies: PolicySource): (labels: Record<string, string>) => number {
  return (labels) => policies.select(labels)?.policy?.staleAfterMs ?? DEFAULT_POLICY.staleAfterMs;
}

/**
 * Builds every part of the gateway (store, metrics, servers, watches) without
 * listening or watching; start() then starts them in the order built, and
 * close() closes them in reverse.
 */
export async function buildGateway(given: GatewayOptions): Promise<BuiltGateway> {
  const now = given.now ?? Date.now;
  // Harm to a pool's pods for lack of memory spends its budget: every reader selects policies with it.
  const poolHarm = new PoolHarmLedger();
  const options: GatewayOptions = { ...given, policies: withPoolHarm(given.policies, poolHarm, now) };
  const { log, policies } = options;
  const life = new Lifecycle((part, err) => log.warn({ part, err: err.message }, 'a gateway part did not close cleanly; closing the rest'));
  // Stays unsynced (every lookup undefined) until a cluster's pods are listed: then agents' requests are only used clamped to the cap.
  const bound = new BoundRequests();
  const store = new NodeStore({
    retainMs: policies.retainMs(),
    forgetAfterMs: options.forgetAfterMs,
    boundRequests: (node, nowMs) => bound.of(node, nowMs),
    // The policy only: the source without the pool-harm ledger's lookup, which learning does not need.
    startupGraceMs: (labels) => policyOrNone(given.policies, labels)?.startupGraceMs ?? DEFAULT_POLICY.startupGraceMs,
  });
  policies.onChange(() => store.setRetain(policies.retainMs()));
  const metrics = new GatewayMetrics(store, now);
  if (options.auth?.reviews) metrics.countTokenReviews(options.auth.reviews);
  metrics.countPoolHarm(poolHarm);
  store.on('removed', (name) => metrics.forgetNode(name));
  const unfixed = streamDecoderWarning(fixStreamDecoder());
  if (unfixed) log.warn(unfixed);

  let started = false;
  let ingestThreadDown: string | undefined;
  let warmUntil = Infinity;
  const baseSending = options.agentSending ?? AGENT_SENDING;
  const agentSending = new AgentSending(baseSending);
  const shedding = { ...SHEDDING, ...options.shedding };
  let ingestDelayMs: number | undefined;
  let ingest: ReturnType<typeof ingestThreadPart> | undefined;
  const shedder = new LoadShedder({
    // Agents without batches send every sample at once: nothing to slow.
    limits: {
      ...shedLimits(baseSending.sendEveryMs, baseSending.maxBatchSamples > 0 ? shedding.maxSendEveryMs : baseSending.sendEveryMs, shedding.loopDelayMs, shedding.maxSampleEveryMs),
      ...(shedding.slowEveryMs !== undefined && { slowEveryMs: shedding.slowEveryMs }),
      ...(shedding.calmForMs !== undefined && { calmForMs: shedding.calmForMs }),
    },
    base: baseSending,
    announce: (sending) => {
      agentSending.set(sending);
      ingest?.setSending(sending);
    },
    ingestDelayMs: () => ingestDelayMs,
    metrics,
    log,
    ...(shedding.periodMs !== undefined && { periodMs: shedding.periodMs }),
    now,
  });
  const boundRequests = (node: string) => bound.of(node, now());
  const s: Shared = {
    options, log, now, store, metrics,
    proof: new GrantProof(options.proofKey ?? randomBytes(32)),
    boundRequests,
    poolHarm,
    connections: options.connections ?? GATEWAY_DEFAULTS.connections,
    notReady: () => (s.draining ? 'shutting down: draining reviews to the other replicas' : started ? ingestThreadDown ?? policies.notReady() : 'listeners starting'),
    draining: false,
    nodeGaugesFromWatch: options.cluster !== undefined && !options.webhookClientCa,
    agentSending,
    shedder,
    local: new LocalNodes(store, policies, now, boundRequests),
  };
  let serving = options.tls;
  let agentPort: () => number | undefined = () => undefined;
  if (options.shard) {
    if (options.webhookClientCa) throw new Error('--shard-copies cannot be used with --webhook-client-ca-file: a replica forwarding a review to its node\'s owner has no API server client certificate to present');
    const view = new ShardView(options.shard.copies, selfMatcher(() => agentPort()));
    const client = new PeerClient(() => serving);
    const identity = options.cluster?.identity ?? 'gateway';
    const unanswered = new OncePer(60_000);
    s.shard = {
      view, certificate: () => serving.cert,
      onPeersFailed: (failed) => {
        metrics.queryPeersFailed(failed.length);
        if (unanswered.take('query')) log.warn({ failed }, 'query answered without the nodes some replicas hold: they did not answer in time (check their readiness and logs)');
      },
      forwarder: new ReviewForwarder(client, identity),
      peers: new PeerQueries(view, client, identity, PEER_QUERY_DEADLINE_MS),
    };
    life.add({ name: 'connections to the other replicas', close: () => client.close() });
  }
  // The gateway owns its sources from here: they stop after everything that reads them.
  const templates = options.sidecars?.source ?? noTemplates();
  life.add({ name: 'policies', close: () => policies.stop() });
  life.add({ name: 'sidecar templates', close: () => templates.stop() });
  try {
    life.add({ name: 'load shedder', start: () => shedder.start(), close: () => shedder.stop() });
    const grpcPort = life.add(grpcPart(s));
    if (options.metricsApi && !options.cluster) throw new Error('the metrics API needs a cluster: it names pods from the API server and is served through its aggregation layer');
    // Named by the bound pods watch (a cluster part), read by the metrics API and, sharded, by the other replicas through the webhook port.
    const directory = options.metricsApi ? new PodDirectory() : undefined;
    const sources = options.cluster && clusterSources(s, options.cluster);
    const webhook = life.add(await webhookPart(s, templates, directory, sources));
    const probes = life.add(await probesPart(s, () => (now() < warmUntil ? `warming up: collecting agent data for ${Math.ceil((warmUntil - now()) / 1000)}s more` : undefined)));
    ingest = options.agentPort === undefined ? undefined : life.add(ingestThreadPart(s, options.agentPort, (reason) => (ingestThreadDown = reason), (ms) => (ingestDelayMs = ms)));
    // Agents dial the agent port when there is one, else the gRPC port: that port names this replica among the members.
    agentPort = () => ingest?.port ?? grpcPort.port;
    if (options.cluster && sources) for (const part of clusterParts(s, options.cluster, sources, bound, directory)) life.add(part);
    const metricsApi = options.metricsApi && options.cluster && directory ? await metricsApiParts(s, options.cluster.kubeConfig, options.metricsApi, directory) : undefined;
    for (const part of metricsApi?.parts ?? []) life.add(part);
    let healthTimer: NodeJS.Timeout | undefined;
    let prune: NodeJS.Timeout | undefined;
    life.add({
      name: 'timers',
      start: () => {
        healthTimer = setInterval(() => grpcPort.setServing(!s.notReady()), 1000);
        healthTimer.unref();
        prune = setInterval(() => store.prune(now()), 30_000);
        prune.unref();
      },
      close: () => {
        clearInterval(healthTimer);
        clearInterval(prune);
      },
    });

    const start = async (): Promise<RunningGateway> => {
      try {
        await life.start();
      } catch (err) {
        throw portInUse(err as NodeJS.ErrnoException) ?? err;
      }
      started = true;
      warmUntil = now() + (options.warmupMs ?? 0);
      if (!s.notReady()) grpcPort.setServing(true);
      const ports = {
        grpc: grpcPort.port, webhook: webhook.port, metrics: probes.port,
        ...(ingest?.port !== undefined && { agent: ingest.port }),
        ...(metricsApi && { metricsApi: metricsApi.server.port }),
      };
      log.info({ ...ports, bindAddress: options.bindAddress }, 'gateway serving');
      const setTls = (tls: { cert: string; key: string }) => {
        serving = tls;
        webhook.setTls(tls);
        metricsApi?.server.setTls(tls);
        if (options.grpcTls) {
          grpcPort.setTls(tls);
          ingest?.setTls(tls);
        }
      };
      const drain = () => {
        if (s.draining) return;
        s.draining = true;
        grpcPort.setServing(false);
        log.info({ webhookPort: webhook.port }, 'draining: /readyz fails and every webhook answer closes its connection, so reviews move to the other replicas');
      };
      return { store, metrics, ports, setTls, drain, ...(s.shard && { shard: s.shard.view }), close: () => life.close() };
    };
    return { store, metrics, start, close: () => life.close() };
  } catch (err) {
    await life.close();
    throw err;
  }
}

function portInUse(e: NodeJS.ErrnoException): Error | undefined {
  if (e.code !== 'EADDRINUSE' && !/address already in use|No address added/i.test(e.message)) return undefined;
  return new Error(`a gateway port is already in use (${e.message}); stop the other process or pick ports with --webhook-port/--grpc-port/--agent-port/--metrics-port/--metrics-api-port`);
}

/** Builds the gateway and starts it: every listener on its port, the watches running. */
export async function startGateway(options: GatewayOptions): Promise<RunningGateway> {
  return (await buildGateway(options)).start();
}
