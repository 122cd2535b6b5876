// Plain-HTTP port for the kubelet's probes and Prometheus.
import type { FastifyInstance, FastifyPluginOptions } from 'fastify';
import type { GatewayMetrics } from '../metrics/metrics.js';

export interface ProbesPluginOptions extends FastifyPluginOptions {
  metrics: GatewayMetrics;
  /** Undefined when ready; otherwise what is still missing. */
  notReady: () => string | undefined;
}

export async function probesPlugin(app: FastifyInstance, options: ProbesPluginOptions): Promise<void> {
  app.get('/healthz', async () => 'ok');
  app.get('/readyz', async (_request, reply) => {
    const missing = options.notReady();
    if (missing) return reply.code(503).send(`not ready: ${missing}`);
    return 'ok';
  });
  app.get('/metrics', async (_request, reply) => {
    reply.type(options.metrics.registry.contentType);
    return options.metrics.registry.metrics();
  });
}
