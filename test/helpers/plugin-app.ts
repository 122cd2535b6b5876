// A gateway fastify plugin on its own, answered with fastify's inject(): the
// plugin's parsing, error handling, metrics and logging without a socket or
// TLS. The HTTPS listeners are test/gateway/gateway.test.ts and the one smoke
// test per plugin.
import Fastify, { type FastifyInstance, type FastifyPluginAsync, type LightMyRequestResponse } from 'fastify';
import { createLogger, type Logger } from '../../lib/log.js';
import { GatewayMetrics } from '../../gateway/metrics/metrics.js';
import type { NodeStore } from '../../gateway/store/node-store.js';

export const silentLog: Logger = createLogger('test-plugin', process.env.TEST_LOG_LEVEL ?? 'silent');

export interface PluginApp {
  app: FastifyInstance;
  metrics: GatewayMetrics;
  post(path: string, body: string | Buffer, headers?: Record<string, string>): Promise<LightMyRequestResponse>;
  /** The value of one series in the registry's text exposition (a line `name{labels} value`); 0 when absent. */
  series(line: string): Promise<number>;
  close(): Promise<void>;
}

/** `plugin` registered as gateway.ts registers it, with a fresh GatewayMetrics over `store`. */
export async function pluginApp<O extends { metrics: GatewayMetrics; log: Logger }>(
  plugin: (app: FastifyInstance, options: O) => Promise<void>,
  store: NodeStore,
  options: Omit<O, 'metrics' | 'log'>,
): Promise<PluginApp> {
  const metrics = new GatewayMetrics(store);
  const app = Fastify({ logger: false });
  await app.register(plugin as FastifyPluginAsync<O>, { ...options, metrics, log: silentLog } as O);
  await app.ready();
  return {
    app,
    metrics,
    post: (path, body, headers = { 'content-type': 'application/json' }) => app.inject({ method: 'POST', url: path, payload: body, headers }),
    async series(line) {
      const text = await metrics.exposition();
      const found = text.split('\n').find((l) => l.startsWith(`${line} `));
      return found ? Number(found.slice(line.length + 1)) : 0;
    },
    close: () => app.close(),
  };
}
