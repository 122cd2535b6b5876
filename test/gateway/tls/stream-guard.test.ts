// Streams of the services that need no token and have no limits of their own
// (grpc-health-check's Health/Watch, the reflection service) are counted per
// connection and per gRPC port, and every stream a client stops reading is
// ended: real grpc-js clients against a real gateway (gateway/tls/stream-guard.ts).
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import { HealthImplementation, protoPath as healthProto } from 'grpc-health-check';
import { createRequire } from 'node:module';
import { streamGuard } from '../../../gateway/tls/stream-guard.js';
import { oversellV1 } from '../../../proto/load.js';
import { startTestGateway, type TestGateway } from '../../helpers/gateway.js';
import { scrapeMetric } from '../../helpers/metrics.js';
import { waitUntil } from '../../../scripts/harness/wait.js';

const STALL_MS = 300;
/** Ended within the stall time, give or take a busy event loop and the metric's scrape. */
const LATE_MS = 1500;

const LOADER = { keepCase: true, longs: String, enums: String, defaults: true, oneofs: true };
// biome-ignore lint/suspicious/noExplicitAny: loaded from .proto at run time, as the gateway does
const loaded = (file: string) => grpc.loadPackageDefinition(protoLoader.loadSync(file, LOADER)) as any;
const Health: typeof grpc.Client = loaded(healthProto).grpc.health.v1.Health;
const reflectionProto = createRequire(import.meta.url).resolve('@grpc/reflection/build/proto/grpc/reflection/v1/reflection.proto');
const Reflection: typeof grpc.Client = loaded(reflectionProto).grpc.reflection.v1.ServerReflection;

/** Every client and call of the tests, closed after each suite whatever happened: an open call would hold the gateway's shutdown. */
const opened: Array<grpc.Client | grpc.Call> = [];
const closeAll = () => {
  for (const o of opened.splice(0)) {
    if (o instanceof grpc.Client) o.close();
    else o.cancel();
  }
};

/** A client on a connection of its own; `flow_control_window` 0: the server can send it nothing, a client that reads nothing. */
function client<C extends typeof grpc.Client>(Client: C, port: number, options: grpc.ChannelOptions = {}): InstanceType<C> {
  const c = new Client(`127.0.0.1:${port}`, grpc.credentials.createInsecure(), { 'grpc.use_local_subchannel_pool': 1, ...options }) as InstanceType<C>;
  opened.push(c);
  return c;
}

/** A Health/Watch stream: statuses received, its end kept. */
function watch(c: grpc.Client) {
  const call = (c as unknown as { Watch(request: { service: string }): grpc.ClientReadableStream<{ status: string }> }).Watch({ service: '' });
  opened.unshift(call);
  const state: { statuses: string[]; headersAtMs?: number; error?: grpc.ServiceError } = { statuses: [] };
  call.on('metadata', () => (state.headersAtMs = performance.now()));
  call.on('data', (m: { status: string }) => state.statuses.push(m.status));
  call.on('error', (e: grpc.ServiceError) => (state.error = e));
  return {
    call,
    state,
    serving: () => waitUntil('a status', () => (state.statuses[0] ?? (state.error ? assert.fail(`refused: ${state.error.details}`) : undefined)), 5000),
    ended: () => waitUntil('the watch ends', () => state.error, 5000),
  };
}

describe('Health/Watch streams are counted per connection and per port', () => {
  let gw: TestGateway;
  const refusals = (listener: string, reason: string) => scrapeMetric(gw.ports.metrics, 'oversell_grpc_stream_refusals_total', `{listener="${listener}",reason="${reason}"}`);
  before(async () => {
    gw = await startTestGateway({ grpcStreams: { perConnection: 2, total: 3, stallMs: 60_000 } });
  });
  after(async () => {
    closeAll();
    await gw?.close();
  });

  it('a connection gets 2; the 3rd is RESOURCE_EXHAUSTED and counted; another connection gets the port\'s last; past it, refused; a cancelled watch frees its slot', async () => {
    const c1 = client(Health, gw.ports.grpc);
    const c2 = client(Health, gw.ports.grpc);
    const w1 = watch(c1);
    const w2 = watch(c1);
    assert.equal(await w1.serving(), 'SERVING');
    await w2.serving();
    const third = await watch(c1).ended();
    assert.equal(third.code, grpc.status.RESOURCE_EXHAUSTED);
    assert.match(third.details, /^too many streams: this connection already holds 2 open streams .* \(limit 2, --grpc-streams-per-connection\); close streams it no longer reads$/);
    assert.equal(await refusals('grpc', 'streams-per-connection'), 1);
    await watch(c2).serving();
    const full = await watch(c2).ended();
    assert.equal(full.code, grpc.status.RESOURCE_EXHAUSTED);
    assert.match(full.details, /^too many streams: this gRPC port already serves 3 streams .* \(limit 3, --grpc-streams\); retry later, or use Health\/Check$/);
    assert.equal(await refusals('grpc', 'streams'), 1);
    w1.call.cancel();
    // The gateway frees the slot once it sees the cancel.
    await waitUntil('c1 watches again', async () => {
      const w = watch(c1);
      const ok = await w.serving().then(() => true, () => false);
      if (ok) return true;
      w.call.cancel();
      return undefined;
    }, 5000);
  });

  it('the agent port (an ingest thread) counts its own, under listener="agent"', async () => {
    const c = client(Health, gw.ports.agent);
    await watch(c).serving();
    await watch(c).serving();
    const third = await watch(c).ended();
    assert.equal(third.code, grpc.status.RESOURCE_EXHAUSTED);
    assert.match(third.details, /--grpc-streams-per-connection/);
    // Counted on the thread, summed on the main thread with its next batch.
    await waitUntil('counted', async () => ((await refusals('agent', 'streams-per-connection')) === 1 ? true : undefined), 3000);
  });
});

