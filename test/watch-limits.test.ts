// WatchNodes cannot outlive its caller's token or access, and a client that
// stops reading cannot grow the gateway: real gRPC clients against a real
// gateway, the API server's answers played by tables as in test/auth.test.ts.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import * as grpc from '@grpc/grpc-js';
import { AuthError, jwtExpiry, type Identity } from '../gateway/auth/identity.js';
import { queryAuthorizer } from '../gateway/auth/query-authorizer.js';
import type { TokenReviewer } from '../gateway/auth/token-review.js';
import type { NodeEvent__Output } from '../proto/gen/oversell/v1/NodeEvent.js';
import { startTestGateway, type TestGateway } from './helpers/gateway.js';
import { bearer, heapUsedAfterGc, plainSample, queryClient } from './helpers/grpc.js';
import { scrapeMetric } from './helpers/metrics.js';
import { waitUntil } from '../scripts/harness/wait.js';
import { storeSample } from './helpers/store-sample.js';

const jwt = (sub: string, expSeconds: number) =>
  `${Buffer.from('{"alg":"RS256"}').toString('base64url')}.${Buffer.from(JSON.stringify({ sub, exp: expSeconds })).toString('base64url')}.sig`;

/** A watch whose end (status) is kept; events counted. */
function watch(gw: TestGateway, token?: string) {
  const client = queryClient(gw.ports.grpc);
  const call = client.WatchNodes({ labelSelector: '', policy: '' }, bearer(token));
  const state: { events: number; synced: boolean; lastSeq?: number; error?: grpc.ServiceError; endedAtMs?: number } = { events: 0, synced: false };
  call.on('data', (e: NodeEvent__Output) => {
    state.events += 1;
    if (e.node?.latest) state.lastSeq = Number(e.node.latest.seq);
    if (e.type === 'SYNCED') state.synced = true;
  });
  call.on('error', (e: grpc.ServiceError) => {
    state.error = e;
    state.endedAtMs = Date.now();
  });
  return { call, state, close: () => { call.cancel(); client.close(); } };
}

describe('a watcher that stops reading', () => {
  let gw: TestGateway;
  before(async () => {
    gw = await startTestGateway({ queryLimits: { watchStallMs: 300 } });
    gw.store.attach('n1', 'i', null, 1);
    storeSample(gw.store, 'n1', 1, plainSample(1), Date.now());
  });
  after(() => gw?.close());

  it('holds no more for 20,000 changes than for one (changes to a node wait as its name), and is ended with RESOURCE_EXHAUSTED once it has read nothing for the stall limit, counted', async () => {
    const listeners = gw.store.listenerCount('updated');
    const w = watch(gw);
    try {
      await waitUntil('synced', () => (w.state.synced ? true : undefined), 5000);
      w.call.pause(); // the client stops reading; grpc-js stops taking data off the connection
      const before = heapUsedAfterGc();
      // In bursts, so the gateway writes between them: more than the connection's flow-control window takes.
      for (let seq = 2; seq < 20_002; seq++) {
        storeSample(gw.store, 'n1', 1, plainSample(seq), Date.now());
        if (seq % 100 === 0) await new Promise((r) => setTimeout(r, 2));
      }
      await waitUntil('the watch is ended', async () => ((await scrapeMetric(gw.ports.metrics, 'oversell_query_watches_ended_total', '{reason="slow-reader"}')) === 1 ? true : undefined), 5000);
      const grown = heapUsedAfterGc() - before;
      console.log(`heap growth with a paused watcher over 20,000 changes: ${(grown / 2 ** 20).toFixed(1)} MiB`);
      // The store's own window of 20,000 samples is most of it; every change queued for the client would be 12 MB more.
      assert.ok(grown < 12 * 2 ** 20, `heap grew ${grown} bytes`);
      assert.equal(gw.store.listenerCount('updated'), listeners, 'the watch no longer listens to the store');
      // The client reads again: what was sent, then the status.
      w.call.resume();
      await waitUntil('the status arrives', () => w.state.error, 5000);
      assert.equal(w.state.error?.code, grpc.status.RESOURCE_EXHAUSTED);
      assert.match(w.state.error?.details ?? '', /^watch ended: the client read nothing for 0\.3s with \d+ nodes waiting to be sent; read the stream continuously/);
      assert.ok(w.state.events < 2 + 1000, `${w.state.events} events delivered`);
    } finally {
      w.close();
    }
  });

  it('a watcher that keeps reading is not ended, and sees the node as it is last', async () => {
    const w = watch(gw);
    try {
      await waitUntil('synced', () => (w.state.synced ? true : undefined), 5000);
      // 2,000 changes a second for one node (an agent sends 10 at most).
      for (let seq = 30_000; seq < 35_000; seq++) {
        storeSample(gw.store, 'n1', 1, plainSample(seq), Date.now());
        if (seq % 100 === 0) await new Promise((r) => setTimeout(r, 50));
      }
      await waitUntil('the last change delivered', () => (w.state.lastSeq === 34_999 ? true : undefined), 10_000);
      await new Promise((r) => setTimeout(r, 600)); // idle for longer than the stall limit: nothing to send, not slow
      assert.equal(w.state.error, undefined);
    } finally {
      w.close();
    }
  });
});

