// The gateway as a function: every listener on its own port, all of them
// closable, so tests start it on random ports and main.ts starts it on fixed ones.
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
import { GrantProof } from './decide/grant-proof.js';
import { podWebhookPlugin } from './admit/pod-webhook-plugin.js';
import { noTemplates, type TemplateSource } from './inject/template-source.js';
import type { KubeConfig } from '@kubernetes/client-node';
import type { PolicySource } from './policies/policy-source.js';
import { LeaderLease } from './act/leader-lease.js';
import { StatusWriter } from './act/status-writer.js';
import { GatewayMetrics } from './metrics/metrics.js';
import { probesPlugin } from './http/probes-plugin.js';
import { agentStreamService, storeTarget } from './ingest/agent-stream-service.js';
import { startSupervisedIngest, type IngestWorker } from './ingest/ingest-worker.js';
import { nodeUsageDefinition, nodeUsageService } from './query/node-usage-service.js';
import { NodeStore } from './store/node-store.js';
import { BoundRequests } from './store/bound-requests.js';
import { watchBoundPods } from './ingest/bound-pods-watch.js';
import { NodeWatch } from './ingest/node-watch.js';
import { decideObserved, type StoredNodeObservation } from './decide/node-decision.js';
import type { Watching } from '../lib/list-watch.js';
import type { NodeObservation } from './decide/policy.js';
import type { AgentAuthenticator } from './auth/agent-authenticator.js';
import type { QueryAuthorizer } from './auth/query-authorizer.js';
import type { ReviewStats } from './auth/review-limiter.js';
import { GRPC_SERVER_OPTIONS, listenGrpc, type GrpcListener } from './tls/grpc-listener.js';
import { DEFAULT_QUERY_LIMITS, listLimitInterceptor, type QueryLimits } from './query/query-limits.js';
import { GATEWAY_DEFAULTS } from './config/defaults.js';

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
  connections?: { grpcMaxConnections: number; webhookMaxConnections: number; handshakeTimeoutMs: number };
  /** What query callers may hold (default DEFAULT_QUERY_LIMITS). */
  queryLimits?: Partial<QueryLimits>;
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
  ports: { webhook: number; grpc: number; metrics: number; agent?: number };
  close(): Promise<void>;
}

async function listen(app: FastifyInstance, host: string, port: number): Promise<number> {
  await app.listen({ host, port });
  const address = app.server.address();
  return typeof address === 'object' && address ? address.port : port;
}

