// Streams awaiting their token review (issue 43, item 8): the gateway reads
// nothing of them, so the bytes one holds are bounded by the HTTP/2 window
// however large its client's messages, and at most MAX_UNREVIEWED_STREAMS of
// them wait at once. A real gateway over real gRPC on 127.0.0.1, the agent
// streams on either thread; the API server's TokenReview is played by an
// authenticator that answers only when the test says (a slow API server).
import assert from 'node:assert/strict';
import * as net from 'node:net';
import { describe, it } from 'node:test';
import * as grpc from '@grpc/grpc-js';
import type { AgentPrincipal } from '../../../gateway/auth/agent-authenticator.js';
import { AuthError } from '../../../gateway/auth/identity.js';
import { MAX_UNREVIEWED_STREAMS, UNREAD_BYTES_PER_STREAM } from '../../../gateway/ingest/agent-stream-service.js';
import type { AgentMessage } from '../../../proto/gen/oversell/v1/AgentMessage.js';
import type { AgentStreamClient } from '../../../proto/gen/oversell/v1/AgentStream.js';
import type { GatewayMessage__Output } from '../../../proto/gen/oversell/v1/GatewayMessage.js';
import { oversellV1 } from '../../../proto/load.js';
import { getHttp, startTestGateway, type TestGateway } from '../../helpers/gateway.js';
import { bearer, eventually, plainSample } from '../../helpers/grpc.js';
import { metricValue } from '../../helpers/metrics.js';

const SA = 'oversell/oversell-agent';
/** Refused at once (a token the gateway refuses itself): one round trip through the gateway, on the connection it is sent on. */
const QUICK = 'quick';

/** TokenReviews that answer when the test says; a token QUICK is refused at once. */
function slowReviews() {
  const pending: Array<{ token: unknown; accept(node: string): void; refuse(): void }> = [];
  const authenticate = (authorization: unknown): Promise<AgentPrincipal> => {
    if (authorization === `Bearer ${QUICK}`) return Promise.reject(new AuthError('unauthenticated', 'refused at once'));
    return new Promise((resolve, reject) =>
      pending.push({
        token: authorization,
        accept: (node) => resolve({ node, subject: SA, expiresAtMs: undefined }),
        refuse: () => reject(new AuthError('unauthenticated', 'token not accepted: invalid signature')),
      }),
    );
  };
  return { authenticate, pending };
}

/** One client per connection: grpc-js would otherwise share one connection per address. */
function client(port: number): AgentStreamClient {
  return new (oversellV1().AgentStream)(`127.0.0.1:${port}`, grpc.credentials.createInsecure(), { 'grpc.use_local_subchannel_pool': 1 });
}

interface Stream {
  call: grpc.ClientDuplexStream<AgentMessage, GatewayMessage__Output>;
  said: GatewayMessage__Output[];
  error: grpc.ServiceError | undefined;
}

function open(c: AgentStreamClient, token: string): Stream {
  const call = c.Report(bearer(token)) as unknown as Stream['call'];
  const s: Stream = { call, said: [], error: undefined };
  call.on('data', (m: GatewayMessage__Output) => s.said.push(m));
  call.on('error', (e: grpc.ServiceError) => (s.error = e));
  return s;
}

/** A stream the gateway refuses at once, on this connection: when its status is back, the gateway has read every frame sent on the connection before it. */
function roundTrip(c: AgentStreamClient): Promise<void> {
  return new Promise((resolve) => {
    const call = c.Report(bearer(QUICK));
    call.on('data', () => {});
    call.on('error', () => resolve());
  });
}

/**
 * A TCP proxy to the gateway on 127.0.0.1 that counts the bytes its clients
 * send: what the gateway let them send, since HTTP/2 sends a stream's data
 * only as far as the receiver's window for it.
 */
