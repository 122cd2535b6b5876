// The webhook's HTTPS port as a part of the gateway (lib/lifecycle.ts): node
// status, binding and pod reviews, and sharded, the other replicas' calls.
import type { Server as TlsServer } from 'node:tls';
import Fastify from 'fastify';
import { webhookPlugin } from '../admit/webhook-plugin.js';
import { LargeBodyBudget, limitLargeBodies } from '../admit/large-body-budget.js';
import { podWebhookPlugin } from '../admit/pod-webhook-plugin.js';
import { bindingWebhookPlugin } from '../admit/binding-webhook-plugin.js';
import { bindingDeps } from '../admit/binding-sources.js';
import type { TemplateSource } from '../inject/template-source.js';
import type { NodeObservation } from '../decide/policy.js';
import type { PodDirectory } from '../store/pod-directory.js';
import { peerPlugin } from '../shard/peer-plugin.js';
import { MetricsReader } from '../metrics-api/metrics-reader.js';
import { type Shared, listen, metricsCpuPlanOf, staleAfterMsOf } from './shared.js';
import type { ClusterSources } from './cluster.js';

/** The webhook's HTTPS port: node status reviews and sidecar injection. */
export async function webhookPart(s: Shared, templates: TemplateSource, directory: PodDirectory | undefined, sources: ClusterSources | undefined) {
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
      usage: (name) => reviewUsage(s, name),
      policyFor: (labels) => options.policies.select(labels),
      proof: s.proof,
      boundRequests: s.boundRequests,
    },
    // One source of node inputs: with a cluster the node watch reads them from
    // the stored objects; without one the kubelet-shaped reviews are all there is.
    ...(!options.cluster && { observe: (name: string, observed: NodeObservation) => store.observe(name, observed, now()) }),
    // Without the API server's client certificate any caller may post reviews: with a cluster, node gauges follow what it stored.
    perNodeMetrics: !s.nodeGaugesFromWatch,
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
    const { view, inputs } = s.shard;
    const cpuPlan = metricsCpuPlanOf(options);
    await webhook.register(peerPlugin, {
      local: s.local, certificate: s.shard.certificate,
      inputs: { keep: (nodes) => inputs.put(nodes, now()), refused: s.shard.onInputsRefused },
      watch: { streams: (node, standingInFor) => (standingInFor ? view.standsIn(node, standingInFor) : view.streams(node)), onMembersChange: (listener) => view.onChange(listener), stallMs: s.queryLimits.watchStallMs },
      ...(directory && { metrics: { reader: new MetricsReader({ store, directory, staleAfterMs: staleAfterMsOf(options.policies), ...(cpuPlan && { cpuPlan }) }), now } }),
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

/**
 * What a node's review decides from: this replica's own data while the node's
 * agent streams here; sharded, otherwise the newer of its own and what the
 * replica the agent streams to last reported (shard/node-inputs-sender.ts).
 */
function reviewUsage(s: Shared, name: string) {
  const t = s.now();
  const own = s.store.usage(name, t);
  if (!s.shard || s.store.get(name)?.streamId !== undefined) return own;
  const reported = s.shard.inputs.usage(name, t);
  return own && (!reported || own.ageMs <= reported.ageMs) ? own : reported;
}
