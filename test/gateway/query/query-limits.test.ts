// What a query caller can hold on a replica, over real gRPC against a real
// gateway: watches per caller and per replica, watches that never read, and
// lists whose answers are never read. Refusals are RESOURCE_EXHAUSTED with a
// message saying which limit, and counted.
import assert from 'node:assert/strict';
import * as http2 from 'node:http2';
import { after, before, describe, it } from 'node:test';
import * as grpc from '@grpc/grpc-js';
import { AuthError, type Identity } from '../../../gateway/auth/identity.js';
import { queryAuthorizer } from '../../../gateway/auth/query-authorizer.js';
import type { TokenReviewer } from '../../../gateway/auth/token-review.js';
import type { NodeEvent__Output } from '../../../proto/gen/oversell/v1/NodeEvent.js';
import type { NodeUsageClient } from '../../../proto/gen/oversell/v1/NodeUsage.js';
import { startTestGateway, type TestGateway } from '../../helpers/gateway.js';
import { bearer, heapUsedAfterGc, plainSample, queryClient } from '../../helpers/grpc.js';
import { oversellV1 } from '../../../proto/load.js';
import { scrapeMetric } from '../../helpers/metrics.js';
import { waitUntil } from '../../../scripts/harness/wait.js';
import { storeSample } from '../../helpers/store-sample.js';

const fill = (gw: TestGateway, nodes: number) => {
  for (let i = 0; i < nodes; i++) {
    const name = `node-${String(i).padStart(5, '0')}`;
    gw.store.attach(name, 'i', null, i + 1);
    storeSample(gw.store, name, i + 1, plainSample(1), Date.now());
  }
};

/** A watch, on the client given or a new one; its status kept. */
function watch(port: number, token?: string, client: NodeUsageClient = queryClient(port)) {
  const call = client.WatchNodes({ labelSelector: '', policy: '' }, bearer(token));
  const state: { events: number; synced: boolean; error?: grpc.ServiceError } = { events: 0, synced: false };
  call.on('data', (e: NodeEvent__Output) => {
    state.events += 1;
    if (e.type === 'SYNCED') state.synced = true;
  });
  call.on('error', (e: grpc.ServiceError) => (state.error = e));
  const ended = () => waitUntil('the watch ends', () => state.error, 5000);
  const synced = () => waitUntil('synced', () => (state.synced ? true : state.error ? assert.fail(`refused: ${state.error.details}`) : undefined), 5000);
  return { call, state, ended, synced, close: () => { call.cancel(); client.close(); } };
}

