// The ingest thread (a worker_threads worker started by ingest-worker.ts):
// serves AgentStream on its own port and does the per-sample work that
// dominates at thousands of agents (HTTP/2 frames, protobuf decoding, stream
// checks, rate limits) on its own event loop and heap. The store stays on the
// main thread: each stream's hello, samples and end go there in batches, so
// the webhook and the query API never wait behind a burst of samples or a
// scavenge of the decoding garbage.
import { getHeapStatistics } from 'node:v8';
import { parentPort, workerData } from 'node:worker_threads';
import * as grpc from '@grpc/grpc-js';
import { HealthImplementation } from 'grpc-health-check';
import { createLogger } from '../../lib/log.js';
import { fixStreamDecoder, streamDecoderWarning } from '../../lib/grpc-stream-decoder.js';
import { oversellV1 } from '../../proto/load.js';
import { sampleRow } from '../../wire/sample-row.js';
import { figuresLength, fitsLayout, layoutOf, writeFiguresOnly, writePodFigures, type PodLayout, type PodNames } from '../../wire/pod-figures.js';
import { NO_PODS_KEY } from '../store/pod-report.js';
import type { AgentPrincipal } from '../auth/agent-authenticator.js';
import { AuthError } from '../auth/identity.js';
import { GRPC_SERVER_OPTIONS, listenGrpc, type GrpcListener } from '../tls/grpc-listener.js';
import { methodPaths, streamGuard } from '../tls/stream-guard.js';
import { AGENT_SENDING } from '../config/defaults.js';
import { agentStreamService, type IngestTarget, type PodReport } from './agent-stream-service.js';
import { AgentSending } from './agent-sending.js';
import { flushSoon } from './flush-soon.js';
import { loopDelay } from './loop-delay.js';
import { ROW_RECEIVED_AT_MS, ROW_SAMPLE, ROW_STREAM_ID, type IngestOp, type IngestThreadData, type MetricCount, type ToMain, type ToThread } from './ingest-messages.js';
import { niceThisThread } from '../../lib/thread-priority.js';

// A sample waits at most this long on this thread before the store has it.
// Each hand-over costs both threads a timer, a message and a turn whatever it
// carries: at a summary every 20 s from 1,000 agents (50 messages a second),
// 50 ms against 5 took a fifth off the replica's CPU (docs/performance-log.md,
// 2026-12-07), and freshness's 1.5 s target has room for it.
const FLUSH_EVERY_MS = 50;
// A summary its agent sent on the beat (Sample.on_beat) moved nothing the
// decision must see soon: it waits up to this long, so that a hand-over
// carries many (at 1,000 agents every 20 s, 2 a second instead of 20: about
// 11 millicores per 1,000 agents, docs/performance-log.md, 2026-12-07). A rise
// comes at once, off the beat, and is handed over within FLUSH_EVERY_MS.
const ON_BEAT_FLUSH_MS = 500;
const HEAP_REPORT_EVERY_MS = 5000;
/** The load shedder's period on the main thread. */
const LOAD_REPORT_EVERY_MS = 1000;

const port = parentPort;
if (!port) throw new Error('ingest-thread.ts runs as a worker thread (gateway/ingest/ingest-worker.ts starts it)');
const data = workerData as IngestThreadData;
const log = createLogger('oversell-gateway', data.logLevel).child({ thread: data.thread });
try {
  niceThisThread(data.nice);
} catch (err) {
  log.warn({ nice: data.nice, err: (err as Error).message }, 'cannot lower the ingest thread\'s priority; under a CPU quota the agents\' streams may then delay the reviews');
}
const post = (m: ToMain) => port.postMessage(m);

