// The gateway as a function: every listener on its own port, all of them
// closable, so tests start it on random ports and main.ts starts it on fixed ones.
// buildGateway() constructs the parts (store, metrics, servers, watches), each
// registering its own start and close (lib/lifecycle.ts); start() listens and
// watches in the order built, close() undoes it in reverse.
//
//   ingest (gRPC AgentStream, its own thread) -> store -> decide -> admit (HTTPS webhook)
//                                      \-> query (gRPC NodeUsage)
//   inject (sidecar templates) -> admit (HTTPS webhook, pod CREATE)
import { randomBytes } from 'node:crypto';
import { fixStreamDecoder, streamDecoderWarning } from '../lib/grpc-stream-decoder.js';
import { GrantProof } from './decide/grant-proof.js';
import { noTemplates } from './inject/template-source.js';
import { policyOrNone } from './policies/policy-source.js';
import { withPoolHarm } from './policies/with-pool-harm.js';
import { PoolLoadKeeper } from './policies/pool-load-keeper.js';
import { PoolHarmLedger } from './decide/pool-harm.js';
import { GatewayMetrics } from './metrics/metrics.js';
import type { Sending } from './ingest/agent-sending.js';
import { summaryPlansOf } from './policies/summary-plans.js';
import { LoadShedder } from './ingest/load-shedder.js';
import { shedLimits } from './ingest/shed.js';
import { NodeStore } from './store/node-store.js';
import { BoundRequests } from './store/bound-requests.js';
import { Lifecycle } from '../lib/lifecycle.js';
import { AGENT_SENDING, GATEWAY_DEFAULTS, SHEDDING } from './config/defaults.js';
import { DEFAULT_QUERY_LIMITS } from './query/query-limits.js';
import { DEFAULT_STREAM_LIMITS } from './tls/stream-guard.js';
import { DEFAULT_POLICY } from './decide/policy.js';
import { PodDirectory } from './store/pod-directory.js';
import { ShardView } from './shard/shard-view.js';
import { NodeInputsSender } from './shard/node-inputs-sender.js';
import { PeerInputs } from './store/peer-inputs.js';
import { PeerClient } from './shard/peer-client.js';
import { PeerQueries } from './shard/peer-queries.js';
import { LocalNodes } from './query/local-nodes.js';
import { OncePer } from '../lib/once-per.js';
import { selfMatcher } from './shard/shard-members.js';
import type { BuiltGateway, GatewayOptions, RunningGateway } from './parts/gateway-options.js';
import { type Shared, metricsCpuPlanOf, PEER_QUERY_DEADLINE_MS } from './parts/shared.js';
import { grpcPart } from './parts/grpc-port.js';
import { webhookPart } from './parts/webhook-port.js';
import { probesPart } from './parts/probes-port.js';
import { ingestThreadPart } from './parts/ingest-thread.js';
import { clusterParts, clusterSources } from './parts/cluster.js';
import { metricsApiParts } from './parts/metrics-api.js';

export type { BuiltGateway, GatewayOptions, RunningGateway } from './parts/gateway-options.js';

/**
 * Builds every part of the gateway (store, metrics, servers, watches) without
 * listening or watching; start() then starts them in the order built, and
 * close() closes them in reverse.
 */