describe('watches per caller and per replica', () => {
  let gw: TestGateway;
  const tokens = new Map<string, Identity>([
    ['alice-token', { username: 'alice', uid: 'a', groups: [], extra: {}, expiresAtMs: undefined }],
    ['bob-token', { username: 'bob', uid: 'b', groups: [], extra: {}, expiresAtMs: undefined }],
  ]);
  const metric = (labels: string) => scrapeMetric(gw.ports.metrics, 'oversell_query_refusals_total', labels);
  before(async () => {
    const reviewer: TokenReviewer = {
      review: async (token) => tokens.get(token) ?? (() => { throw new AuthError('unauthenticated', 'token not accepted'); })(),
    };
    gw = await startTestGateway({
      auth: { query: queryAuthorizer(reviewer, async () => ({ allowed: true, reason: '' })) },
      queryLimits: { watchesPerCaller: 2, watches: 3 },
    });
    fill(gw, 3);
  });
  after(() => gw?.close());

  it('one identity gets 2 watches; the 3rd is RESOURCE_EXHAUSTED and counted; another identity still watches; a closed watch frees its slot', async () => {
    const a1 = watch(gw.ports.grpc, 'alice-token');
    const a2 = watch(gw.ports.grpc, 'alice-token');
    const a3 = watch(gw.ports.grpc, 'alice-token');
    const b1 = watch(gw.ports.grpc, 'bob-token');
    try {
      await a1.synced();
      await a2.synced();
      const refused = await a3.ended();
      assert.equal(refused.code, grpc.status.RESOURCE_EXHAUSTED);
      assert.match(refused.details, /^too many watches: alice already has 2 open on this replica \(limit 2, --query-watches-per-caller\); close watches/);
      assert.equal(await metric('{reason="watches-per-caller"}'), 1);
      await b1.synced();
      a1.close();
      // The gateway frees the slot once it sees the cancel.
      const again = await waitUntil('alice watches again', async () => {
        const w = watch(gw.ports.grpc, 'alice-token');
        const synced = await w.synced().then(() => true, () => false);
        if (synced) return w;
        w.close();
        return undefined;
      }, 5000);
      try {
        // a2, b1 and `again` hold the replica's 3 slots: bob's 2nd watch is refused by the replica's limit.
        const full = watch(gw.ports.grpc, 'bob-token');
        const e = await full.ended();
        full.close();
        assert.equal(e.code, grpc.status.RESOURCE_EXHAUSTED);
        assert.match(e.details, /^too many watches: this replica already serves 3 \(limit 3, --query-watches\)/);
        assert.equal(await metric('{reason="watches"}'), 1);
      } finally {
        again.close();
      }
    } finally {
      for (const w of [a1, a2, a3, b1]) w.close();
    }
  });
});

describe('watches in local mode (no identity): counted per connection', () => {
  let gw: TestGateway;
  before(async () => {
    gw = await startTestGateway({ queryLimits: { watchesPerCaller: 2 } });
    fill(gw, 2);
  });
  after(() => gw?.close());

  it('a 3rd watch on one connection is refused; a watch on another connection is not', async () => {
    const client = queryClient(gw.ports.grpc);
    const ws = [watch(gw.ports.grpc, undefined, client)];
    // Clients of one target share a connection unless told otherwise.
    const other = watch(gw.ports.grpc, undefined, new (oversellV1().NodeUsage)(`127.0.0.1:${gw.ports.grpc}`, grpc.credentials.createInsecure(), { 'grpc.use_local_subchannel_pool': 1 }));
    try {
      await ws[0]!.synced();
      ws.push(watch(gw.ports.grpc, undefined, client));
      await ws[1]!.synced();
      ws.push(watch(gw.ports.grpc, undefined, client));
      const e = await ws[2]!.ended();
      assert.equal(e.code, grpc.status.RESOURCE_EXHAUSTED);
      assert.match(e.details, /^too many watches: connection 127\.0\.0\.1:\d+ already has 2 open/);
      await other.synced();
      assert.equal(await scrapeMetric(gw.ports.metrics, 'oversell_query_refusals_total', '{reason="watches-per-caller"}'), 1);
    } finally {
      for (const w of ws) w.call.cancel();
      client.close();
      other.close();
    }
  });
});

