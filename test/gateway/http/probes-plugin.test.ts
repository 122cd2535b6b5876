// GET /healthz, /readyz and /metrics (gateway/http/probes-plugin.ts) through
// fastify's inject(), and one smoke test on the gateway's own plain-HTTP port.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import Fastify, { type FastifyInstance } from 'fastify';
import { GATEWAY_DEFAULTS } from '../../../gateway/config/defaults.js';
import { probesPlugin } from '../../../gateway/http/probes-plugin.js';
import { GatewayMetrics } from '../../../gateway/metrics/metrics.js';
import { NodeStore } from '../../../gateway/store/node-store.js';
import { getHttp, startTestGateway } from '../../helpers/gateway.js';

describe('probes plugin', () => {
  let missing: string | undefined;
  let app: FastifyInstance;
  const metrics = new GatewayMetrics(new NodeStore({ retainMs: 60_000, forgetAfterMs: GATEWAY_DEFAULTS.forgetAfterMs }));
  before(async () => {
    app = Fastify({ logger: false });
    await app.register(probesPlugin, { metrics, notReady: () => missing });
    await app.ready();
  });
  after(() => app.close());

  const rows: Array<[string, string, string | undefined, number, RegExp]> = [
    ['/healthz', 'ready', undefined, 200, /^ok$/],
    ['/healthz', 'not ready (liveness does not depend on readiness)', 'listeners starting', 200, /^ok$/],
    ['/readyz', 'ready', undefined, 200, /^ok$/],
    ['/readyz', 'not ready: 503 with what is missing', 'warming up: collecting agent data for 5s more', 503, /^not ready: warming up: collecting agent data for 5s more$/],
    ['/metrics', 'ready', undefined, 200, /^# HELP oversell_/m],
  ];
  for (const [path, when, notReady, status, body] of rows) {
    it(`GET ${path} when ${when}: ${status}`, async () => {
      missing = notReady;
      const res = await app.inject({ method: 'GET', url: path });
      assert.equal(res.statusCode, status);
      assert.match(res.body, body);
    });
  }

  it('/metrics is the registry\'s text exposition, with its content type', async () => {
    missing = undefined;
    const res = await app.inject({ method: 'GET', url: '/metrics' });
    assert.equal(res.headers['content-type'], metrics.registry.contentType);
    assert.match(res.body, /^# TYPE oversell_webhook_request_duration_seconds histogram$/m);
  });
});

describe('probes plugin on the gateway\'s port (smoke)', () => {
  it('a running gateway is healthy, ready and scraped', async () => {
    const gw = await startTestGateway();
    try {
      assert.equal((await getHttp(gw.ports.metrics, '/healthz')).status, 200);
      assert.equal((await getHttp(gw.ports.metrics, '/readyz')).status, 200);
      const scrape = await getHttp(gw.ports.metrics, '/metrics');
      assert.equal(scrape.status, 200);
      assert.match(scrape.body, /^oversell_gateway_process_cpu_seconds_total /m);
    } finally {
      await gw.close();
    }
  });
});
