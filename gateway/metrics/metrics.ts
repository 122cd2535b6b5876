// The gateway's Prometheus series. One registry per gateway instance, so tests
// can run several gateways in one process without their counters mixing.
import { readdir } from 'node:fs/promises';
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import type { DecidedBy } from '../decide/policy.js';
import type { SampleRefusal } from '../store/sample-check.js';

/** What became of an agent sample: stored, dropped, or refused by sample-check.ts for a reason. */
export type SampleResult = IngestResult | 'rate-limited' | `refused-${SampleRefusal}`;
import type { IngestResult, NodeStore } from '../store/node-store.js';
import type { PoolHarmLedger } from '../decide/pool-harm.js';
import { NodeSeries, type NodeResource } from './node-series.js';

/** What a node's gauges show of one resource's decision. */
export interface NodeGaugeValues {
  decidedBy: DecidedBy;
  raw: bigint;
  granted: bigint;
  applied: bigint;
  requestsOverCap: boolean;
}

export class GatewayMetrics {
  readonly registry = new Registry();
  readonly #webhookDuration: Histogram<'outcome'>;
  readonly #decisions: Counter<'resource' | 'bound'>;
  readonly #samples: Counter<'result'>;
  /**
   * Counted here and added to #samples when scraped: inc() with a label builds
   * the label key on every call, once per sample (10,000 a second at scale).
   */
  readonly #samplesSinceScrape = new Map<SampleResult, number>();
  readonly #statusWrites: Counter<'result'>;
  readonly #untouched: Counter<'reason'>;
  readonly #peerInputs: Counter<'result'>;
  readonly #queryPeersFailed: Counter;
  readonly #podWebhookDuration: Histogram<'outcome'>;
  readonly #bindingWebhookDuration: Histogram<'outcome'>;
  readonly #injections: Counter<'template'>;
  readonly #refusals: Counter<'template' | 'reason'>;
  readonly #templates: Gauge<'state'>;
  readonly #authRefusals: Counter<'api' | 'reason'>;
  readonly #ingestThreadHeap: Gauge<'thread' | 'kind'>;
  readonly #nodeSeries = new NodeSeries();
  readonly #store: NodeStore;
  readonly #now: () => number;