describe('watches that never read, over a 10,000-node store', () => {
  let gw: TestGateway;
  before(async () => {
    gw = await startTestGateway({ queryLimits: { watchStallMs: 300, watchesPerCaller: 100 } });
    fill(gw, 10_000);
  });
  after(() => gw?.close());

  it('40 paused watches hold a bounded heap (the snapshot is not buffered for them), and each is ended as a slow reader, counted', async () => {
    const listeners = gw.store.listenerCount('updated');
    const before = heapUsedAfterGc();
    // Paused before the first event: the clients take nothing off their connections.
    const ws = Array.from({ length: 40 }, () => {
      const w = watch(gw.ports.grpc);
      w.call.pause();
      return w;
    });
    try {
      await new Promise((r) => setTimeout(r, 150)); // every watch has started and filled what its connection takes
      const grown = heapUsedAfterGc() - before;
      console.log(`heap growth with 40 paused watches over 10,000 nodes: ${(grown / 2 ** 20).toFixed(1)} MiB`);
      // Unbounded, each watch would hold its 10,000-event snapshot: about 40 MiB per watch.
      assert.ok(grown < 48 * 2 ** 20, `heap grew ${(grown / 2 ** 20).toFixed(1)} MiB`);
      await waitUntil('every paused watch is ended', async () => {
        const ended = await scrapeMetric(gw.ports.metrics, 'oversell_query_watches_ended_total', '{reason="slow-reader"}');
        return ended === 40 ? true : undefined;
      }, 5000);
      assert.equal(gw.store.listenerCount('updated'), listeners, 'no ended watch listens to the store');
      const w = ws[0]!;
      w.call.resume();
      const e = await w.ended();
      assert.equal(e.code, grpc.status.RESOURCE_EXHAUSTED);
      assert.match(e.details, /^watch ended: the client read nothing for 0\.3s with \d+ nodes waiting to be sent; read the stream continuously/);
    } finally {
      for (const w of ws) w.close();
    }
  });

  it('a watch that reads gets the whole snapshot, then every change, and is not ended', async () => {
    const w = watch(gw.ports.grpc);
    try {
      await w.synced();
      assert.equal(w.state.events, 10_001);
      for (let seq = 2; seq < 12; seq++) {
        storeSample(gw.store, 'node-00000', 1, plainSample(seq), Date.now());
        await new Promise((r) => setTimeout(r, 50));
      }
      await waitUntil('every change delivered', () => (w.state.events === 10_011 ? true : undefined), 5000);
      await new Promise((r) => setTimeout(r, 500)); // longer than the stall limit, idle: not a slow reader
      assert.equal(w.state.error, undefined);
    } finally {
      w.close();
    }
  });
});

/** ListNodes over raw HTTP/2, never reading the answer: the gateway can send only the first 64 KiB of it. */
function unreadList(port: number) {
  const session = http2.connect(`http://127.0.0.1:${port}`);
  session.on('error', () => {});
  const stream = session.request({ ':method': 'POST', ':path': '/oversell.v1.NodeUsage/ListNodes', 'content-type': 'application/grpc', te: 'trailers' });
  stream.on('error', () => {});
  stream.pause();
  stream.end(Buffer.alloc(5)); // one empty message: no selector, no policy
  return () => session.destroy();
}

const list = (client: NodeUsageClient) =>
  new Promise<grpc.ServiceError | number>((resolve) => client.ListNodes({}, (err, res) => resolve(err ?? res?.nodes.length ?? 0)));

describe('lists in flight', () => {
  let gw: TestGateway;
  before(async () => {
    gw = await startTestGateway({ queryLimits: { listsInFlight: 2 } });
    fill(gw, 10_000);
  });
  after(() => gw?.close());

  it('answers nobody reads hold their slots: the 3rd list is RESOURCE_EXHAUSTED and counted; closing one frees its slot', async () => {
    const client = queryClient(gw.ports.grpc);
    const unread = [unreadList(gw.ports.grpc), unreadList(gw.ports.grpc)];
    try {
      await new Promise((r) => setTimeout(r, 500)); // both lists computed and stuck behind flow control
      const refused = await list(client);
      assert.ok(typeof refused !== 'number', 'refused');
      assert.equal(refused.code, grpc.status.RESOURCE_EXHAUSTED);
      assert.match(refused.details, /^too many lists: this replica is already answering 2 \(limit 2, --query-lists-in-flight\)/);
      assert.equal(await scrapeMetric(gw.ports.metrics, 'oversell_query_refusals_total', '{reason="lists-in-flight"}'), 1);
      unread.pop()?.();
      const answered = await waitUntil('a list is answered again', async () => {
        const r = await list(client);
        return typeof r === 'number' ? r : undefined;
      }, 5000);
      assert.equal(answered, 10_000);
    } finally {
      for (const close of unread) close();
      client.close();
    }
  });
});
