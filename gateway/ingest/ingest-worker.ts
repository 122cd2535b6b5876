// The main thread's side of the ingest thread (ingest-thread.ts): starts it,
// applies what its streams did to the store in order, answers their hellos
// with the store's last seq, reviews their agents' tokens, counts their
// metrics, and starts it again on the same port when it dies.
import type { Sending } from './agent-sending.js';
import type { Worker } from 'node:worker_threads';
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
 * The ingest thread runs at this nice value, the main thread at the process's:
 * under a CPU quota every thread of the gateway competes for the same CPU
 * time, and the agents' TLS and decoding took it from the reviews (no review
 * answered at 10,000 agents in one core). At 10 the kernel weighs the ingest
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
  sending?: Sending;
  /** Settings.shard_copies its agents are told (default 0: every replica). */
  shardCopies?: number;
  /** The thread's own loop delay (ms), every second. */
  onLoad?(loopDelayMs: number): void;
  /** The thread died after it started: its agents are cut off (startSupervisedIngest starts another). */
  onFailed(err: Error): void;
}

export interface IngestWorker {
  port: number;
  /** The thread itself (diagnostics; tests end it to check what a crash does). */
  thread: Worker;
  /** Agent streams the thread serves now (attached and not yet ended). */
  readonly streams: number;
  setTls(tls: { cert: string; key: string }): void;
  /** What agents are told now: every welcomed stream of the thread gets it. */
  setSending(sending: Sending): void;
  close(): Promise<void>;
}

export async function startIngestWorker(options: IngestWorkerOptions): Promise<IngestWorker> {
  const { store, metrics, log } = options;
  const { thread } = options;
  const data: IngestThreadData = {
    bindAddress: options.bindAddress,
    port: options.port,
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
  const { width } = sampleRow();
  const stride = ROW_SAMPLE + width;
  const counted = (result: IngestResult, streamId: number) => {
    metrics.sampleReceived(result);
    if (result === 'not-current-stream') send({ type: 'superseded', streamId });
  };
  // Samples were checked on the thread (sample-check.ts), which counted and logged those it refused.
  const applyOne = (op: IngestOp, figures: Float64Array) => {
    if (op.op === 'sample') {
      const start = op.at + width;
      const pods = op.pods && { names: op.pods.names, key: op.pods.key, figures: figures.subarray(start, start + op.pods.count) };
      counted(store.ingest(op.name, op.streamId, figures, op.at, op.receivedAtMs, pods, op.summaries), op.streamId);
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
        applyOne(op, m.figures);
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
    // Its streams are gone with it: the nodes read as disconnected until their agents reconnect.
    batches.clear();
    for (const [streamId, name] of nodeOf) store.detach(name, streamId);
    nodeOf.clear();
    // The thread runs under the process's --max-old-space-size: a worker's
    // resourceLimits do not apply beside that flag (V8's flag wins).
    const outOfMemory = (err as NodeJS.ErrnoException).code === 'ERR_WORKER_OUT_OF_MEMORY';
    log.error(
      { thread, err: err.message },
      outOfMemory
        ? `ingest thread ${thread} ran out of heap (--max-old-space-size): its agents are cut off and reconnect once it is started again on the same port; raise the gateway's --max-old-space-size and memory limit together`
        : `ingest thread ${thread} stopped: its agents are cut off and reconnect once it is started again on the same port`,
    );
    options.onFailed(err);
  };

  const listening = new Promise<{ port: number }>((resolve, reject) => {
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
    const { port } = await listening;
    started = true;
    return { port, thread: worker, get streams() { return nodeOf.size; }, setTls: (tls) => send({ type: 'tls', ...tls }), setSending: (sending) => send({ type: 'sending', sending }), close };
  } catch (err) {
    await worker.terminate();
    throw err;
  }
}

// Stream ids of the ingest thread: each start of the thread gets the next
// 2^32 above 2^40 (2 million starts fit under 2^53). Disjoint across
// restarts, so a detach from a thread that is going away can never end its
// successor's stream for the same node.
const FIRST_THREAD_STREAM_ID = 2 ** 40;
const STREAM_IDS_PER_START = 2 ** 32;
let threadStarts = 0;
const nextStreamIdBase = () => FIRST_THREAD_STREAM_ID + threadStarts++ * STREAM_IDS_PER_START;

export interface SupervisedIngestOptions extends Omit<IngestWorkerOptions, 'onFailed' | 'thread' | 'streamIdBase'> {
  /** What is wrong while the thread does not serve (for /readyz), undefined once it serves again. */
  onDown(reason: string | undefined): void;
  /** First wait before a restart; doubled per failed try up to 30 s. */
  restartDelayMs?: number;
}

/**
 * The ingest thread, started again if it dies: on the port it first bound,
 * so its agents reconnect where they were. While it restarts nothing listens
 * there and agents back off and retry; onDown says why meanwhile.
 */
export async function startSupervisedIngest(options: SupervisedIngestOptions): Promise<IngestWorker> {
  const firstDelay = options.restartDelayMs ?? 1000;
  let tls = options.tls;
  // A restarted thread welcomes its agents with what they are told now, not what they were told at start.
  let sending = options.sending;
  let closing = false;
  let retry: NodeJS.Timeout | undefined;
  const start = (port: number, onFailed: (err: Error) => void) =>
    startIngestWorker({ ...options, port, thread: 'ingest-0', streamIdBase: nextStreamIdBase(), ...(tls && { tls }), ...(sending && { sending }), onFailed });
  let current: IngestWorker | undefined;
  const restart = (err: Error, delayMs: number) => {
    if (closing) return;
    current = undefined;
    options.onDown(`ingest thread stopped (${err.message}); restarting`);
    retry = setTimeout(() => {
      retry = undefined;
      start(first.port, (e) => restart(e, firstDelay)).then(
        (next) => {
          if (closing) return void next.close();
          current = next;
          options.log.info({ thread: 'ingest-0', port: next.port }, 'ingest thread restarted; agents reconnect to it');
          options.onDown(undefined);
        },
        (e: Error) => restart(e, Math.min(delayMs * 2, 30_000)),
      );
    }, delayMs);
  };
  const first = await start(options.port, (err) => restart(err, firstDelay));
  current = first;
  return {
    port: first.port,
    get streams() {
      return current?.streams ?? 0;
    },
    get thread() {
      return (current ?? first).thread;
    },
    setTls(next) {
      tls = next;
      current?.setTls(next);
    },
    setSending(next) {
      sending = next;
      current?.setSending(next);
    },
    async close() {
      closing = true;
      clearTimeout(retry);
      await current?.close();
    },
  };
}