describe(`streams whose client reads nothing are ended (${STALL_MS} ms stall)`, () => {
  let gw: TestGateway;
  const ended = (service: string, listener = 'grpc') => scrapeMetric(gw.ports.metrics, 'oversell_grpc_streams_ended_total', `{listener="${listener}",service="${service}"}`);
  before(async () => {
    gw = await startTestGateway({ grpcStreams: { stallMs: STALL_MS } });
  });
  after(async () => {
    closeAll();
    await gw?.close();
  });

  it('Health/Watch: an unread stream is ended within the stall time, counted; a reading one stays open and hears the next status', async () => {
    const reading = watch(client(Health, gw.ports.grpc));
    assert.equal(await reading.serving(), 'SERVING');
    const unread = watch(client(Health, gw.ports.grpc, { 'grpc-node.flow_control_window': 0 }));
    // The headers go out with the first status, which then waits for a window that never opens.
    const since = await waitUntil('the headers', () => unread.state.headersAtMs, 5000);
    const endedAt = await waitUntil('the unread watch is ended', async () => ((await ended('grpc.health.v1.Health')) === 1 ? performance.now() : undefined), STALL_MS + LATE_MS + 2000, 20);
    const afterMs = endedAt - since;
    assert.ok(afterMs >= STALL_MS - 50 && afterMs < STALL_MS + LATE_MS, `ended ${afterMs.toFixed(0)} ms after its first status was written`);
    assert.deepEqual(unread.state.statuses, [], 'the unread client received nothing');
    // The reading one: a status change reaches it, and three stall times later it is still open.
    gw.drain();
    await waitUntil('NOT_SERVING', () => (reading.state.statuses.includes('NOT_SERVING') ? true : undefined), 5000);
    await new Promise((r) => setTimeout(r, 3 * STALL_MS));
    assert.equal(reading.state.error, undefined);
    assert.equal(await ended('grpc.health.v1.Health'), 1);
  });

  it('an agent stream whose agent reads nothing is ended too, and its node detached', async () => {
    const agent = client(oversellV1().AgentStream, gw.ports.agent, { 'grpc-node.flow_control_window': 0 });
    const call = agent.Report();
    opened.unshift(call);
    call.on('error', () => {});
    call.write({ hello: { nodeName: 'unread-agent', instanceId: 'i1', agentVersion: 'test' } });
    await waitUntil('attached', () => (gw.store.connectedCount() === 1 ? true : undefined), 5000);
    // The welcome waits for a window that never opens.
    await waitUntil('the stream is ended', async () => ((await ended('oversell.v1.AgentStream', 'agent')) === 1 ? true : undefined), STALL_MS + LATE_MS + 2000, 20);
    await waitUntil('detached', () => (gw.store.connectedCount() === 0 ? true : undefined), 5000);
  });

  it('reflection: a client that sends requests and reads nothing is ended, its requests past one answer unread; once it reads, the answers sent, then RESOURCE_EXHAUSTED', async () => {
    const c = client(Reflection, gw.ports.grpc);
    const rpc = (c as unknown as { ServerReflectionInfo(): grpc.ClientDuplexStream<object, object> }).ServerReflectionInfo;
    // One request, read: answered, as grpcurl is.
    const ok = rpc.call(c);
    opened.unshift(ok);
    const answers: object[] = [];
    ok.on('data', (m: object) => answers.push(m));
    const status = new Promise<grpc.StatusObject>((resolve) => ok.on('status', resolve));
    ok.on('error', () => {});
    ok.write({ list_services: '*' });
    ok.end();
    assert.equal((await status).code, grpc.status.OK);
    assert.equal(answers.length, 1);

    // Answers of about 4 KB: past the client's buffers (16 messages, then HTTP/2 flow control) after a few dozen.
    const REQUESTS = 2000;
    const unread = rpc.call(c);
    opened.unshift(unread);
    let received = 0;
    let error: grpc.ServiceError | undefined;
    unread.on('error', (e: grpc.ServiceError) => (error = e));
    unread.write({ list_services: '*' });
    await new Promise((r) => unread.once('data', r));
    // Read, then not (a grpc-js call never read at all takes everything into an unbounded buffer of its own).
    unread.pause();
    for (let i = 0; i < REQUESTS; i++) unread.write({ file_containing_symbol: 'oversell.v1.NodeUsage' });
    await waitUntil('the stream is ended', async () => ((await ended('grpc.reflection.v1.ServerReflection')) === 1 ? true : undefined), 10_000);
    unread.on('data', () => (received += 1));
    unread.resume();
    await waitUntil('the status', () => error, 5000);
    assert.equal(error?.code, grpc.status.RESOURCE_EXHAUSTED);
    assert.match(error?.details ?? '', /^stream ended: the client took no message for 0\.3s while the gateway had one for it \(--grpc-stream-stall\); read the stream continuously/);
    assert.ok(received > 0 && received < REQUESTS / 4, `${received} of ${REQUESTS} answered`);
    console.log(`reflection: ${received} of ${REQUESTS} requests answered before the stream was ended`);
  });
});

