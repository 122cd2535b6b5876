// The gateway's API calls (TokenReview, SubjectAccessReview, ...) reuse kept-alive
// TLS connections: a real HTTPS server standing in for the API server counts
// the TLS sessions 20 TokenReviews open, with the plain KubeConfig and with
// the pooled one, and what each request carried.
import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:https';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { AuthenticationV1Api, KubeConfig } from '@kubernetes/client-node';
import { PooledKubeConfig } from '../lib/pooled-kube-config.js';
import { generateCa, issueServingCertificate } from '../gateway/tls/self-signed.js';

describe('PooledKubeConfig: API calls share kept-alive connections', () => {
  let server: Server;
  let ca: string;
  let sessions = 0;
  const authorizations: string[] = [];
  before(async () => {
    const authority = await generateCa();
    ca = authority.cert;
    const serving = await issueServingCertificate(authority, ['127.0.0.1', 'localhost']);
    server = createServer({ cert: serving.cert, key: serving.key, keepAliveTimeout: 30_000 }, (req, res) => {
      authorizations.push(req.headers.authorization ?? '');
      req.resume().on('end', () => {
        res.setHeader('content-type', 'application/json');
        res.end(JSON.stringify({ apiVersion: 'authentication.k8s.io/v1', kind: 'TokenReview', status: { authenticated: true, user: { username: 'system:serviceaccount:oversell:oversell-agent' } } }));
      });
    });
    server.on('secureConnection', () => (sessions += 1));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  });
  after(() => new Promise<void>((resolve) => server.close(() => resolve())));

  const load = <K extends KubeConfig>(kc: K): K => {
    kc.loadFromOptions({
      clusters: [{ name: 'c', server: `https://127.0.0.1:${(server.address() as AddressInfo).port}`, caData: Buffer.from(ca).toString('base64') }],
      users: [{ name: 'u', token: 'gateway-token' }],
      contexts: [{ name: 'x', cluster: 'c', user: 'u' }],
      currentContext: 'x',
    });
    return kc;
  };
  async function reviews(kc: KubeConfig, n: number): Promise<number> {
    const api = kc.makeApiClient(AuthenticationV1Api);
    const before = sessions;
    for (let i = 0; i < n; i++) {
      const r = await api.createTokenReview({ body: { spec: { token: `agent-${i}` } } });
      assert.equal(r.status?.authenticated, true);
    }
    return sessions - before;
  }

  it('20 TokenReviews open one TLS session with the pooled config, 20 with the plain one, and each still carries the credentials', async () => {
    authorizations.length = 0;
    const pooledKc = load(new PooledKubeConfig());
    assert.equal(await reviews(pooledKc, 20), 1);
    assert.deepEqual(new Set(authorizations), new Set(['Bearer gateway-token']));
    assert.equal(authorizations.length, 20);
    pooledKc.closeConnections();
    // What client-node does on its own, for the comparison this change is about.
    assert.equal(await reviews(load(new KubeConfig()), 20), 20);
  });

  it('calls in flight at once are spread over at most maxSockets connections', async () => {
    const kc = load(new PooledKubeConfig(4));
    const api = kc.makeApiClient(AuthenticationV1Api);
    const before = sessions;
    await Promise.all(Array.from({ length: 40 }, (_, i) => api.createTokenReview({ body: { spec: { token: `agent-${i}` } } })));
    const opened = sessions - before;
    assert.ok(opened >= 1 && opened <= 4, `opened ${opened} sessions for 40 concurrent calls`);
    kc.closeConnections();
  });
});