async function countingProxy(target: number): Promise<{ port: number; readonly sent: number; close(): Promise<void> }> {
  let sent = 0;
  const sockets = new Set<net.Socket>();
  const server = net.createServer((down) => {
    const up = net.connect(target, '127.0.0.1');
    for (const socket of [down, up]) {
      sockets.add(socket);
      socket.on('error', () => {});
      socket.on('close', () => {
        down.destroy();
        up.destroy();
      });
    }
    down.on('data', (b: Buffer) => {
      sent += b.length;
    });
    down.pipe(up);
    up.pipe(down);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as net.AddressInfo).port,
    get sent() {
      return sent;
    },
    close: () =>
      new Promise<void>((resolve) => {
        for (const socket of sockets) socket.destroy();
        server.close(() => resolve());
      }),
  };
}

const metrics = async (gw: TestGateway) => (await getHttp(gw.ports.metrics, '/metrics')).body;
const throttled = async (gw: TestGateway) => metricValue(await metrics(gw), 'oversell_auth_refusals_total', '{api="agent-stream",reason="throttled"}') ?? 0;
const samplesRefused = async (gw: TestGateway) => metricValue(await metrics(gw), 'oversell_samples_received_total', '{result="refused-too-many-pods"}') ?? 0;

/** A sample of 15,000 small pods: about 300 KB on the wire, several HTTP/2 windows. */
const bigSample = (seq: number): AgentMessage => ({
  sample: { ...plainSample(seq), podsIncluded: true, pods: Array.from({ length: 15_000 }, () => ({ uid: 'u', qosClass: 'burstable', cpuUsageMillicores: 1, memoryWorkingSetBytes: 1, containers: [] })) },
});
const BIG_BYTES = oversellV1().AgentStream.service.Report.requestSerialize(bigSample(1)).length;

