// Plain-HTTP port for the kubelet's probes and Prometheus.
import { Readable } from 'node:stream';
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
    // Streamed: at 10,000 nodes the text is 6 MB, written a slice per event-loop turn.
    return reply.type(options.metrics.registry.contentType).send(Readable.from(options.metrics.expositionChunks()));
  });
}