  constructor(store: NodeStore, now: () => number = Date.now) {
    this.#store = store;
    this.#now = now;
    const registers = [this.registry];
    collectDefaultMetrics({ register: this.registry, prefix: 'oversell_gateway_' });
    openFdsOffTheLoop(this.registry, 'oversell_gateway_');
    this.#webhookDuration = new Histogram({
      name: 'oversell_webhook_request_duration_seconds',
      help: 'Time to answer one AdmissionReview, by outcome (patched, unchanged, no-data, skipped, not-kubelet, unverified, bad-request, error).',
      labelNames: ['outcome'],
      buckets: [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.5],
      registers,
    });
    this.#decisions = new Counter({
      name: 'oversell_decisions_total',
      help: 'Allocatable decisions made by the webhook, by resource and by the bound that set the value.',
      labelNames: ['resource', 'bound'],
      registers,
    });
    this.#samples = new Counter({
      name: 'oversell_samples_received_total',
      help: 'Agent samples received, by what became of them (stored, duplicate, not-current-stream, unknown-node, rate-limited).',
      labelNames: ['result'],
      registers,
      collect: () => {
        for (const [result, n] of this.#samplesSinceScrape) this.#samples.inc({ result }, n);
        this.#samplesSinceScrape.clear();
      },
    });
    this.#statusWrites = new Counter({
      name: 'oversell_node_status_writes_total',
      help: 'The leader\'s own writes: allocatable lowered ahead of the kubelet (lowered), memory one byte down so a kubelet whose last write passed the webhook unpatched writes again (nudged), either refused (failed) or held back (rate-limited; paused: not written because the gateway is not ready or its data is fresh for too few nodes) and Events on nodes whose bound requests exceed the cap (event, event-failed).',
      labelNames: ['result'],
      registers,
    });
    this.#untouched = new Counter({
      name: 'oversell_webhook_untouched_total',
      help: 'Node writes the webhook passed unchanged because it could not trust them: not by the node\'s own kubelet (not-kubelet), or raw allocatable not established (no-proof, above-capacity, no-capacity, not-positive, beyond-int64).',
      labelNames: ['reason'],
      registers: [this.registry],
    });
    this.#peerInputs = new Counter({
      name: 'oversell_peer_inputs_total',
      help: 'Sharded (--shard-copies): reports of nodes\' decision inputs between replicas, by result: send-failed (a report this replica could not deliver to a replica in 2 s; reviews of those nodes there decide from older inputs until the next), refused (a report from a replica that failed its checks, dropped whole).',
      labelNames: ['result'],
      registers: [this.registry],
    });
    this.#queryPeersFailed = new Counter({
      name: 'oversell_query_peers_failed_total',
      help: 'Sharded (--shard-copies): replicas that did not answer a query in time (one per replica per call): within the 2 s, or within their share of it once the other owners of their nodes had answered, or a watch stream that sent nothing for 2 s before its SYNCED; the query was answered with what the others hold.',
      registers: [this.registry],
    });
    // Sidecar injection has its own series: pod creations must not blur the
    // latency of the node heartbeat path, which is the one with a budget.
    this.#podWebhookDuration = new Histogram({
      name: 'oversell_pod_webhook_request_duration_seconds',
      help: 'Time to answer one pod CREATE AdmissionReview, by outcome (injected, unchanged, refused, denied, skipped, bad-request, error).',
      labelNames: ['outcome'],
      buckets: [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.5],
      registers,
    });
    this.#bindingWebhookDuration = new Histogram({
      name: 'oversell_binding_webhook_request_duration_seconds',
      help: 'Time to answer one pods/binding AdmissionReview (the protected-room check), by outcome (allowed, denied, unprotected, skipped, unknown, bad-request, error).',
      labelNames: ['outcome'],
      buckets: [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.5, 1],
      registers,
    });
    this.#injections = new Counter({
      name: 'oversell_sidecar_injections_total',
      help: 'Sidecar templates injected into new pods, by template.',
      labelNames: ['template'],
      registers,
    });
    this.#refusals = new Counter({
      name: 'oversell_sidecar_refusals_total',
      help: 'Sidecars a pod asked for but did not get, by template and reason (collision, missing-volume, invalid-template, unknown-template).',
      labelNames: ['template', 'reason'],
      registers,
    });
    this.#templates = new Gauge({
      name: 'oversell_sidecar_templates',
      help: 'Sidecar templates the gateway knows, by state (valid, invalid).',
      labelNames: ['state'],
      registers,
    });
    this.#authRefusals = startingAtZero(new Counter({
      name: 'oversell_auth_refusals_total',
      help: 'Callers refused by authentication or authorization, by api (agent-stream, query) and reason (unauthenticated, permission-denied, node-mismatch, unavailable, expired).',
      labelNames: ['api', 'reason'],
      registers,
    }), [
      ...['unauthenticated', 'permission-denied', 'node-mismatch', 'unavailable', 'expired'].map((reason) => ({ api: 'agent-stream', reason })),
      ...['unauthenticated', 'permission-denied', 'unavailable'].map((reason) => ({ api: 'query', reason })),
    ]);
    this.#ingestThreadHeap = new Gauge({
      name: 'oversell_ingest_thread_heap_bytes',
      help: 'V8 heap of each ingest thread (--agent-port, --ingest-threads), by thread: used, and the limit it runs under (--max-old-space-size plus its young generation); no series without the threads.',
      labelNames: ['thread', 'kind'],
      registers,
    });
    new Gauge({
      name: 'oversell_agents_connected',
      help: 'Agent streams currently open.',
      registers,
      collect() {
        this.set(store.connectedCount());
      },
    });
  }

  observeWebhook(outcome: string, seconds: number): void {
    this.#webhookDuration.observe({ outcome }, seconds);
  }

  /** A decision made: counted, and the node's gauges follow it. */
  decision(node: string, resource: NodeResource, d: NodeGaugeValues): void {
    this.#decisions.inc({ resource, bound: d.decidedBy });
    this.nodeGauges(node, resource, d);
  }

  /** A decision only counted: its node's gauges follow another source (GatewayOptions.webhookClientCa). */
  decisionCounted(resource: NodeResource, decidedBy: DecidedBy): void {
    this.#decisions.inc({ resource, bound: decidedBy });
  }

  /** The node's per-node gauges (raw, granted, applied, over cap) at a decision. */
  nodeGauges(node: string, resource: NodeResource, d: NodeGaugeValues): void {
    const raw = Number(d.raw);
    this.#nodeSeries.set(node, resource, {
      raw: resource === 'cpu' ? raw / 1000 : raw,
      grantedRatio: d.raw > 0n ? Number(d.granted) / raw : undefined,
      appliedRatio: d.raw > 0n ? Number(d.applied) / raw : undefined,
      overCap: d.requestsOverCap,
    });
  }

  /** A node the store forgot: drop its series. */
  forgetNode(node: string): void {
    this.#nodeSeries.forget(node);
  }

  /**
   * The /metrics text in chunks: prom-client's registry, then the per-node
   * series (node-series.ts), which yield to the event loop as they are written.
   */
  async *expositionChunks(): AsyncGenerator<string> {
    yield await this.registry.metrics();
    yield '\n';
    yield* this.#nodeSeries.chunks(this.#store.list(), this.#now());
  }

  /** The whole /metrics text at once (tests). */
  async exposition(): Promise<string> {
    let text = '';
    for await (const chunk of this.expositionChunks()) text += chunk;
    return text;
  }

  /** A node write passed unchanged because it could not be trusted. */
  untouched(reason: string): void {
    this.#untouched.inc({ reason });
  }

  peerInputs(result: 'send-failed' | 'refused'): void {
    this.#peerInputs.inc({ result });
  }

  queryPeersFailed(count: number): void {
    this.#queryPeersFailed.inc(count);
  }

  observePodWebhook(outcome: string, seconds: number): void {
    this.#podWebhookDuration.observe({ outcome }, seconds);
  }

  observeBindingWebhook(outcome: string, seconds: number): void {
    this.#bindingWebhookDuration.observe({ outcome }, seconds);
  }

  /** Unknown template names come from pod annotations: they share one label value, so pods cannot grow the series. */
  sidecars(injected: readonly string[], refused: ReadonlyArray<{ template: string; reason: string }>): void {
    for (const template of injected) this.#injections.inc({ template });
    for (const r of refused) this.#refusals.inc({ template: r.reason === 'unknown-template' ? '(unknown)' : r.template, reason: r.reason });
  }

  sidecarTemplates(valid: number, invalid: number): void {
    this.#templates.set({ state: 'valid' }, valid);
    this.#templates.set({ state: 'invalid' }, invalid);
  }

  statusWrite(result: 'lowered' | 'nudged' | 'failed' | 'rate-limited' | 'paused' | 'event' | 'event-failed'): void {
    this.#statusWrites.inc({ result });
  }

  authRefused(api: 'agent-stream' | 'query', reason: string): void {
    this.#authRefusals.inc({ api, reason });
  }

  /** What the ingest thread last said of its heap. */
  ingestThreadHeap(thread: string, usedBytes: number, limitBytes: number): void {
    this.#ingestThreadHeap.set({ thread, kind: 'used' }, usedBytes);
    this.#ingestThreadHeap.set({ thread, kind: 'limit' }, limitBytes);
  }

  /** An ingest thread's own loop delay, as it reports it every second. */
  threadLoopDelay(thread: string, delayMs: number): void {
    this.#loopDelay.set({ thread }, delayMs / 1000);
  }

  sampleReceived(result: SampleResult): void {
    this.#samplesSinceScrape.set(result, (this.#samplesSinceScrape.get(result) ?? 0) + 1);
  }

  readonly #watchesEnded = new Counter({
    name: 'oversell_query_watches_ended_total',
    help: 'WatchNodes streams the gateway ended, by reason (slow-reader: the client read nothing for the stall limit; token-expired; revoked: access or token withdrawn).',
    labelNames: ['reason'],
    registers: [this.registry],
  });

  watchEnded(reason: 'slow-reader' | 'token-expired' | 'revoked'): void {
    this.#watchesEnded.inc({ reason });
  }

  readonly #queryRefusals = new Counter({
    name: 'oversell_query_refusals_total',
    help: 'Query calls refused with RESOURCE_EXHAUSTED by the replica\'s limits, by reason (watches-per-caller, watches, lists-in-flight).',
    labelNames: ['reason'],
    registers: [this.registry],
  });

  queryRefused(reason: 'watches-per-caller' | 'watches' | 'lists-in-flight'): void {
    this.#queryRefusals.inc({ reason });
  }

  // Load shedding (gateway/ingest/load-shedder.ts): what the gateway gives up so reviews are answered.
  readonly #loopDelay = new Gauge({
    name: 'oversell_event_loop_delay_seconds',
    help: 'How late each thread\'s event loop ran (99th percentile over the last second), by thread (main: store, webhook, query API; ingest-0, ingest-1, ...: the threads serving agent streams with --agent-port). Over --shed-loop-delay the thread is overloaded.',
    labelNames: ['thread'],
    registers: [this.registry],
  });

  readonly #overloaded = new Gauge({
    name: 'oversell_overloaded',
    help: '1 while the thread\'s event loop is delayed over --shed-loop-delay (until it is under half of it), by thread (main; ingest: the most delayed ingest thread); main: queries are refused; either: agents are told to send less often.',
    labelNames: ['thread'],
    registers: [this.registry],
  });

  readonly #overloadedSeconds = startingAtZero(new Counter({
    name: 'oversell_overloaded_seconds_total',
    help: 'Time each thread spent overloaded (oversell_overloaded at 1), by thread (main; ingest: the most delayed ingest thread), counted at the end of each load-shedder period (1 s).',
    labelNames: ['thread'],
    registers: [this.registry],
  }), [{ thread: 'main' }, { thread: 'ingest' }]);

  readonly #minSampleInterval = new Gauge({
    name: 'oversell_agent_min_sample_interval_seconds',
    help: 'The least sampling interval the gateway announces now: 0 when calm (agents sample at their own interval); 2 s, doubling up to --shed-max-sample-every, while a thread stays overloaded with agents already sending as seldom as allowed. Samples not taken are data no decision sees.',
    registers: [this.registry],
  });

  readonly #sendEvery = new Gauge({
    name: 'oversell_agent_send_every_seconds',
    help: 'The longest a sample waits in its agent before it is sent, as the gateway announces it now: --agent-send-every when calm, doubled up to --shed-max-send-every while overloaded (a rise or pressure is sent at once whatever it says).',
    registers: [this.registry],
  });

  readonly #shed = startingAtZero(new Counter({
    name: 'oversell_shed_total',
    help: 'What the gateway refused because a thread was overloaded, by what (queries: query calls answered RESOURCE_EXHAUSTED while the main thread was). Reviews are never shed.',
    labelNames: ['what'],
    registers: [this.registry],
  }), [{ what: 'queries' }]);

  /** The load shedder's measurement and state, once per period. */
  shedding(s: { mainDelayMs: number; mainOverloaded: boolean; ingestOverloaded: boolean; sendEveryMs: number; minSampleIntervalMs: number }): void {
    this.#minSampleInterval.set(s.minSampleIntervalMs / 1000);
    this.#loopDelay.set({ thread: 'main' }, s.mainDelayMs / 1000);
    this.#overloaded.set({ thread: 'main' }, s.mainOverloaded ? 1 : 0);
    this.#overloaded.set({ thread: 'ingest' }, s.ingestOverloaded ? 1 : 0);
    this.#sendEvery.set(s.sendEveryMs / 1000);
  }

  /** A thread was overloaded for this long (the load shedder's period just ended). */
  overloadedFor(thread: 'main' | 'ingest', ms: number): void {
    this.#overloadedSeconds.inc({ thread }, ms / 1000);
  }

  shed(what: 'queries'): void {
    this.#shed.inc({ what });
  }

  readonly #webhookRefused = startingAtZero(new Counter({
    name: 'oversell_webhook_refused_total',
    help: 'Webhook requests refused before their body was read, by reason (large-body-rate: a caller over its budget of bodies over 256 KiB a second, answered 429).',
    labelNames: ['reason'],
    registers: [this.registry],
  }), [{ reason: 'large-body-rate' }]);

  webhookRefused(reason: 'large-body-rate'): void {
    this.#webhookRefused.inc({ reason });
  }

  readonly #relief = startingAtZero(new Counter({
    name: 'oversell_relief_total',
    help: 'Relief: pods oversell asked the Eviction API to evict because their node\'s memory crossed the relief line, by result (evicted; blocked: a PodDisruptionBudget refused, the next pod was taken; dry-run: a DryRun policy, nothing evicted; failed; rate-limited: the cluster-wide rate was spent). Never a protected pod.',
    labelNames: ['result'],
    registers: [this.registry],
  }), ['evicted', 'blocked', 'dry-run', 'failed', 'rate-limited'].map((result) => ({ result })));

  relief(result: 'evicted' | 'blocked' | 'dry-run' | 'failed' | 'rate-limited'): void {
    this.#relief.inc({ result });
  }

  readonly #harm = new Counter({
    name: 'oversell_harm_pods_total',
    help: 'What hurt pods on opted-in nodes, by pool (the OversellPolicy), tier (protected, unprotected) and by whom: kubelet-eviction (the pod failed Evicted), oom-kill (containers terminated OOMKilled, each once), relief (oversell evicted it through the Eviction API). Protected pods hit by anyone should stay at 0.',
    labelNames: ['pool', 'tier', 'by'],
    registers: [this.registry],
  });

  harm(pool: string, tier: 'protected' | 'unprotected', by: 'kubelet-eviction' | 'oom-kill' | 'relief', count = 1): void {
    this.#harm.inc({ pool, tier, by }, count);
  }

  readonly #cpuObserved = new Counter({
    name: 'oversell_harm_cpu_observed_seconds_total',
    help: 'Node-seconds of opted-in nodes whose agents reported pressure, by pool: the denominator of oversell_harm_cpu_over_capacity_seconds_total.',
    labelNames: ['pool'],
    registers: [this.registry],
  });

  readonly #cpuOver = new Counter({
    name: 'oversell_harm_cpu_over_capacity_seconds_total',
    help: 'Node-seconds with CPU demand over the node\'s CPUs (the agent\'s contention line, avg10, at or above 10 %: runnable tasks waiting beyond the CPUs; a pod held at its own limit does not count), by pool. Its share of oversell_harm_cpu_observed_seconds_total is the realised CPU risk the policy\'s cpu.riskBudget.overShare bounds.',
    labelNames: ['pool'],
    registers: [this.registry],
  });

  readonly #pressureFull = new Counter({
    name: 'oversell_harm_pressure_full_seconds_total',
    help: 'Seconds in which all of a node\'s non-idle tasks stalled at once (PSI full, avg10 integrated over the samples), summed over opted-in nodes, by pool and resource (cpu, memory).',
    labelNames: ['pool', 'resource'],
    registers: [this.registry],
  });

  readonly #cpuThrottled = new Counter({
    name: 'oversell_harm_cpu_throttled_seconds_total',
    help: 'CFS throttled time of pods on opted-in nodes, from the agents\' pod reports, by pool and tier. The kernel counts a pod held at its own CPU limit as well: read it beside oversell_harm_cpu_over_capacity_seconds_total, which does not.',
    labelNames: ['pool', 'tier'],
    registers: [this.registry],
  });

  cpuHarm(pool: string, o: { seconds: number; overCapacitySeconds: number; cpuFullSeconds: number; memoryFullSeconds: number }): void {
    this.#cpuObserved.inc({ pool }, o.seconds);
    if (o.overCapacitySeconds > 0) this.#cpuOver.inc({ pool }, o.overCapacitySeconds);
    if (o.cpuFullSeconds > 0) this.#pressureFull.inc({ pool, resource: 'cpu' }, o.cpuFullSeconds);
    if (o.memoryFullSeconds > 0) this.#pressureFull.inc({ pool, resource: 'memory' }, o.memoryFullSeconds);
  }

  cpuThrottled(pool: string, tier: 'protected' | 'unprotected', seconds: number): void {
    this.#cpuThrottled.inc({ pool, tier }, seconds);
  }

  readonly #connectionsRefused = new Counter({
    name: 'oversell_connections_refused_total',
    help: 'Connections closed before they spoke, by listener (grpc, agent, webhook) and reason (connection-limit: the listener was full; handshake-timeout: TLS not finished in time; preface-timeout: no HTTP/2 preface in time).',
    labelNames: ['listener', 'reason'],
    registers: [this.registry],
  });

  connectionRefused(listener: 'grpc' | 'agent' | 'webhook', reason: 'connection-limit' | 'handshake-timeout' | 'preface-timeout'): void {
    this.#connectionsRefused.inc({ listener, reason });
  }

  readonly #streamRefusals = new Counter({
    name: 'oversell_grpc_stream_refusals_total',
    help: 'gRPC streams of services without limits of their own (health Watch, server reflection) refused with RESOURCE_EXHAUSTED, by listener (grpc, agent) and reason (streams-per-connection: the connection holds --grpc-streams-per-connection; streams: the port, or on the agent port the thread, holds --grpc-streams).',
    labelNames: ['listener', 'reason'],
    registers: [this.registry],
  });

  streamRefused(listener: 'grpc' | 'agent', reason: 'streams-per-connection' | 'streams'): void {
    this.#streamRefusals.inc({ listener, reason });
  }

  readonly #streamsEnded = new Counter({
    name: 'oversell_grpc_streams_ended_total',
    help: 'gRPC streams the gateway ended with RESOURCE_EXHAUSTED because their client took no message for --grpc-stream-stall, by listener (grpc, agent) and service (every service but WatchNodes, counted in oversell_query_watches_ended_total).',
    labelNames: ['listener', 'service'],
    registers: [this.registry],
  });

  streamEnded(listener: 'grpc' | 'agent', service: string): void {
    this.#streamsEnded.inc({ listener, service });
  }

  #tokenReviewStats: { sent: number; inFlight: number } | undefined;
  #tokenReviewsCounted = 0;
  readonly #tokenReviewsSent: Counter = new Counter({
    name: 'oversell_token_reviews_sent_total',
    help: 'TokenReviews sent to the API server (agents and query callers together; cached tokens and local refusals send none).',
    registers: [this.registry],
    collect: () => {
      const sent = this.#tokenReviewStats?.sent ?? 0;
      this.#tokenReviewsSent.inc(sent - this.#tokenReviewsCounted);
      this.#tokenReviewsCounted = sent;
    },
  });
  readonly #tokenReviewsInFlight: Gauge = new Gauge({
    name: 'oversell_token_reviews_in_flight',
    help: 'TokenReviews waiting for the API server now.',
    registers: [this.registry],
    collect: (): void => this.#tokenReviewsInFlight.set(this.#tokenReviewStats?.inFlight ?? 0),
  });

  /** The review budget's own counts, read at every scrape. */
  countTokenReviews(stats: { sent: number; inFlight: number }): void {
    this.#tokenReviewStats = stats;
  }

  #poolHarm: PoolHarmLedger | undefined;
  readonly #budgetSpent: Gauge<'pool' | 'resource'> = new Gauge({
    name: 'oversell_harm_budget_spent',
    help: 'Pods of the pool evicted by the kubelet or OOM-killed without a memory limit (a lack of memory on its nodes) in the last hour, by pool and resource (memory). The memory risk budget allows none: above 0, the pool\'s memory grants stay at the floor until an hour passes without one, and the reason says so.',
    labelNames: ['pool', 'resource'],
    registers: [this.registry],
    collect: (): void => {
      this.#budgetSpent.reset();
      const at = this.#now();
      for (const pool of this.#poolHarm?.pools(at) ?? []) this.#budgetSpent.set({ pool, resource: 'memory' }, this.#poolHarm!.of(pool, at).memoryOverloads);
    },
  });

  /** The pools' harm against their budgets, read at every scrape. */
  countPoolHarm(ledger: PoolHarmLedger): void {
    this.#poolHarm = ledger;
  }
}

/** The counter with these series at 0 from the start, so an alert on their rate sees the first increment. */
function startingAtZero<L extends string>(counter: Counter<L>, series: ReadonlyArray<Partial<Record<L, string>>>): Counter<L> {
  for (const labels of series) counter.inc(labels, 0);
  return counter;
}

/**
 * prom-client's process_open_fds lists /proc/self/fd synchronously at each
 * scrape: with 10,000 agent connections that was 31 ms of the main thread per
 * scrape. The same gauge, listed by libuv's threadpool.
 */
function openFdsOffTheLoop(registry: Registry, prefix: string): void {
  const name = `${prefix}process_open_fds`;
  if (!registry.getSingleMetric(name)) return; // not Linux: prom-client registers none
  registry.removeSingleMetric(name);
  new Gauge({
    name,
    help: 'Number of open file descriptors.',
    registers: [registry],
    async collect() {
      try {
        // Less the descriptor the listing itself held open.
        this.set((await readdir('/proc/self/fd')).length - 1);
      } catch {
        // /proc unreadable: the series keeps its last value
      }
    },
  });
}