export async function buildGateway(given: GatewayOptions): Promise<BuiltGateway> {
  const now = given.now ?? Date.now;
  // Harm to a pool's pods for lack of memory spends its budget: every reader selects policies with it.
  const poolHarm = new PoolHarmLedger();
  // Each pool's typical predicted peak, from the histories in the store (made below): what the pods a rise lets in count at.
  const poolLoad = new PoolLoadKeeper({ nodes: () => store.list(), policyOf: (labels) => policyOrNone(given.policies, labels) });
  const options: GatewayOptions = { ...given, policies: withPoolHarm(given.policies, poolHarm, now, (pool) => poolLoad.of(pool)) };
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
  // With summaries, every Settings names the policies' plans: the shedder's changes and the policies' alike.
  const metricsCpuPlan = metricsCpuPlanOf(options);
  const plans = () => (options.agentSending?.summaries ? { summaryPlans: summaryPlansOf(policies.entries(), metricsCpuPlan ? [metricsCpuPlan] : []) } : {});
  let told: Sending = { ...baseSending, ...plans() };
  const announce = (sending: Sending) => {
    told = { ...sending, ...plans() };
    ingest?.setSending(told);
  };
  const shedding = { ...SHEDDING, ...options.shedding };
  let ingestDelayMs: number | undefined;
  let ingest: ReturnType<typeof ingestThreadPart> | undefined;
  const shedder = new LoadShedder({
    // Agents without batches send every sample at once: nothing to slow.
    // Summarizing agents send once per interval however often they sample: shedding their samples relieves
    // nothing and costs a Settings to every agent at each step (docs/performance-log.md, 2026-12-06 night).
    limits: {
      ...shedLimits(baseSending.sendEveryMs, baseSending.maxBatchSamples > 0 ? shedding.maxSendEveryMs : baseSending.sendEveryMs, shedding.loopDelayMs, options.agentSending?.summaries ? 0 : shedding.maxSampleEveryMs),
      ...(shedding.slowEveryMs !== undefined && { slowEveryMs: shedding.slowEveryMs }),
      ...(shedding.calmForMs !== undefined && { calmForMs: shedding.calmForMs }),
    },
    base: baseSending,
    announce,
    ingestDelayMs: () => ingestDelayMs,
    metrics,
    log,
    ...(shedding.periodMs !== undefined && { periodMs: shedding.periodMs }),
    now,
  });
  policies.onChange(() => announce(shedder.sending));
  const boundRequests = (node: string) => bound.of(node, now());
  const s: Shared = {
    options, log, now, store, metrics,
    proof: new GrantProof(options.proofKey ?? randomBytes(32)),
    boundRequests,
    poolHarm,
    connections: options.connections ?? GATEWAY_DEFAULTS.connections,
    queryLimits: { ...DEFAULT_QUERY_LIMITS, ...options.queryLimits },
    streamLimits: { ...DEFAULT_STREAM_LIMITS, ...options.grpcStreams },
    notReady: () => (s.draining ? 'shutting down: draining reviews to the other replicas' : started ? ingestThreadDown ?? policies.notReady() : 'listeners starting'),
    draining: false,
    nodeGaugesFromWatch: options.cluster !== undefined && !options.webhookClientCa,
    agentSending: () => told,
    shedder,
    local: new LocalNodes(store, policies, now, boundRequests),
  };
  let serving = options.tls;
  if (options.shard) {
    if (options.webhookClientCa) throw new Error('--shard-copies cannot be used with --webhook-client-ca-file: replicas call each other on the webhook port (node inputs, queries) with the serving certificate, not one from the API server\'s client CA');
    const view = new ShardView(options.shard.copies, selfMatcher(() => ingest?.port));
    const client = new PeerClient(() => serving);
    const identity = options.cluster?.identity ?? 'gateway';
    const unanswered = new OncePer(60_000);
    s.shard = {
      view, certificate: () => serving.cert,
      onPeersFailed: (failed) => {
        metrics.queryPeersFailed(failed.length);
        if (unanswered.take('query')) log.warn({ failed }, 'query answered without the nodes some replicas hold: they did not answer in time (check their readiness and logs)');
      },
      onInputsRefused: (why) => {
        metrics.peerInputs('refused');
        if (unanswered.take('inputs refused')) log.warn({ why }, 'node inputs from a replica refused: they failed their checks (a replica of another version, or a bug); reviews of its nodes here decide from older inputs');
      },
      inputs: new PeerInputs(options.forgetAfterMs),
      peers: new PeerQueries(view, client, identity, PEER_QUERY_DEADLINE_MS),
    };
    const inputs = s.shard.inputs;
    const sender = new NodeInputsSender({
      store, policies: () => policies.entries(), view, client, identity, now, log,
      onFailed: () => metrics.peerInputs('send-failed'),
      reportedSampleAtMs: (node) => inputs.reportedSampleAtMs(node),
    });
    life.add({ name: 'connections to the other replicas', close: () => client.close() });
    life.add({ name: 'node inputs to the other replicas', start: () => sender.start(), close: () => sender.stop() });
  }
  // The gateway owns its sources from here: they stop after everything that reads them.
  const templates = options.sidecars?.source ?? noTemplates();
  life.add({ name: 'policies', close: () => policies.stop() });
  life.add({ name: "pools' typical peak", start: () => poolLoad.start(), close: () => poolLoad.stop() });
  life.add({ name: 'sidecar templates', close: () => templates.stop() });
  try {
    life.add({ name: 'load shedder', start: () => shedder.start(), close: () => shedder.stop() });
    const grpcPort = life.add(grpcPart(s));
    // Named by the bound pods watch (a cluster part), read by the metrics API and, sharded, by the other replicas through the webhook port.
    const directory = options.cluster?.metricsApi ? new PodDirectory() : undefined;
    const sources = options.cluster && clusterSources(s, options.cluster);
    const webhook = life.add(await webhookPart(s, templates, directory, sources));
    const probes = life.add(await probesPart(s, () => (now() < warmUntil ? `warming up: collecting agent data for ${Math.ceil((warmUntil - now()) / 1000)}s more` : undefined)));
    // Agents dial the agent port: it names this replica among the members.
    const agents = life.add(ingestThreadPart(s, options.agentPort, (reason) => (ingestThreadDown = reason), (ms) => (ingestDelayMs = ms)));
    ingest = agents;
    if (options.cluster && sources) for (const part of clusterParts(s, options.cluster, sources, bound, directory)) life.add(part);
    const metricsApi = options.cluster?.metricsApi && directory ? await metricsApiParts(s, options.cluster.kubeConfig, options.cluster.metricsApi, directory) : undefined;
    for (const part of metricsApi?.parts ?? []) life.add(part);
    let healthTimer: NodeJS.Timeout | undefined;
    let prune: NodeJS.Timeout | undefined;
    life.add({
      name: 'timers',
      start: () => {
        healthTimer = setInterval(() => grpcPort.setServing(!s.notReady()), 1000);
        healthTimer.unref();
        prune = setInterval(() => {
          store.prune(now());
          s.shard?.inputs.prune(now());
        }, 30_000);
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
        agent: agents.port ?? NaN,
        ...(metricsApi && { metricsApi: metricsApi.server.port }),
      };
      log.info({ ...ports, bindAddress: options.bindAddress }, 'gateway serving');
      const setTls = (tls: { cert: string; key: string }) => {
        serving = tls;
        webhook.setTls(tls);
        metricsApi?.server.setTls(tls);
        if (options.grpcTls) {
          grpcPort.setTls(tls);
          agents.setTls(tls);
        }
      };
      const drain = () => {
        if (s.draining) return;
        s.draining = true;
        grpcPort.setServing(false);
        log.info({ webhookPort: webhook.port }, 'draining: /readyz fails and every webhook answer closes its connection, so reviews move to the other replicas');
      };
      return { store, metrics, ports, setTls, drain, ...(s.shard && { shard: s.shard.view, peerInputs: s.shard.inputs }), close: () => life.close() };
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
