// The main thread's side of the ingest thread (ingest-thread.ts): starts it,
// applies what its streams did to the store in order, answers its hellos with
// the store's last seq, reviews its agents' tokens, and counts its metrics.
import type { Worker } from 'node:worker_threads';
import { moduleWorker } from '../../lib/module-worker.js';
import type { Logger } from '../../lib/log.js';
import type { AgentAuthenticator } from '../auth/agent-authenticator.js';
import { authStatus } from '../auth/grpc-status.js';
import type { GatewayMetrics } from '../metrics/metrics.js';
import type { ConnectionLimits } from '../tls/grpc-listener.js';
import { GATEWAY_DEFAULTS } from '../config/defaults.js';
import type { IngestResult, NodeStore } from '../store/node-store.js';
import { sampleRow } from '../../wire/sample-row.js';
import { ROW_RECEIVED_AT_MS, ROW_SAMPLE, ROW_STREAM_ID, type IngestOp, type IngestThreadData, type ToMain, type ToThread } from './ingest-messages.js';

export interface IngestWorkerOptions {
  store: NodeStore;
  metrics: GatewayMetrics;
  log: Logger;
  bindAddress: string;
  /** 0 picks a free port. */
  port: number;
  tls?: { cert: string; key: string };
  authenticate?: AgentAuthenticator;
  maxReceiveMessageBytes: number;
  /** Connections the agent port holds at once, and how long one may stay silent (default: the gRPC port's). */
  limits?: ConnectionLimits;
  /** What the agents are told about batches (default AGENT_SENDING). */
  sending?: { maxBatchSamples: number; sendEveryMs: number };
  /** The thread's own loop delay (ms), every second. */
  onLoad?(loopDelayMs: number): void;
  /** The thread died after it started: its agents are cut off (startSupervisedIngest starts another). */
  onFailed(err: Error): void;
}

export interface IngestWorker {
  port: number;
  /** The thread itself (diagnostics; tests end it to check what a crash does). */
  thread: Worker;
  setTls(tls: { cert: string; key: string }): void;
  /** What agents are told now: every welcomed stream of the thread gets it. */
  setSending(sending: { maxBatchSamples: number; sendEveryMs: number }): void;
  close(): Promise<void>;
}

