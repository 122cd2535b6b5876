// The gateway's HTTPS listener (gateway/gateway.ts configures it): what is
// about the transport, not about any plugin behind it. Each plugin has its own
// smoke test over HTTPS in its test file; slow clients are test/faults.test.ts
// and client certificates test/auth.test.ts.
import assert from 'node:assert/strict';
import { Agent } from 'node:https';
import { describe, it } from 'node:test';
import { generateServingCertificate } from '../../gateway/tls/self-signed.js';
import { postHttps, startTestGateway } from '../helpers/gateway.js';
import { NODE_FIXTURE, kubeletReview } from '../helpers/node-reviews.js';

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
});
