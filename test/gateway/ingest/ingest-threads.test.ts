// Every core a replica gets (issue 32, item 3): several ingest threads serve
// one agent port. Real agent streams (agent/stream/report-stream.ts), each on
// its own connection as agents on their own nodes are, to a real port 0: the
// kernel hands connections to both threads, every node's samples reach the
// one store, and a thread that dies cuts off only its own agents, which
// reconnect to the same port and are stored again while the other thread's
// agents stream on without reconnecting.
import { readdirSync, readFileSync } from 'node:fs';
import assert from 'node:assert/strict';
import * as net from 'node:net';
import { after, describe, it } from 'node:test';
import * as grpc from '@grpc/grpc-js';
import { ReportStream } from '../../../agent/stream/report-stream.js';
import { createLogger } from '../../../lib/log.js';
import { INGEST_THREAD_NICE, startSupervisedIngest, type IngestThreads } from '../../../gateway/ingest/ingest-worker.js';
import { GatewayMetrics } from '../../../gateway/metrics/metrics.js';
import { NodeStore } from '../../../gateway/store/node-store.js';
import { eventually } from '../../helpers/grpc.js';
import { nodeSample } from '../../helpers/node-reviews.js';

const log = createLogger('test', process.env.TEST_LOG_LEVEL ?? 'silent');
const AGENTS = 20;
const MAX_WAVES = 5;

const cleanups: (() => unknown)[] = [];
after(async () => {
  for (const c of cleanups.reverse()) await c();
});

/** An agent of its own node: its own channel, so its own TCP connection (grpc-js would otherwise share one per address). */
function agent(port: number, node: string): ReportStream {
  const rs = new ReportStream({
    gatewayAddress: `127.0.0.1:${port}`,
    hello: { nodeName: node, instanceId: `i-${node}`, agentVersion: 'test', host: null },
    log,
    backoffInitialMs: 100,
    backoffMaxMs: 500,
    connection: { credentials: grpc.credentials.createInsecure(), channelOptions: { 'grpc.use_local_subchannel_pool': 1 } },
  });
  rs.start();
  return rs;
}

async function startTwoThreads(): Promise<{ store: NodeStore; metrics: GatewayMetrics; ingest: IngestThreads }> {
  const store = new NodeStore({ retainMs: 60_000, forgetAfterMs: 600_000 });
  const metrics = new GatewayMetrics(store, Date.now);
  const ingest = await startSupervisedIngest({
    store, metrics, log, bindAddress: '127.0.0.1', port: 0, maxReceiveMessageBytes: 1 << 20,
    threads: 2,
    // Every sample at once: the test waits for each.
    sending: { maxBatchSamples: 0, sendEveryMs: 1000 },
    restartDelayMs: 100,
    onDown: () => {},
  });
  return { store, metrics, ingest };
}

/**
 * Starts agents in waves of AGENTS until both threads serve some. The two
 * threads accept from one socket, and which one wins a connection is a race
 * (the kernel wakes both; the first to accept takes it): a thread short of
 * CPU, as on a machine running other tests, can lose a whole wave. A real
 * fleet connects over minutes; waves stand in for that, bounded.
 */
async function startUntilBothServe(ingest: IngestThreads, agents: Map<string, ReportStream>): Promise<number[]> {
  const perThread = () => ingest.threads.map((t) => t?.streams ?? 0);
  for (let wave = 0; wave < MAX_WAVES; wave++) {
    for (let i = 0; i < AGENTS; i++) {
      const node = `node-${wave}-${i}`;
      agents.set(node, agent(ingest.port, node));
    }
    await eventually(async () => ([...agents.values()].every((rs) => rs.live) ? true : undefined), 10_000, 'every agent welcomed');
    if (perThread().every((n) => n > 0)) break;
  }
  return perThread();
}

let seq = Date.now();
/** Each agent pushes one more sample; resolves once the store holds every one of them. */
async function everyNodeStores(store: NodeStore, agents: Map<string, ReportStream>, what: string): Promise<void> {
  const want = new Map<string, number>();
  for (const [node, rs] of agents) {
    seq += 1;
    rs.push(nodeSample(seq));
    want.set(node, seq);
  }
  await eventually(() => ([...want].every(([node, s]) => (store.get(node)?.lastSeq ?? 0) >= s) ? true : undefined), 10_000, `every node's sample stored (${what})`);
}

/** [thread id, nice] of every thread of this process (/proc/self/task/<tid>/stat: nice is the 19th field, the 17th after the command's closing parenthesis). */
const threadNices = (): Array<[number, number]> =>
  readdirSync('/proc/self/task').map((tid) => {
    const stat = readFileSync(`/proc/self/task/${tid}/stat`, 'utf8');
    return [Number(tid), Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[16])];
  });

const canBind = (port: number) =>
  new Promise<boolean>((resolve) => {
    const probe = net.createServer();
    probe.once('error', () => resolve(false));
    probe.listen({ host: '127.0.0.1', port }, () => probe.close(() => resolve(true)));
  });