export async function startIngestWorker(options: IngestWorkerOptions): Promise<IngestWorker> {
  const { store, metrics, log } = options;
  const data: IngestThreadData = {
    bindAddress: options.bindAddress,
    port: options.port,
    logLevel: log.level,
    ...(options.tls && { tls: options.tls }),
    authenticate: options.authenticate !== undefined,
    maxReceiveMessageBytes: options.maxReceiveMessageBytes,
    ...(options.sending && { sending: options.sending }),
    limits: options.limits ?? { maxConnections: GATEWAY_DEFAULTS.connections.grpcMaxConnections, handshakeTimeoutMs: GATEWAY_DEFAULTS.connections.handshakeTimeoutMs },
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
  const apply = (m: Extract<ToMain, { type: 'ops' }>) => {
    const rows = m.rows;
    const total = rows.length / stride;
    let next = 0;
    const applyRowsUntil = (end: number) => {
      for (; next < end; next++) {
        // One bad sample costs itself, never the batch or the gateway.
        try {
          applyRow(rows, next * stride);
        } catch (err) {
          log.error({ stream: rows[next * stride + ROW_STREAM_ID], err: (err as Error).message }, 'an agent stream\'s sample could not be applied to the store; dropped');
        }
      }
    };
    for (const op of m.ops) {
      applyRowsUntil(op.after);
      try {
        applyOne(op);
      } catch (err) {
        log.error({ node: op.name, op: op.op, err: (err as Error).message }, 'an agent stream\'s message could not be applied to the store; dropped');
        // The stream waits for its welcome: tell it, so it ends and the agent reconnects.
        if (op.op === 'attach') send({ type: 'attached', id: op.id, error: (err as Error).message });
      }
    }
    applyRowsUntil(total);
    for (const [kind, what, n] of m.counts) {
      for (let i = 0; i < n; i++) {
        if (kind === 'sample') metrics.sampleReceived(what as Parameters<GatewayMetrics['sampleReceived']>[0]);
        else if (kind === 'connection') metrics.connectionRefused('agent', what as Parameters<GatewayMetrics['connectionRefused']>[1]);
        else metrics.authRefused('agent-stream', what);
      }
    }
  };

  let started = false;
  let failed = false;
  let exited = false;
  const failAfterStart = (err: Error) => {
    if (!started || failed) return;
    failed = true;
    // The thread runs under the process's --max-old-space-size: a worker's
    // resourceLimits do not apply beside that flag (V8's flag wins).
    const outOfMemory = (err as NodeJS.ErrnoException).code === 'ERR_WORKER_OUT_OF_MEMORY';
    log.error(
      { err: err.message },
      outOfMemory
        ? 'the ingest thread ran out of heap (--max-old-space-size): agents on the agent port are cut off until it serves again; raise the gateway\'s --max-old-space-size and memory limit together'
        : 'the ingest thread stopped: agents on the agent port are cut off until it serves again',
    );
    options.onFailed(err);
  };

  const listening = new Promise<number>((resolve, reject) => {
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
          return metrics.ingestThreadHeap(m.usedBytes, m.limitBytes);
        case 'load':
          return options.onLoad?.(m.loopDelayMs);
        case 'listening':
          return resolve(m.port);
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
      const err = new Error(`the ingest thread exited (code ${code})`);
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
    const port = await listening;
    started = true;
    return { port, thread: worker, setTls: (tls) => send({ type: 'tls', ...tls }), setSending: (sending) => send({ type: 'sending', sending }), close };
  } catch (err) {
    await worker.terminate();
    throw err;
  }
}

export interface SupervisedIngestOptions extends Omit<IngestWorkerOptions, 'onFailed'> {
  /** What is wrong while the thread is down (for /readyz), undefined once it serves again. */
  onDown(reason: string | undefined): void;
  /** First wait before a restart; doubled per failed try up to 30 s. */
  restartDelayMs?: number;
}

/**
 * An ingest thread that is started again, on the same port, if it dies: its
 * agents reconnect with their backoff and the store never went away. While it
 * is down, onDown says why.
 */
export async function startSupervisedIngest(options: SupervisedIngestOptions): Promise<IngestWorker> {
  const firstDelay = options.restartDelayMs ?? 1000;
  let tls = options.tls;
  // A restarted thread welcomes its agents with what they are told now, not what they were told at start.
  let sending = options.sending;
  let closing = false;
  let retry: NodeJS.Timeout | undefined;
  let current: IngestWorker;
  const start = (port: number) => startIngestWorker({ ...options, port, ...(tls && { tls }), ...(sending && { sending }), onFailed: (err) => restart(err, firstDelay) });
  const restart = (err: Error, delayMs: number) => {
    if (closing) return;
    options.onDown(`the ingest thread stopped (${err.message}); restarting it`);
    retry = setTimeout(() => {
      start(current.port).then(
        (next) => {
          current = next;
          if (closing) return void next.close();
          options.log.info({ port: next.port }, 'ingest thread restarted; agents reconnect to it');
          options.onDown(undefined);
        },
        (e: Error) => restart(e, Math.min(delayMs * 2, 30_000)),
      );
    }, delayMs);
  };
  current = await start(options.port);
  return {
    get port() {
      return current.port;
    },
    get thread() {
      return current.thread;
    },
    setTls(next) {
      tls = next;
      current.setTls(next);
    },
    setSending(next) {
      sending = next;
      current.setSending(next);
    },
    async close() {
      closing = true;
      clearTimeout(retry);
      await current.close();
    },
  };
}
