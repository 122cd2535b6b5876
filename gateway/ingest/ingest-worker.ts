// The main thread's side of the ingest threads (ingest-thread.ts): starts
// them, applies what each thread's streams did to the store in order, answers
// their hellos with the store's last seq, reviews their agents' tokens, counts
// their metrics, and starts again a thread that dies.
import type { Worker } from 'node:worker_threads';
import { duplicateListener, type ListenerHandle } from '../../lib/listener-handle.js';
import { moduleWorker } from '../../lib/module-worker.js';
import type { Logger } from '../../lib/log.js';
import type { AgentAuthenticator } from '../auth/agent-authenticator.js';
import { authStatus } from '../auth/grpc-status.js';
import type { GatewayMetrics } from '../metrics/metrics.js';
import type { ConnectionLimits } from '../tls/grpc-listener.js';
import { DEFAULT_STREAM_LIMITS, type StreamLimits } from '../tls/stream-guard.js';
import { GATEWAY_DEFAULTS } from '../config/defaults.js';
import type { IngestResult, NodeStore } from '../store/node-store.js';
import { sampleRow } from '../../wire/sample-row.js';
import { SlicedBatches } from './sliced-batches.js';
import { ROW_RECEIVED_AT_MS, ROW_SAMPLE, ROW_STREAM_ID, type IngestOp, type IngestThreadData, type ToMain, type ToThread } from './ingest-messages.js';

/**
 * Ingest threads run at this nice value, the main thread at the process's:
 * under a CPU quota every thread of the gateway competes for the same CPU
 * time, and the agents' TLS and decoding took it from the reviews (no review
 * answered at 10,000 agents in one core). At 10 the kernel weighs an ingest
 * thread about a tenth of the main thread when both are runnable; the ingest
 * falls behind instead, and the load shedder slows the agents.
 */
export const INGEST_THREAD_NICE = 10;

export interface IngestWorkerOptions {
  store: NodeStore;
  metrics: GatewayMetrics;
  log: Logger;
  bindAddress: string;
  /** 0 picks a free port. */
  port: number;
  /** Accept on this listening socket (a descriptor of the main thread's) instead of binding bindAddress and port. */
  shareFd?: number;
  /** The thread's name in logs and metrics. */
  thread: string;
  /** The thread's nice value (default INGEST_THREAD_NICE; 0: the main thread's). */
  nice?: number;
  /** Its stream ids count up from here (streamIdBase()). */
  streamIdBase: number;
  tls?: { cert: string; key: string };
  authenticate?: AgentAuthenticator;
  maxReceiveMessageBytes: number;
  /** Connections the agent port holds at once, and how long one may stay silent (default: the gRPC port's). */
  limits?: ConnectionLimits;
  /** Streams of the other services (health) per connection and per thread, and how long any stream may go unread (default DEFAULT_STREAM_LIMITS). */
  streams?: StreamLimits;
  /** What the agents are told about batches (default AGENT_SENDING). */
  sending?: { maxBatchSamples: number; sendEveryMs: number };
  /** Settings.shard_copies its agents are told (default 0: every replica). */
  shardCopies?: number;
  /** The thread's own loop delay (ms), every second. */
  onLoad?(loopDelayMs: number): void;
  /** The thread died after it started: its agents are cut off (startSupervisedIngest starts another). */
  onFailed(err: Error): void;
}

export interface IngestWorker {
  port: number;
  /** The listening socket's descriptor in the thread: the main thread duplicates it for the others. */
  fd: number;
  /** The thread itself (diagnostics; tests end it to check what a crash does). */
  thread: Worker;
  /** Agent streams the thread serves now (attached and not yet ended). */
  readonly streams: number;
  setTls(tls: { cert: string; key: string }): void;
  /** What agents are told now: every welcomed stream of the thread gets it. */
  setSending(sending: { maxBatchSamples: number; sendEveryMs: number }): void;
  close(): Promise<void>;
}

