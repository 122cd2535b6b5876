// /metrics, /healthz and /readyz as a part of the gateway (lib/lifecycle.ts).
import Fastify from 'fastify';
import { probesPlugin } from '../http/probes-plugin.js';
import { type Shared, listen } from './shared.js';

/** /metrics, /healthz and /readyz on their own port. */
export async function probesPart(s: Shared, warmingUp: () => string | undefined) {
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