let ops: IngestOp[] = [];
const { width } = sampleRow();
const SEQ = sampleRow().offsetOf('seq');
const stride = ROW_SAMPLE + width;
/** The batch's samples as numbers; grown as needed, copied out at each flush. */
let rows = new Float64Array(256 * stride);
let rowsUsed = 0;
/** The rows and pod figures of the batch's samples that cross as ops. */
let figures = new Float64Array(64 * 1024);
let figuresUsed = 0;
const room = (a: Float64Array<ArrayBuffer>, need: number): Float64Array<ArrayBuffer> => {
  if (need <= a.length) return a;
  const bigger = new Float64Array(Math.max(need, a.length * 2));
  bigger.set(a);
  return bigger;
};
const counts = new Map<string, MetricCount>();
const count = (kind: MetricCount[0], what: string) => {
  const key = `${kind}:${what}`;
  const c = counts.get(key);
  if (c) c[2] += 1;
  else counts.set(key, [kind, what, 1] as MetricCount);
  flush.soon();
};
const flushOps = () => {
  if (ops.length === 0 && rowsUsed === 0 && counts.size === 0) return;
  const batchRows = rows.slice(0, rowsUsed * stride);
  const batchFigures = figures.slice(0, figuresUsed);
  port.postMessage({ type: 'ops', rows: batchRows, figures: batchFigures, ops, counts: [...counts.values()] } satisfies ToMain, [batchRows.buffer, batchFigures.buffer]);
  ops = [];
  rowsUsed = 0;
  figuresUsed = 0;
  counts.clear();
};
const flush = flushSoon(flushOps, FLUSH_EVERY_MS);
// A second heap under the process's cap: /metrics shows how close it is.
const reportHeap = () => {
  const heap = getHeapStatistics();
  post({ type: 'heap', usedBytes: heap.used_heap_size, limitBytes: heap.heap_size_limit });
};
const heapReports = setInterval(reportHeap, HEAP_REPORT_EVERY_MS);
reportHeap();
// This loop's own delay: the main thread's monitor cannot see it, and agents slowed down relieve it.
const delay = loopDelay();
const loadReports = setInterval(() => post({ type: 'load', loopDelayMs: delay.read() }), LOAD_REPORT_EVERY_MS);
const sending = new AgentSending(data.sending ?? AGENT_SENDING);

// Per stream of this thread: the last seq sent on (duplicates stop here), and
// what ends the stream once the store says a newer one reports for the node.
const lastSeq = new Map<number, number>();
const supersede = new Map<number, () => void>();
const pending = new Map<number, (v: number | AgentPrincipal | Error) => void>();
/** Per stream: its last named pod report's layout, which a report without names (pod_names_as_before) refers to. */
const podLayouts = new Map<number, PodLayout | 'unplaced'>();

/**
 * Writes a report's figures into the batch at `at`. A named report's names go
 * with them and lay out the stream's later reports; one without names is
 * keyed by that layout, and if it does not fit (the counts differ, no named
 * report came first) it goes under no key, so the store keeps the pods it has.
 */
const writeReport = (name: string, streamId: number, report: PodReport, at: number): PodNames => {
  if (!report.namesAsBefore) {
    const named = writePodFigures(report.pods, figures, at);
    podLayouts.set(streamId, layoutOf(report.pods, named.key));
    return named;
  }
  writeFiguresOnly(report.pods, figures, at);
  const layout = podLayouts.get(streamId);
  if (layout !== undefined && layout !== 'unplaced' && fitsLayout(report.pods, layout)) return { key: layout.key };
  if (layout !== 'unplaced') {
    podLayouts.set(streamId, 'unplaced');
    log.warn({ node: name, pods: report.pods.length }, 'an agent sent its pods without names (pod_names_as_before) that do not match the last report that named them on this stream: its pod figures are dropped until it names them again (an agent does at least every 15th report); if this repeats, the agent has a bug');
  }
  return { key: NO_PODS_KEY };
};
let nextRequest = 1;
/** A question for the main thread, sent at once rather than with the next batch. */
const ask = <T>(send: (id: number) => void): Promise<T> =>
  new Promise<T>((resolve, reject) => {
    const id = nextRequest++;
    pending.set(id, (v) => (v instanceof Error ? reject(v) : resolve(v as T)));
    send(id);
    flush.now();
  });