export async function startIngestWorker(options: IngestWorkerOptions): Promise<IngestWorker> {
  const { store, metrics, log } = options;
  const { thread } = options;
  const data: IngestThreadData = {
    bindAddress: options.bindAddress,
    port: options.port,
    ...(options.shareFd !== undefined && { shareFd: options.shareFd }),
    thread,
    nice: options.nice ?? INGEST_THREAD_NICE,
    streamIdBase: options.streamIdBase,
    logLevel: log.level,
    ...(options.tls && { tls: options.tls }),
    authenticate: options.authenticate !== undefined,
    maxReceiveMessageBytes: options.maxReceiveMessageBytes,
    ...(options.sending && { sending: options.sending }),
    shardCopies: options.shardCopies ?? 0,
    limits: options.limits ?? { maxConnections: GATEWAY_DEFAULTS.connections.grpcMaxConnections, handshakeTimeoutMs: GATEWAY_DEFAULTS.connections.handshakeTimeoutMs },
    streams: options.streams ?? DEFAULT_STREAM_LIMITS,
  };
  const worker = moduleWorker(new URL('./ingest-thread.js', import.meta.url), { workerData: data });
  const send = (m: ToThread) => worker.postMessage(m);
  let closed: (() => void) | undefined;

  // The node each of the thread's streams reports for, from its attach: rows carry only the stream id.
  const nodeOf = new Map<number, string>();
  const stride = ROW_SAMPLE + sampleRow().width;
  const counted = (result: IngestResult, streamId: number) => {
    metrics.sampleReceived(result);
    if (result === 'not-current-stream') send({ type: 'superseded', streamId });
  };
  // Samples were checked on the thread (sample-check.ts), which counted and logged those it refused.
  const applyOne = (op: IngestOp) => {
    if (op.op === 'sample') {
      counted(store.ingest(op.name, op.streamId, op.row, 0, op.receivedAtMs, op.pods), op.streamId);
    } else if (op.op === 'consume') {
      if (store.consume(op.name, op.streamId, op.seq) === 'not-current-stream') send({ type: 'superseded', streamId: op.streamId });
    } else if (op.op === 'attach') {
      nodeOf.set(op.streamId, op.name);
      send({ type: 'attached', id: op.id, lastSeq: store.attach(op.name, op.instanceId, op.host, op.streamId) });
    } else {
      nodeOf.delete(op.streamId);
      store.detach(op.name, op.streamId);
    }
  };
  const applyRow = (rows: Float64Array, at: number) => {
    const streamId = rows[at + ROW_STREAM_ID]!;
    const name = nodeOf.get(streamId);
    // The thread sends rows only for streams it attached; a row without one has no node to go to.
    if (name === undefined) return counted('unknown-node', streamId);
    counted(store.ingest(name, streamId, rows, at + ROW_SAMPLE, rows[at + ROW_RECEIVED_AT_MS]!), streamId);
  };
  type OpsMessage = Extract<ToMain, { type: 'ops' }> & { rowCount: number };
  const batches = new SlicedBatches<OpsMessage>({
    row(m, index) {
      // One bad sample costs itself, never the batch or the gateway.
      try {
        applyRow(m.rows, index * stride);
      } catch (err) {
        log.error({ stream: m.rows[index * stride + ROW_STREAM_ID], err: (err as Error).message }, 'an agent stream\'s sample could not be applied to the store; dropped');
      }
    },
    op(m, index) {
      const op = m.ops[index]!;
      try {
        applyOne(op);
      } catch (err) {
        log.error({ node: op.name, op: op.op, err: (err as Error).message }, 'an agent stream\'s message could not be applied to the store; dropped');
        // The stream waits for its welcome: tell it, so it ends and the agent reconnects.
        if (op.op === 'attach') send({ type: 'attached', id: op.id, error: (err as Error).message });
      }
    },
    done(m) {
      for (const [kind, what, n] of m.counts) {
        for (let i = 0; i < n; i++) {
          if (kind === 'sample') metrics.sampleReceived(what as Parameters<GatewayMetrics['sampleReceived']>[0]);
          else if (kind === 'connection') metrics.connectionRefused('agent', what as Parameters<GatewayMetrics['connectionRefused']>[1]);
          else if (kind === 'stream-refused') metrics.streamRefused('agent', what as Parameters<GatewayMetrics['streamRefused']>[1]);
          else if (kind === 'stream-ended') metrics.streamEnded('agent', what);
          else metrics.authRefused('agent-stream', what);
        }
      }
    },
  });
  const apply = (m: Extract<ToMain, { type: 'ops' }>) => batches.push({ ...m, rowCount: m.rows.length / stride });

  let started = false;
  let failed = false;
  let exited = false;
  const failAfterStart = (err: Error) => {
    if (!started || failed) return;
    failed = true;
    // Its streams are gone with it: the nodes read as disconnected until their agents reconnect (to any thread).
    batches.clear();
    for (const [streamId, name] of nodeOf) store.detach(name, streamId);
    nodeOf.clear();
    // The thread runs under the process's --max-old-space-size: a worker's
    // resourceLimits do not apply beside that flag (V8's flag wins).
    const outOfMemory = (err as NodeJS.ErrnoException).code === 'ERR_WORKER_OUT_OF_MEMORY';
    log.error(
      { thread, err: err.message },
      outOfMemory
        ? `ingest thread ${thread} ran out of heap (--max-old-space-size): its agents are cut off and reconnect to the agent port (other threads serve it; this one is started again); raise the gateway's --max-old-space-size and memory limit together`
        : `ingest thread ${thread} stopped: its agents are cut off and reconnect to the agent port (other threads serve it; this one is started again)`,
    );
    options.onFailed(err);
  };

  const listening = new Promise<{ port: number; fd: number }>((resolve, reject) => {
    worker.on('message', (m: ToMain) => {
      switch (m.type) {
        case 'ops':
          return apply(m);
        case 'authenticate': {
          const review = options.authenticate?.(m.authorization) ?? Promise.reject(new Error('no authenticator'));
          review.then(
            (principal) => send({ type: 'authenticated', id: m.id, principal }),
            (err: unknown) => {
              const s = authStatus(err);
              send({ type: 'authenticated', id: m.id, failure: s.failure, message: s.details });
            },
          );
          return;
        }
        case 'heap':
          return metrics.ingestThreadHeap(thread, m.usedBytes, m.limitBytes);
        case 'load':
          metrics.threadLoopDelay(thread, m.loopDelayMs);
          return options.onLoad?.(m.loopDelayMs);
        case 'listening':
          return resolve(m);
        case 'failed':
          return reject(Object.assign(new Error(m.message), { code: m.code }));
        case 'closed':
          return closed?.();
      }
    });
    worker.once('error', (err) => {
      failAfterStart(err);
      reject(err);
    });
    worker.once('exit', (code) => {
      exited = true;
      if (closing) return closed?.();
      const err = new Error(`ingest thread ${thread} exited (code ${code})`);
      failAfterStart(err);
      reject(err);
    });
  });

  // Set once close() is asked for: the terminate() that ends a clean close exits with code 1, which is not a failure.
  let closing = false;
  const close = () =>
    new Promise<void>((resolve) => {
      if (exited) return resolve();
      closing = true;
      closed = () => {
        closed = undefined;
        void worker.terminate().then(() => resolve());
      };
      send({ type: 'close' });
    });

  try {
    const { port, fd } = await listening;
    started = true;
    return { port, fd, thread: worker, get streams() { return nodeOf.size; }, setTls: (tls) => send({ type: 'tls', ...tls }), setSending: (sending) => send({ type: 'sending', sending }), close };
  } catch (err) {
    await worker.terminate();
    throw err;
  }
}

