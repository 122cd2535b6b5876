// metrics.k8s.io as parts of the gateway (lib/lifecycle.ts).
import type { KubeConfig } from '@kubernetes/client-node';
import type { Part } from '../../lib/lifecycle.js';
import type { PodDirectory } from '../store/pod-directory.js';
import { watchFrontProxyTrust, type FrontProxyTrust } from '../metrics-api/front-proxy.js';
import { cachedAccessReview, kubernetesAccessReview } from '../metrics-api/access-review.js';
import { buildMetricsApiServer } from '../metrics-api/metrics-api-server.js';
import type { MetricsQuery } from '../metrics-api/metrics-reader.js';
import type { GatewayOptions } from './gateway-options.js';
import { type Shared, metricsCpuPlanOf, staleAfterMsOf } from './shared.js';

/**
 * metrics.k8s.io: the front-proxy CA watched, then the port (a caller that
 * arrives before the CA is read gets 401, before the bound pods watch has
 * named the pods in `directory` a 503).
 */
export async function metricsApiParts(s: Shared, kubeConfig: KubeConfig, o: NonNullable<NonNullable<GatewayOptions['cluster']>['metricsApi']>, directory: PodDirectory) {
  const { store, log, now, options } = s;
  let trust: FrontProxyTrust | undefined;
  const cpuPlan = metricsCpuPlanOf(options);
  const server = await buildMetricsApiServer({
    bindAddress: options.bindAddress,
    port: o.port,
    tls: options.tls,
    handshakeTimeoutMs: s.connections.handshakeTimeoutMs,
    routes: {
      store,
      directory,
      staleAfterMs: staleAfterMsOf(options.policies),
      ...(cpuPlan && { cpuPlan }),
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
