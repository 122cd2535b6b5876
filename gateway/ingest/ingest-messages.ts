// What the ingest thread and the main thread say to each other. Only plain
// data crosses, in batches: a decoded sample as a row of the batch's numbers
// (wire/sample-row.ts) behind its stream id and arrival time, or, when it
// carries pods or summaries, an op whose row and pod figures are numbers too.
import type { Sending } from './agent-sending.js';
import type { AgentSummary } from '../../lib/usage/summary-plan.js';
import type { HostFacts__Output } from '../../proto/gen/oversell/v1/HostFacts.js';
import type { PodNames } from '../../wire/pod-figures.js';
import type { AgentPrincipal } from '../auth/agent-authenticator.js';
import type { AuthFailure } from '../auth/identity.js';
import type { SampleRefused } from '../store/sample-check.js';
import type { ConnectionLimits, ConnectionRefusal } from '../tls/grpc-listener.js';
import type { StreamLimits, StreamRefusal } from '../tls/stream-guard.js';

export interface IngestThreadData {
  bindAddress: string;
  port: number;
  /** This thread's name in logs and metrics (ingest-0). */
  thread: string;
  /** The thread's own nice value: above the main thread's, so reviews run first when CPU is short. */
  nice: number;
  /** The thread's stream ids count up from here: no earlier run of it, nor the main thread, uses its range. */
  streamIdBase: number;
  logLevel: string;
  /** Serve over TLS with this certificate (updated later with a 'tls' message). */
  tls?: { cert: string; key: string };
  /** Agents must present a token, reviewed on the main thread. */
  authenticate: boolean;
  maxReceiveMessageBytes: number;
  /** Connections the agent port holds at once, and how long one may stay silent. */
  limits: ConnectionLimits;
  /** Streams of the other services (health) per connection and per thread, and how long any stream may go unread. */
  streams: StreamLimits;
  /** What the agents are told about batches (default AGENT_SENDING). */
  sending?: Sending;
  shardCopies: number;
}

/**
 * One thing a stream did other than a sample that crossed as a row. `after`:
 * how many of the batch's rows came before it, so the main thread applies
 * rows and ops in the order the streams did them.
 */
export type IngestOp =
  | { op: 'attach'; after: number; id: number; name: string; instanceId: string; host: HostFacts__Output | null; streamId: number }
  /**
   * A sample with pods or summaries: its row at `at` in the batch's `figures`,
   * followed there by its pods' `count` figures when it carried pods (named
   * by `names`, wire/pod-figures.ts).
   */
  | { op: 'sample'; after: number; name: string; streamId: number; at: number; pods?: PodNames & { count: number }; summaries?: readonly AgentSummary[]; receivedAtMs: number }
  | { op: 'detach'; after: number; name: string; streamId: number }
  /** A sample the thread refused (sample-check.ts): the store takes its seq as received. */
  | { op: 'consume'; after: number; name: string; streamId: number; seq: number };

/** A batch row: the stream id (the main thread knows its node from the attach), arrival time, then the sample's row. */
export const ROW_STREAM_ID = 0;
export const ROW_RECEIVED_AT_MS = 1;
export const ROW_SAMPLE = 2;

export type MetricCount = [kind: 'sample', result: 'duplicate' | 'not-current-stream' | 'unknown-node' | 'rate-limited' | SampleRefused, n: number] | [kind: 'auth', reason: string, n: number] | [kind: 'connection', reason: ConnectionRefusal, n: number] | [kind: 'stream-refused', reason: StreamRefusal, n: number] | [kind: 'stream-ended', service: string, n: number];

export type ToMain =
  | { type: 'listening'; port: number }
  | { type: 'failed'; message: string; code: string | undefined }
  /** Samples as rows (ROW_SAMPLE + sampleRow().width numbers each), checked by the thread; the numbers of the samples that cross as ops; the other ops; and what the thread counted itself: samples refused or dropped there, refused tokens. Both arrays are transferred. */
  | { type: 'ops'; rows: Float64Array; figures: Float64Array; ops: IngestOp[]; counts: MetricCount[] }
  | { type: 'authenticate'; id: number; authorization: unknown }
  /** The thread's V8 heap, at start and every few seconds (for /metrics). */
  | { type: 'heap'; usedBytes: number; limitBytes: number }
  /** How late the thread's own event loop ran over the last second (ms, 99th percentile): the load shedder reads it. */
  | { type: 'load'; loopDelayMs: number }
  | { type: 'closed' };

export type ToThread =
  | { type: 'attached'; id: number; lastSeq: number }
  /** The store could not take the hello: the stream ends with UNAVAILABLE and the agent reconnects. */
  | { type: 'attached'; id: number; error: string }
  /** The store refused a sample: a newer stream reports for the node. */
  | { type: 'superseded'; streamId: number }
  | { type: 'authenticated'; id: number; principal: AgentPrincipal }
  | { type: 'authenticated'; id: number; failure: AuthFailure; message: string }
  | { type: 'tls'; cert: string; key: string }
  /** What agents are told now (load shedding): every welcomed stream gets it as Settings. */
  | { type: 'sending'; sending: Sending }
  | { type: 'close' };