// Stream ids of the threads: the main thread counts its own from 1, each
// start of an ingest thread gets the next 2^32 above 2^40 (2 million starts fit
// under 2^53). Disjoint across threads and restarts, so a detach from a thread
// that is going away can never end another thread's stream for the same node.
const FIRST_THREAD_STREAM_ID = 2 ** 40;
const STREAM_IDS_PER_START = 2 ** 32;
let threadStarts = 0;
const nextStreamIdBase = () => FIRST_THREAD_STREAM_ID + threadStarts++ * STREAM_IDS_PER_START;

export interface SupervisedIngestOptions extends Omit<IngestWorkerOptions, 'onFailed' | 'thread' | 'shareFd' | 'streamIdBase' | 'onLoad'> {
  /** Threads serving the agent port (default 1). */
  threads?: number;
  /** What is wrong while no thread serves (for /readyz), undefined once one serves again. */
  onDown(reason: string | undefined): void;
  /** The most delayed thread's loop delay (ms), at each thread's report: the load shedder reads it. */
  onLoad?(loopDelayMs: number): void;
  /** First wait before a restart; doubled per failed try up to 30 s. */
  restartDelayMs?: number;
}

export interface IngestThreads extends IngestWorker {
  /** Every thread now serving, by index (undefined while one restarts), with the streams it serves: diagnostics, and tests end one to check what a crash does. */
  readonly threads: ReadonlyArray<{ thread: Worker; streams: number } | undefined>;
}