const store: IngestTarget = {
  attach(name, instanceId, host, streamId, superseded) {
    supersede.set(streamId, superseded);
    // In the batch, after this thread's earlier ops for the node: the store sees them in order.
    return ask<number>((id) => ops.push({ op: 'attach', after: rowsUsed, id, name, instanceId, host, streamId })).then((seq) => {
      lastSeq.set(streamId, seq);
      return seq;
    });
  },
  // The service checked the sample (sample-check.ts) on its row: here it is copied into the batch, or crosses with its pods.
  ingest(name, streamId, sampleRows, sampleAt, receivedAtMs, pods, summaries, onBeat) {
    const last = lastSeq.get(streamId);
    if (last === undefined) return 'not-current-stream';
    const seq = sampleRows[sampleAt + SEQ]!;
    if (seq <= last) return 'duplicate';
    lastSeq.set(streamId, seq);
    if (pods || summaries) {
      const at = figuresUsed;
      const count = pods ? figuresLength(pods.pods) : 0;
      figuresUsed = at + width + count;
      figures = room(figures, figuresUsed);
      for (let i = 0; i < width; i++) figures[at + i] = sampleRows[sampleAt + i]!;
      const named = pods && { ...writeReport(name, streamId, pods, at + width), count };
      ops.push({ op: 'sample', after: rowsUsed, name, streamId, at, ...(named && { pods: named }), ...(summaries && { summaries }), receivedAtMs });
      flush.soon(onBeat ? ON_BEAT_FLUSH_MS : FLUSH_EVERY_MS);
    } else {
      const at = rowsUsed * stride;
      rows = room(rows, at + stride);
      rows[at + ROW_STREAM_ID] = streamId;
      rows[at + ROW_RECEIVED_AT_MS] = receivedAtMs;
      // A loop, not set(subarray()): no view object per sample.
      for (let i = 0; i < width; i++) rows[at + ROW_SAMPLE + i] = sampleRows[sampleAt + i]!;
      rowsUsed += 1;
      flush.soon();
    }
    // The store's verdict is counted on the main thread.
    return 'stored';
  },
  consume(name, streamId, seq) {
    const last = lastSeq.get(streamId);
    if (last === undefined) return 'not-current-stream';
    if (seq <= last) return 'duplicate';
    lastSeq.set(streamId, seq);
    // The main thread's store takes the seq too: a reconnecting agent is welcomed past it.
    ops.push({ op: 'consume', after: rowsUsed, name, streamId, seq });
    flush.soon();
    return 'consumed';
  },
  detach(name, streamId) {
    lastSeq.delete(streamId);
    supersede.delete(streamId);
    podLayouts.delete(streamId);
    ops.push({ op: 'detach', after: rowsUsed, name, streamId });
    flush.soon();
  },
};

let streamIds = data.streamIdBase;
const service = agentStreamService({
  store,
  log,
  metrics: {
    sampleReceived: (result) => result !== 'stored' && count('sample', result),
    authRefused: (_api, reason) => count('auth', reason),
  },
  nextStreamId: () => ++streamIds,
  sending,
  shardCopies: data.shardCopies,
  ...(data.authenticate && {
    authenticate: (authorization: unknown) => ask<AgentPrincipal>((id) => post({ type: 'authenticate', id, authorization })),
  }),
});

// This thread's own copy of grpc-js: the main thread's fix does not reach it.
const unfixed = streamDecoderWarning(fixStreamDecoder());
if (unfixed) log.warn(unfixed);
const server = new grpc.Server({
  ...GRPC_SERVER_OPTIONS,
  'grpc.max_receive_message_length': data.maxReceiveMessageBytes,
  // Health/Watch counted per connection and per thread; it and agent streams ended when unread.
  interceptors: [streamGuard({
    limits: data.streams,
    uncounted: methodPaths(oversellV1().AgentStream.service),
    onRefused: (reason) => count('stream-refused', reason),
    onEnded: (service) => count('stream-ended', service),
  })],
});
server.addService(oversellV1().AgentStream.service, service);
new HealthImplementation({ '': 'SERVING', 'oversell.v1.AgentStream': 'SERVING' }).addToServer(server);
let listener: GrpcListener | undefined;

port.on('message', (m: ToThread) => {
  switch (m.type) {
    case 'attached':
      pending.get(m.id)?.('lastSeq' in m ? m.lastSeq : new Error(m.error));
      pending.delete(m.id);
      break;
    case 'authenticated':
      pending.get(m.id)?.('principal' in m ? m.principal : new AuthError(m.failure, m.message));
      pending.delete(m.id);
      break;
    case 'superseded':
      lastSeq.delete(m.streamId);
      supersede.get(m.streamId)?.();
      break;
    case 'tls':
      listener?.setTls(m);
      break;
    case 'sending':
      sending.set(m.sending);
      break;
    case 'close':
      flush.stop();
      clearInterval(heapReports);
      clearInterval(loadReports);
      delay.stop();
      server.tryShutdown(() => void listener?.close().then(() => post({ type: 'closed' })));
      // Open agent streams would hold tryShutdown forever.
      setTimeout(() => {
        server.forceShutdown();
        void listener?.close().then(() => post({ type: 'closed' }));
      }, 2000).unref();
      break;
  }
});

listenGrpc(server, {
  host: data.bindAddress,
  port: data.port,
  ...(data.tls && { tls: data.tls }),
  limits: data.limits,
  onRefused: (reason) => count('connection', reason),
}).then(
  (l) => {
    listener = l;
    post({ type: 'listening', port: l.port });
  },
  (err: NodeJS.ErrnoException) => post({ type: 'failed', message: err.message, code: err.code }),
);