export async function startGateway(options: GatewayOptions): Promise<RunningGateway> {
  const { log } = options;
  const now = options.now ?? Date.now;
  const { policies } = options;
  // Stays unsynced (every lookup undefined) until a cluster's pods are listed: then agents' requests are only used clamped to the cap.
  const bound = new BoundRequests();
  const boundRequests = (node: string) => bound.of(node, now());
  const store = new NodeStore({ retainMs: policies.retainMs(), forgetAfterMs: options.forgetAfterMs, boundRequests: (node, nowMs) => bound.of(node, nowMs) });
  policies.onChange(() => store.setRetain(policies.retainMs()));
  const metrics = new GatewayMetrics(store, now);
  if (options.auth?.reviews) metrics.countTokenReviews(options.auth.reviews);
  store.on('removed', (name) => metrics.forgetNode(name));
  let ready = false;
  let ingestThreadDown: string | undefined;

  const unfixed = streamDecoderWarning(fixStreamDecoder());
  if (unfixed) log.warn(unfixed);
  const maxReceiveMessageBytes = 4 * 1024 * 1024;
  const connections = options.connections ?? GATEWAY_DEFAULTS.connections;
  const queryLimits = { ...DEFAULT_QUERY_LIMITS, ...options.queryLimits };
  const lists = new Set(['/oversell.v1.NodeUsage/ListNodes', '/oversell.v1.NodeUsage/ListNodeSummaries']);
  const grpcServer = new grpc.Server({
    ...GRPC_SERVER_OPTIONS,
    'grpc.max_receive_message_length': maxReceiveMessageBytes,
    interceptors: [listLimitInterceptor(lists, queryLimits.listsInFlight, (reason) => metrics.queryRefused(reason))],
  });
  const V1 = oversellV1();
  grpcServer.addService(V1.AgentStream.service, agentStreamService({ store: storeTarget(store), metrics, log, now, ...(options.auth?.agents && { authenticate: options.auth.agents }) }));
  const notReady = () => (ready ? ingestThreadDown ?? policies.notReady() : 'listeners starting');
  grpcServer.addService(nodeUsageDefinition(), nodeUsageService({
    store, policies, notReady, now, boundRequests,
    ...(options.auth?.query && { authorize: options.auth.query, onRefused: (failure: string) => metrics.authRefused('query', failure) }),
    onWatchEnded: (reason) => metrics.watchEnded(reason),
    limits: queryLimits,
    onLimited: (reason) => metrics.queryRefused(reason),
  }));
  // grpcurl and load balancers work without our proto files.
  const health = new HealthImplementation({ '': 'NOT_SERVING', 'oversell.v1.NodeUsage': 'NOT_SERVING', 'oversell.v1.AgentStream': 'NOT_SERVING' });
  health.addToServer(grpcServer);
  new ReflectionService(packageDefinition()).addToServer(grpcServer);

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
    },
    keepAliveTimeout: 30_000,
    bodyLimit: options.bodyLimitBytes,
    logger: false,
    // The API server's own timeout is seconds; a client that dribbles a body longer than this is not it.
    requestTimeout: 10_000,
    connectionTimeout: 10_000,
  });
  const proof = new GrantProof(options.proofKey ?? randomBytes(32));
  const nodeGaugesFromWatch = options.cluster !== undefined && !options.webhookClientCa;
  await webhook.register(webhookPlugin, {
    deps: {
      usage: (name) => store.usage(name, now()),
      policyFor: (labels) => policies.select(labels),
      proof,
      boundRequests,
    },
    // One source of node inputs: with a cluster the node watch reads them from
    // the stored objects; without one the kubelet-shaped reviews are all there is.
    ...(!options.cluster && { observe: (name: string, observed: NodeObservation) => store.observe(name, observed, now()) }),
    // Without the API server's client certificate any caller may post reviews: with a cluster, node gauges follow what it stored.
    perNodeMetrics: !nodeGaugesFromWatch,
    metrics,
    log,
  });

  const templates = options.sidecars?.source ?? noTemplates();
  const countTemplates = () => {
    const all = templates.templates();
    metrics.sidecarTemplates(all.filter((t) => t.template).length, all.filter((t) => t.error).length);
  };
  templates.onChange(countTemplates);
  countTemplates();
  await webhook.register(podWebhookPlugin, {
    deps: {
      templates: () => templates.templates(),
      excludedNamespaces: new Set(['kube-system', ...(options.sidecars?.excludedNamespaces ?? [])]),
    },
    metrics,
    log,
  });

  const probes = Fastify({ logger: false });
  let warmUntil = Infinity;
  await probes.register(probesPlugin, {
    metrics,
    notReady: () => notReady() ?? (now() < warmUntil ? `warming up: collecting agent data for ${Math.ceil((warmUntil - now()) / 1000)}s more` : undefined),
  });
  const healthTimer = setInterval(() => {
    const status = notReady() ? 'NOT_SERVING' : 'SERVING';
    for (const service of ['', 'oversell.v1.NodeUsage', 'oversell.v1.AgentStream']) health.setStatus(service, status);
  }, 1000);
  healthTimer.unref();

  const prune = setInterval(() => store.prune(now()), 30_000);
  prune.unref();

  let lease: LeaderLease | undefined;
  let writer: StatusWriter | undefined;
  let nodes: NodeWatch | undefined;
  if (options.cluster) {
    const { kubeConfig, leaseNamespace, identity, statusWritesPerSecond, optInSelector } = options.cluster;
    lease = new LeaderLease(kubeConfig, { namespace: leaseNamespace, name: 'oversell-gateway', identity, log });
    nodes = new NodeWatch({
      kubeConfig, optInSelector, store, proof, log, now,
      ...(nodeGaugesFromWatch && {
        onObserved: (name: string, o: StoredNodeObservation) => {
          if (!o.raw) return;
          const d = decideObserved(o.raw, o, { usage: store.usage(name, now()), entry: policies.select(o.labels), boundRequests: boundRequests(name) });
          if (d.cpu.decidedBy === 'no-data') return;
          metrics.nodeGauges(name, 'cpu', d.cpu);
          metrics.nodeGauges(name, 'memory', d.memory);
        },
      }),
    });
    writer = new StatusWriter({
      kubeConfig, nodes, store, policies, lease, metrics, log, proof, writesPerSecond: statusWritesPerSecond, now,
      notReady: () => notReady(),
      identity,
      boundRequests,
    });
  }

  // Past the cap, Node closes each new connection as it is accepted ('drop').
  webhook.server.maxConnections = connections.webhookMaxConnections;
  webhook.server.on('drop', () => metrics.connectionRefused('webhook', 'connection-limit'));
  webhook.server.on('tlsClientError', (err: NodeJS.ErrnoException) => {
    if (err.code === 'ERR_TLS_HANDSHAKE_TIMEOUT') metrics.connectionRefused('webhook', 'handshake-timeout');
  });

  let ingestWorker: IngestWorker | undefined;
  let grpcListener: GrpcListener | undefined;
  let boundPods: Watching | undefined;
  const closeAll = async () => {
    clearInterval(prune);
    clearInterval(healthTimer);
    await boundPods?.stop();
    writer?.stop();
    await nodes?.stop();
    await lease?.stop();
    await policies.stop();
    await templates.stop();
    await Promise.allSettled([
      webhook.close(),
      probes.close(),
      ingestWorker?.close(),
      new Promise<void>((resolve) => {
        grpcServer.tryShutdown(() => resolve());
        // Open agent streams would hold tryShutdown forever.
        setTimeout(() => {
          grpcServer.forceShutdown();
          resolve();
        }, 2000).unref();
      }).then(() => grpcListener?.close()),
    ]);
  };

  try {
    const listeners = {
      grpc: (grpcListener = await listenGrpc(grpcServer, {
        host: options.bindAddress,
        port: options.grpcPort,
        ...(options.grpcTls && { tls: options.tls }),
        limits: { maxConnections: connections.grpcMaxConnections, handshakeTimeoutMs: connections.handshakeTimeoutMs },
        onRefused: (reason) => metrics.connectionRefused('grpc', reason),
      })).port,
      webhook: await listen(webhook, options.bindAddress, options.webhookPort),
      metrics: await listen(probes, options.bindAddress, options.metricsPort),
    };
    if (options.agentPort !== undefined) {
      ingestWorker = await startSupervisedIngest({
        store, metrics, log, bindAddress: options.bindAddress, port: options.agentPort, maxReceiveMessageBytes,
        ...(options.grpcTls && { tls: options.tls }),
        limits: { maxConnections: connections.grpcMaxConnections, handshakeTimeoutMs: connections.handshakeTimeoutMs },
        ...(options.auth?.agents && { authenticate: options.auth.agents }),
        onDown: (reason) => (ingestThreadDown = reason),
      });
    }
    const ports = { ...listeners, ...(ingestWorker && { agent: ingestWorker.port }) };
    if (options.cluster && options.cluster.watchBoundPods !== false) {
      boundPods = await watchBoundPods(options.cluster.kubeConfig, bound, log);
    }
    await nodes?.start();
    if (writer && lease) {
      writer.start();
      lease.start();
    }
    ready = true;
    warmUntil = now() + (options.warmupMs ?? 0);
    if (!notReady()) for (const service of ['', 'oversell.v1.NodeUsage', 'oversell.v1.AgentStream']) health.setStatus(service, 'SERVING');
    log.info({ ...ports, bindAddress: options.bindAddress }, 'gateway serving');
    const setTls = (tls: { cert: string; key: string }) => {
      (webhook.server as unknown as TlsServer).setSecureContext({ cert: tls.cert, key: tls.key, ...(options.webhookClientCa && { ca: options.webhookClientCa }) });
      if (options.grpcTls) {
        grpcListener?.setTls(tls);
        ingestWorker?.setTls(tls);
      }
    };
    return { store, metrics, ports, setTls, close: closeAll };
  } catch (err) {
    await closeAll();
    const e = err as NodeJS.ErrnoException;
    if (e.code === 'EADDRINUSE' || /address already in use|No address added/i.test(e.message)) {
      throw new Error(`a gateway port is already in use (${e.message}); stop the other process or pick ports with --webhook-port/--grpc-port/--agent-port/--metrics-port`);
    }
    throw err;
  }
}