describe('a watch and its caller\'s token and access', () => {
  let gw: TestGateway;
  const tokens = new Map<string, Identity>();
  const allowed = new Set<string>();
  let apiServerDown = false;
  const metric = (name: string, labels: string) => scrapeMetric(gw.ports.metrics, name, labels);

  before(async () => {
    const reviewer: TokenReviewer = {
      review: async (token) => tokens.get(token) ?? (() => { throw new AuthError('unauthenticated', 'token not accepted'); })(),
    };
    gw = await startTestGateway({
      auth: {
        query: queryAuthorizer(reviewer, async (identity, verb) => {
          if (apiServerDown) throw new AuthError('unavailable', 'API server unreachable');
          return { allowed: allowed.has(`${identity.username}:${verb}`), reason: 'no RBAC rule' };
        }, { cacheMs: 50, recheckMs: 200 }),
      },
    });
    gw.store.attach('n1', 'i', null, 1);
    storeSample(gw.store, 'n1', 1, plainSample(1), Date.now());
  });
  after(() => gw?.close());

  it('ends with UNAUTHENTICATED when the caller\'s token expires, counted', async () => {
    const soon = jwt('bob', Math.ceil(Date.now() / 1000) + 2);
    tokens.set(soon, { username: 'bob', uid: 'b', groups: [], extra: {}, expiresAtMs: jwtExpiry(soon) });
    allowed.add('bob:watch');
    const w = watch(gw, soon);
    try {
      await waitUntil('synced', () => (w.state.synced ? true : undefined), 5000);
      await waitUntil('the watch ends', () => w.state.error, 5000);
      assert.equal(w.state.error?.code, grpc.status.UNAUTHENTICATED);
      assert.equal(w.state.error?.details, 'token expired; reconnect with a fresh token');
      const late = (w.state.endedAtMs ?? 0) - (jwtExpiry(soon) ?? 0);
      assert.ok(late >= -50 && late < 1000, `ended ${late} ms after exp`);
      assert.equal(await metric('oversell_auth_refusals_total', '{api="query",reason="expired"}'), 1);
      assert.equal(await metric('oversell_query_watches_ended_total', '{reason="token-expired"}'), 1);
    } finally {
      w.close();
    }
  });

  it('ends with PERMISSION_DENIED once access is revoked; an unreachable API server at a re-check does not end it', async () => {
    tokens.set('carol-token', { username: 'carol', uid: 'c', groups: [], extra: {}, expiresAtMs: undefined });
    allowed.add('carol:watch');
    const w = watch(gw, 'carol-token');
    try {
      await waitUntil('synced', () => (w.state.synced ? true : undefined), 5000);
      apiServerDown = true;
      await new Promise((r) => setTimeout(r, 600)); // several re-checks fail to reach the API server
      assert.equal(w.state.error, undefined, 'still watching');
      apiServerDown = false;
      allowed.delete('carol:watch');
      const revokedAt = Date.now();
      const ended = await waitUntil('the watch ends', () => w.state.error, 5000);
      assert.equal(ended.code, grpc.status.PERMISSION_DENIED);
      assert.match(ended.details, /^watch ended: carol may not watch nodeusages\.oversell\.io/);
      assert.ok((w.state.endedAtMs ?? 0) - revokedAt < 1000);
      assert.equal(await metric('oversell_query_watches_ended_total', '{reason="revoked"}'), 1);
    } finally {
      w.close();
    }
  });
});