describe('ingest threads sharing one agent port', () => {
  it('both threads serve streams on the one port, every node reaches the store, stream ids are disjoint; closing frees the port', async () => {
    const { store, metrics, ingest } = await startTwoThreads();
    const agents = new Map<string, ReportStream>();
    let closed = false;
    cleanups.push(async () => {
      for (const rs of agents.values()) await rs.stop();
      if (!closed) await ingest.close();
    });
    const perThread = await startUntilBothServe(ingest, agents);
    await everyNodeStores(store, agents, 'two threads');
    assert.equal(perThread.length, 2);
    assert.equal(perThread[0]! + perThread[1]!, agents.size, `every stream on a thread: ${perThread}`);
    assert.ok(perThread.every((n) => n > 0), `the kernel handed connections to both threads: ${perThread}`);
    // Each thread reports its own heap and loop delay, by thread.
    const text = await eventually(async () => {
      const t = await metrics.exposition();
      return ['ingest-0', 'ingest-1'].every((th) => t.includes(`oversell_ingest_thread_heap_bytes{thread="${th}",kind="used"}`) && t.includes(`oversell_event_loop_delay_seconds{thread="${th}"}`)) ? t : undefined;
    }, 5000, 'per-thread heap and loop delay');
    assert.match(text, /oversell_ingest_thread_heap_bytes\{thread="ingest-1",kind="limit"\} [1-9]/);

    // The ingest threads run at a lower priority than the main thread (reviews first when CPU is short); no other thread does.
    const nices = threadNices();
    assert.equal(nices.filter(([, nice]) => nice === INGEST_THREAD_NICE).length, 2, `two threads at nice ${INGEST_THREAD_NICE}: ${JSON.stringify(nices)}`);
    assert.equal(nices.find(([tid]) => tid === process.pid)?.[1], 0, 'the main thread keeps its priority');

    // Threads number their streams in ranges of their own: no two nodes' streams share an id.
    const ids = [...agents.keys()].map((node) => store.get(node)?.streamId);
    assert.ok(ids.every((id) => id !== undefined && id >= 2 ** 40), `thread stream ids: ${ids}`);
    assert.equal(new Set(ids).size, agents.size, `stream ids of the two threads overlap: ${ids}`);

    for (const rs of agents.values()) await rs.stop();
    agents.clear();
    await ingest.close();
    closed = true;
    assert.ok(await canBind(ingest.port), 'every descriptor of the agent port closed: the port is free again');
  });

  it('a thread that dies cuts off only its own agents: the others stream on without reconnecting, its agents reconnect to the same port and are stored again', async () => {
    const { store, ingest } = await startTwoThreads();
    const agents = new Map<string, ReportStream>();
    cleanups.push(async () => {
      for (const rs of agents.values()) await rs.stop();
      await ingest.close();
    });
    const perThread = await startUntilBothServe(ingest, agents);
    assert.ok(perThread.every((n) => n > 0), `both threads serve: ${perThread}`);
    await everyNodeStores(store, agents, 'before');
    assert.ok([...agents.values()].every((rs) => rs.reconnects === 0));
    const onThread = (t: number) => ingest.threads[t]?.streams ?? 0;

    // Thread 1 accepts through a descriptor it was given, thread 0 through the one it bound: each role dies once.
    for (const victim of [1, 0]) {
      await eventually(() => (onThread(victim) > 0 ? true : undefined), 10_000, `thread ${victim} serving agents`);
      const before = new Map([...agents].map(([node, rs]) => [node, rs.reconnects]));
      const movedOn = () => [...agents].filter(([node, rs]) => rs.reconnects > before.get(node)!).map(([, rs]) => rs);
      const cutOff = onThread(victim);
      await ingest.threads[victim]!.thread.terminate(); // as a crash would end it
      const reconnected = await eventually(async () => {
        const r = movedOn();
        return r.length >= cutOff && r.every((rs) => rs.live) ? r : undefined;
      }, 10_000, `thread ${victim}'s agents reconnected and welcomed`);
      assert.equal(reconnected.length, cutOff, `only thread ${victim}'s agents reconnected`);
      await everyNodeStores(store, agents, `after thread ${victim} died`);
      assert.equal(movedOn().length, cutOff, 'the other thread\'s agents streamed on without reconnecting');
      await eventually(() => ingest.threads[victim], 5000, `thread ${victim} started again`);
    }
    // Both started again on the same port: new connections are served.
    const late = new Map<string, ReportStream>();
    for (let i = 0; i < 10; i++) late.set(`late-${i}`, agent(ingest.port, `late-${i}`));
    for (const [node, rs] of late) agents.set(node, rs);
    await eventually(async () => ([...late.values()].every((rs) => rs.live) ? true : undefined), 10_000, 'new agents welcomed after the restart');
    await everyNodeStores(store, late, 'new agents');
  });
});