describe('the stream guard on a bare server', () => {
  /** A server with the guard only; `ended` counts the streams it ended. */
  const bare = async (add: (server: grpc.Server) => void) => {
    const ended = { count: 0 };
    const server = new grpc.Server({ interceptors: [streamGuard({ limits: { perConnection: 4, total: 4, stallMs: STALL_MS }, onEnded: () => (ended.count += 1) })] });
    add(server);
    const port = await new Promise<number>((resolve, reject) => server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (e, p) => (e ? reject(e) : resolve(p))));
    return { server, port, ended };
  };

  it('a bidirectional stream whose client reads nothing: its next request waits for the answer before it, so the handler answers a few dozen of 2,000, not all', async () => {
    const bytes = (b: Buffer) => b;
    const Echo = { Chat: { path: '/test.Echo/Chat', requestStream: true, responseStream: true, requestSerialize: bytes, requestDeserialize: bytes, responseSerialize: bytes, responseDeserialize: bytes, originalName: 'chat' } };
    let answered = 0;
    // Answers every request at once, 4 KB each, whether or not the client reads: as the reflection service does.
    const { server, port, ended } = await bare((server) => server.addService(Echo, {
      Chat: (call: grpc.ServerDuplexStream<Buffer, Buffer>) => call.on('data', () => {
        answered += 1;
        call.write(Buffer.alloc(4096));
      }),
    }));
    try {
      const c = client(grpc.makeGenericClientConstructor(Echo, 'Echo'), port);
      const call = (c as unknown as { chat(): grpc.ClientDuplexStream<Buffer, Buffer> }).chat();
      opened.unshift(call);
      let error: grpc.ServiceError | undefined;
      call.on('error', (e: grpc.ServiceError) => (error = e));
      call.write(Buffer.from('first'));
      await new Promise((r) => call.once('data', r));
      call.pause();
      for (let i = 0; i < 2000; i++) call.write(Buffer.from('next'));
      await waitUntil('the stream is ended', () => (ended.count === 1 ? true : undefined), STALL_MS + LATE_MS + 2000, 20);
      assert.ok(answered < 200, `the handler answered ${answered} of 2,001 requests`);
      call.on('data', () => {});
      call.resume();
      await waitUntil('the status', () => error, 5000);
      assert.equal(error?.code, grpc.status.RESOURCE_EXHAUSTED);
    } finally {
      closeAll();
      server.forceShutdown();
    }
  });

  it('a handler of a stream it ends hears a cancel: grpc-health-check drops the watcher, and a status set later writes to no one', async () => {
    const health = new HealthImplementation({ '': 'SERVING' });
    const { server, port } = await bare((server) => health.addToServer(server));
    // grpc-health-check's own bookkeeping: the watchers it writes each status to.
    const watchers = () => (health as unknown as { watchers: Map<string, Set<unknown>> }).watchers.get('')?.size ?? 0;
    try {
      watch(client(Health, port, { 'grpc-node.flow_control_window': 0 }));
      await waitUntil('watching', () => (watchers() === 1 ? true : undefined), 5000);
      await waitUntil('the watcher is dropped', () => (watchers() === 0 ? true : undefined), STALL_MS + LATE_MS);
      health.setStatus('', 'NOT_SERVING');
    } finally {
      closeAll();
      server.forceShutdown();
    }
  });
});