/**
 * Ingest threads that all accept on one port, each started again if it dies.
 * The first binds the port; the main thread keeps a descriptor of that socket
 * of its own (lib/listener-handle.ts), from which every other thread, and any
 * restarted one, gets a descriptor of its own. So a dying thread closes only
 * its descriptor: the port stays bound and listening, the other threads keep
 * their agents and accept the new connections, including those of the dead
 * thread's agents reconnecting, and connections that arrive while no thread
 * runs wait in the socket's queue. onDown says why only when no thread serves.
 */
export async function startSupervisedIngest(options: SupervisedIngestOptions): Promise<IngestThreads> {
  const count = Math.max(1, Math.floor(options.threads ?? 1));
  const firstDelay = options.restartDelayMs ?? 1000;
  let tls = options.tls;
  // A restarted thread welcomes its agents with what they are told now, not what they were told at start.
  let sending = options.sending;
  let closing = false;
  const retries = new Set<NodeJS.Timeout>();
  const slots: Array<IngestWorker | undefined> = [];
  const delays = new Map<number, number>();
  let shared: ListenerHandle | undefined;
  const down = new Set<number>();
  const report = (why: string) => options.onDown(down.size === count ? `every ingest thread stopped (${why}); restarting` : undefined);
  // --max-connections holds for the port, all threads together: the kernel
  // spreads connections only about evenly, and a share per thread refused
  // agents on the fuller thread while the port was under its cap.
  const limits = options.limits ?? { maxConnections: GATEWAY_DEFAULTS.connections.grpcMaxConnections, handshakeTimeoutMs: GATEWAY_DEFAULTS.connections.handshakeTimeoutMs };
  const counts = new Int32Array(new SharedArrayBuffer(4 * count));
  const start = (i: number, onFailed: (err: Error) => void) =>
    startIngestWorker({
      ...options,
      limits: { ...limits, shared: { counts, slot: i } },
      ...(shared && { shareFd: shared.fd }),
      thread: `ingest-${i}`,
      streamIdBase: nextStreamIdBase(),
      ...(tls && { tls }),
      ...(sending && { sending }),
      onLoad: (ms) => {
        delays.set(i, ms);
        options.onLoad?.(Math.max(...delays.values()));
      },
      onFailed,
    });
  const supervise = (i: number) => (err: Error) => restart(i, err, firstDelay);
  const restart = (i: number, err: Error, delayMs: number) => {
    if (closing) return;
    slots[i] = undefined;
    delays.delete(i);
    down.add(i);
    report(err.message);
    const retry = setTimeout(() => {
      retries.delete(retry);
      start(i, supervise(i)).then(
        (next) => {
          if (closing) return void next.close();
          slots[i] = next;
          down.delete(i);
          options.log.info({ thread: `ingest-${i}`, port: next.port }, 'ingest thread restarted; agents reconnect to it');
          report('');
        },
        (e: Error) => restart(i, e, Math.min(delayMs * 2, 30_000)),
      );
    }, delayMs);
    retries.add(retry);
  };
  const live = () => slots.filter((w): w is IngestWorker => w !== undefined);
  const close = async () => {
    closing = true;
    for (const retry of retries) clearTimeout(retry);
    await Promise.all(live().map((w) => w.close()));
    // Last: the socket stays open while any thread's descriptor does, and this one is the main thread's.
    shared?.close();
  };

  const first = await start(0, supervise(0));
  slots[0] = first;
  try {
    shared = await duplicateListener(first.fd);
    const rest = await Promise.allSettled(Array.from({ length: count - 1 }, (_, k) => start(k + 1, supervise(k + 1))));
    rest.forEach((r, k) => {
      if (r.status === 'fulfilled') slots[k + 1] = r.value;
    });
    const failed = rest.find((r): r is PromiseRejectedResult => r.status === 'rejected');
    if (failed) throw failed.reason;
  } catch (err) {
    await close();
    throw err;
  }
  return {
    port: first.port,
    get streams() {
      return live().reduce((n, w) => n + w.streams, 0);
    },
    get fd() {
      return shared?.fd ?? first.fd;
    },
    get thread() {
      return live()[0]?.thread ?? first.thread;
    },
    get threads() {
      return Array.from({ length: count }, (_, i) => slots[i] && { thread: slots[i].thread, streams: slots[i].streams });
    },
    setTls(next) {
      tls = next;
      for (const w of live()) w.setTls(next);
    },
    setSending(next) {
      sending = next;
      for (const w of live()) w.setSending(next);
    },
    close,
  };
}
