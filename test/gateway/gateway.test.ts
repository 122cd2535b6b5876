// The gateway's HTTPS listener (gateway/gateway.ts configures it): what is
// about the transport, not about any plugin behind it. Each plugin has its own
// smoke test over HTTPS in its test file; slow clients are test/faults.test.ts
// and client certificates test/auth.test.ts.
import assert from 'node:assert/strict';
import { Agent } from 'node:https';
import { createServer, type Server } from 'node:net';
import { describe, it } from 'node:test';
import { generateServingCertificate } from '../../gateway/tls/self-signed.js';
import { buildGateway, type GatewayOptions } from '../../gateway/gateway.js';
import { GATEWAY_DEFAULTS } from '../../gateway/config/defaults.js';
import { DEFAULT_POLICY } from '../../gateway/decide/policy.js';
import { flagsPolicySource } from '../../gateway/policies/policy-source.js';
import { noTemplates } from '../../gateway/inject/template-source.js';
import { createLogger } from '../../lib/log.js';
import { postHttps, startTestGateway } from '../helpers/gateway.js';
import { NODE_FIXTURE, kubeletReview } from '../helpers/node-reviews.js';

/** Listening TCP servers of this process: a gateway that closed left none behind. */
const listeners = () => process.getActiveResourcesInfo().filter((r) => r === 'TCPServerWrap').length;

/** The count once it settles at `expected`, or after a second: a closed server's handle goes a moment after its close callback. */
async function listenersSettled(expected: number): Promise<number> {
  for (let i = 0; i < 100 && listeners() !== expected; i++) await new Promise((r) => setTimeout(r, 10));
  return listeners();
}

describe('gateway HTTPS listener', () => {
  it('refuses a body over the limit with 413, and keeps serving', async () => {
    const gw = await startTestGateway({ bodyLimitBytes: 64 * 1024 });
    try {
      const r = kubeletReview();
      (r.request.object.metadata as Record<string, unknown>).padding = 'x'.repeat(100 * 1024);
      const res = await postHttps(gw, '/mutate/nodes', JSON.stringify(r));
      assert.equal(res.status, 413);
      const ok = await postHttps(gw, '/mutate/nodes', NODE_FIXTURE);
      assert.equal(ok.status, 200);
    } finally {
      await gw.close();
    }
  });

  it('a new certificate is served to new connections without a restart; open connections are not dropped', async () => {
    const gw = await startTestGateway();
    const keepAlive = new Agent({ keepAlive: true, maxSockets: 1 });
    const json = { 'content-type': 'application/json' };
    try {
      assert.equal((await postHttps(gw, '/mutate/nodes', NODE_FIXTURE, json, keepAlive)).status, 200);
      const next = await generateServingCertificate(['localhost', '127.0.0.1']);
      gw.setTls(next);
      // New handshakes get the new certificate: trusted with the new CA, refused with the old one.
      assert.equal((await postHttps({ ...gw, ca: next.ca }, '/mutate/nodes', NODE_FIXTURE, json, false)).status, 200);
      await assert.rejects(postHttps(gw, '/mutate/nodes', NODE_FIXTURE, json, false), /certificate|self.signed|unable to verify/i);
      // The connection opened before the swap keeps working.
      assert.equal((await postHttps(gw, '/mutate/nodes', NODE_FIXTURE, json, keepAlive)).status, 200);
    } finally {
      keepAlive.destroy();
      await gw.close();
    }
  });

  it('builds without listening, starts on the ports asked for, and closes everything it opened, its sources last', async () => {
    const cert = await generateServingCertificate(['localhost', '127.0.0.1']);
    const stopped: string[] = [];
    const options = (): GatewayOptions => ({
      ...GATEWAY_DEFAULTS,
      bindAddress: '127.0.0.1', webhookPort: 0, grpcPort: 0, agentPort: 0, metricsPort: 0, tls: cert,
      policies: { ...flagsPolicySource(DEFAULT_POLICY), stop: async () => void stopped.push('policies') },
      sidecars: { source: { ...noTemplates(), stop: async () => void stopped.push('templates') }, excludedNamespaces: [] },
      log: createLogger('test-gateway', process.env.TEST_LOG_LEVEL ?? 'silent'),
    });
    const before = listeners();
    // Another process holds the webhook port: building does not notice (it binds nothing), starting does.
    const holder: Server = createServer();
    await new Promise<void>((resolve) => holder.listen(0, '127.0.0.1', resolve));
    try {
      const taken = (holder.address() as { port: number }).port;
      const blocked = await buildGateway({ ...options(), webhookPort: taken });
      assert.equal(listeners(), before + 1, 'building opened no port');
      // The gRPC port was opened before the webhook's failed: it is closed again, and the sources stopped.
      await assert.rejects(blocked.start(), /already in use.*--webhook-port/);
      assert.equal(await listenersSettled(before + 1), before + 1, 'a failed start left nothing listening');
      assert.deepEqual(stopped, ['templates', 'policies']);
    } finally {
      await new Promise((resolve) => holder.close(resolve));
    }

    stopped.length = 0;
    const built = await buildGateway(options());
    const gw = await built.start();
    try {
      assert.ok(gw.ports.webhook > 0 && gw.ports.grpc > 0 && gw.ports.metrics > 0 && gw.ports.agent > 0);
      assert.equal((await postHttps({ ...gw, ca: cert.ca }, '/mutate/nodes', NODE_FIXTURE)).status, 200);
      assert.deepEqual(stopped, []);
    } finally {
      await gw.close();
    }
    assert.equal(await listenersSettled(before), before, 'every listener of the gateway is closed');
    assert.deepEqual(stopped, ['templates', 'policies']);
    // Closing again does nothing more.
    await built.close();
    assert.deepEqual(stopped, ['templates', 'policies']);
  });
});