describe('agent streams awaiting their token review', () => {
  it('nothing of a stream is read before its token is reviewed: its client gets no further than the HTTP/2 window; once accepted, what it sent is read in order', async () => {
    assert.ok(BIG_BYTES > 4 * UNREAD_BYTES_PER_STREAM, `${BIG_BYTES} bytes a message`);
    const reviews = slowReviews();
    const gw = await startTestGateway({ auth: { agents: reviews.authenticate } });
    const proxy = await countingProxy(gw.ports.agent);
    const c = client(proxy.port);
    const streams: Stream[] = [];
    try {
      // Issue 43's six streams, each a hello and then 4 messages of several windows each, while the API server has not answered.
      for (let i = 0; i < 6; i++) {
        const s = open(c, `forged-${i}`);
        streams.push(s);
        s.call.write({ hello: { nodeName: `node-${i}`, instanceId: 'i' } });
        for (let seq = 1; seq <= 4; seq++) s.call.write(bigSample(seq));
      }
      // The window of each, its headers and the frames' own, and the round trips' streams below.
      const bound = 6 * UNREAD_BYTES_PER_STREAM + 64 * 1024;
      await eventually(() => (reviews.pending.length === 6 && proxy.sent >= 6 * UNREAD_BYTES_PER_STREAM ? true : undefined), 5000, 'six reviews asked, six windows sent');
      // Round trips on the same connection: a gateway that read the streams
      // would let the client send a window more of each on every one (it
      // did: without the read gate, the bound was passed before the first,
      // 0.8 MB sent on the main thread, 1.8 MB on the ingest thread).
      for (let i = 0; i < 40 && proxy.sent <= bound; i++) await roundTrip(c);
      assert.ok(proxy.sent <= bound, `the gateway took ${proxy.sent} bytes of six streams awaiting their review; at most ${bound}`);
      assert.ok(streams.every((s) => s.error === undefined && s.said.length === 0), 'the streams wait, unanswered');

      // The API server answers: three tokens are accepted, three refused.
      for (const [i, r] of reviews.pending.entries()) {
        if (i % 2 === 0) r.accept(`node-${i}`);
        else r.refuse();
      }
      const refused = streams.filter((_, i) => i % 2 === 1);
      const accepted = streams.filter((_, i) => i % 2 === 0);
      for (const s of refused) assert.equal((await eventually(() => s.error, 5000, 'the refusal')).code, grpc.status.UNAUTHENTICATED);
      // What the accepted streams' clients sent waited for them: now it is read, in order (each of those samples is refused: too many pods).
      await eventually(async () => ((await samplesRefused(gw)) === 3 * 4 ? true : undefined), 5000, 'their samples read and checked');
      assert.ok(proxy.sent > 3 * 4 * BIG_BYTES);
      for (const [i, s] of accepted.entries()) {
        assert.ok(s.said[0]?.welcome, 'welcomed');
        assert.equal(s.error, undefined);
        assert.equal(gw.store.get(`node-${2 * i}`)?.lastSeq, 4);
      }
      for (const i of [1, 3, 5]) assert.equal(gw.store.get(`node-${i}`), undefined, 'nothing of a refused stream stored');
    } finally {
      for (const r of reviews.pending) r.refuse();
      for (const s of streams) s.call.cancel();
      c.close();
      await proxy.close();
      await gw.close();
    }
  });

  it(`at most ${MAX_UNREVIEWED_STREAMS} streams wait for their token review at once: one more is refused at once (UNAVAILABLE, counted as throttled) and costs no review; a slot is free again once a stream is answered or gone`, async () => {
    const reviews = slowReviews();
    const gw = await startTestGateway({ auth: { agents: reviews.authenticate } });
    // 100 streams a connection at most (grpc.max_concurrent_streams).
    const clients = Array.from({ length: Math.ceil(MAX_UNREVIEWED_STREAMS / 90) + 1 }, () => client(gw.ports.agent));
    const streams: Stream[] = [];
    try {
      for (let i = 0; i < MAX_UNREVIEWED_STREAMS; i++) {
        const s = open(clients[i % (clients.length - 1)]!, `forged-${i}`);
        s.call.write({ hello: { nodeName: `node-${i}`, instanceId: 'i' } });
        streams.push(s);
      }
      await eventually(() => (reviews.pending.length === MAX_UNREVIEWED_STREAMS ? true : undefined), 10_000, `${MAX_UNREVIEWED_STREAMS} reviews asked`);
      const extra = clients[clients.length - 1]!;
      const one = open(extra, 'forged-extra');
      const error = await eventually(() => one.error, 5000, 'the stream past the bound refused');
      assert.equal(error.code, grpc.status.UNAVAILABLE);
      assert.match(error.details, new RegExp(`${MAX_UNREVIEWED_STREAMS} agent streams already wait for their token review .*at most ${MAX_UNREVIEWED_STREAMS}.*retry`));
      assert.equal(reviews.pending.length, MAX_UNREVIEWED_STREAMS, 'no review asked for it');
      assert.equal(await eventually(async () => ((await throttled(gw)) === 1 ? 1 : undefined), 5000, 'counted'), 1);
      assert.ok(streams.every((s) => s.error === undefined), 'the others still wait');

      // A client that goes away frees its slot, though its review has not answered.
      streams[0]!.call.cancel();
      const next = await eventually(async () => {
        const s = open(extra, 'forged-after-cancel');
        await eventually(() => (s.error || reviews.pending.length > MAX_UNREVIEWED_STREAMS ? true : undefined), 5000, 'refused or reviewed');
        return s.error ? undefined : s;
      }, 5000, 'a stream reviewed after one went away');
      streams.push(next);

      // The API server answers them all: every slot is free again.
      for (const r of reviews.pending.splice(0)) r.refuse();
      await eventually(() => (streams.slice(1).every((s) => s.error?.code === grpc.status.UNAUTHENTICATED) ? true : undefined), 10_000, 'every waiting stream refused');
      const again = Array.from({ length: 10 }, (_, i) => open(extra, `forged-again-${i}`));
      await eventually(() => (reviews.pending.length === 10 ? true : undefined), 5000, 'reviewed again');
      streams.push(...again);
    } finally {
      for (const r of reviews.pending) r.refuse();
      for (const s of streams) s.call.cancel();
      for (const c of clients) c.close();
      await gw.close();
    }
  });
});
