// AgentStream.Report on the gateway: validates each agent stream and hands its
// samples to the store. A broken or hostile stream ends with a gRPC status; it
// never throws into the server.
//
// Nothing of a stream is read before it is accepted (its token reviewed, and
// then its hello attached to the store): grpc-js takes a message off the
// HTTP/2 stream, and decodes it, only when the stream is read, and readGate()
// holds the reads back until then. The client's bytes wait in the HTTP/2
// stream, which takes at most its flow-control window (65,535 bytes: Node's
// default, which grpc-js keeps) before the client has to wait; they are
// decoded once the stream is accepted, in order. So a stream whose token is
// under review holds at most 64 KiB, undecoded, however much its client
// sends, and at most MAX_UNREVIEWED_STREAMS of them wait at once (issue 43:
// six streams of forged tokens sending 4 MiB messages took the heap from 54
// to 206 MiB while the API server took 2 s to answer).
import type { Readable } from 'node:stream';
import * as grpc from '@grpc/grpc-js';
import type { AgentMessage__Output } from '../../proto/gen/oversell/v1/AgentMessage.js';
import type { Sample__Output } from '../../proto/gen/oversell/v1/Sample.js';
import type { AgentStreamHandlers } from '../../proto/gen/oversell/v1/AgentStream.js';
import type { GatewayMessage } from '../../proto/gen/oversell/v1/GatewayMessage.js';
import type { Logger } from '../../lib/log.js';
import type { GatewayMetrics } from '../metrics/metrics.js';
import type { HostFacts__Output } from '../../proto/gen/oversell/v1/HostFacts.js';
import type { IngestResult, NodeStore } from '../store/node-store.js';
import { sampleRow } from '../../wire/sample-row.js';
import { TokenBucket } from '../../lib/token-bucket.js';
import { AGENT_SENDING } from '../config/defaults.js';
import { AgentSending, type Sending } from './agent-sending.js';
import { MAX_BATCH_SAMPLES } from './shed.js';
import type { AgentAuthenticator, AgentPrincipal } from '../auth/agent-authenticator.js';
import { authStatus } from '../auth/grpc-status.js';
import { checkHello, checkSample, isRefused, refusalLog, type SampleRefused } from '../store/sample-check.js';
import { SUMMARY_ACK_EVERY_MS, SUMMARY_ACK_EVERY_READER_MS, summariesFromWire } from '../../wire/usage-summary.js';
import type { PodUsage__Output } from '../../proto/gen/oversell/v1/PodUsage.js';
import type { AgentSummary } from '../../lib/usage/summary-plan.js';

/** The longest delay setTimeout honours. */
const MAX_TIMER_MS = 2 ** 31 - 1;

/**
 * Where a stream's hello and samples go: a link on the ingest thread that
 * forwards them to the store on the main thread in batches (ingest-thread.ts).
 */
export interface IngestTarget {
  /**
   * Resolves to the last seq stored for this agent instance: the store on
   * the main thread answers. superseded: called if the store later refuses
   * this stream's samples because a newer stream reports for the node (the
   * link learns it late).
   */
  attach(name: string, instanceId: string, host: HostFacts__Output | null, streamId: number, superseded: () => void): Promise<number>;
  /**
   * Stores a sample the service checked, as NodeStore.ingest() does: its row
   * of numbers, the pods it carried (decoded), its summaries. onBeat: a
   * summary its agent sent on its steady beat (Sample.on_beat), which may
   * reach the store later than one sent at once.
   */
  ingest(name: string, streamId: number, rows: Float64Array, at: number, nowMs: number, pods?: PodReport, summaries?: readonly AgentSummary[], onBeat?: boolean): IngestResult;
  /** Takes a refused sample's seq as received (NodeStore.consume). */
  consume: NodeStore['consume'];
  detach: NodeStore['detach'];
}

/** A sample's pods; namesAsBefore: sent without names, as the stream's last named report's (Sample.pod_names_as_before). */
export interface PodReport {
  pods: readonly PodUsage__Output[];
  namesAsBefore: boolean;
}

export interface AgentStreamServiceOptions {
  store: IngestTarget;
  metrics: Pick<GatewayMetrics, 'authRefused' | 'sampleReceived'>;
  log: Logger;
  /** Acknowledge every Nth stored or refused sample. */
  ackEvery?: number;
  /**
   * Per-stream sample rate limit (samples/s, with a burst for replays after a
   * reconnect). A flooding agent's excess is dropped and counted, never stored.
   */
  maxSamplesPerSecond?: number;
  replayBurst?: number;
  /** Without it every stream may report for any node (local mode; docs/security.md). */
  authenticate?: AgentAuthenticator;
  now?: () => number;
  /** Stream ids unique among every run of the thread writing to one store (ingest-worker.ts). */
  nextStreamId: () => number;
  /**
   * What the welcome announces: batches of at most maxBatchSamples, each
   * sample waiting at most sendEveryMs (rises are sent at once).
   * maxBatchSamples 0: no batches, as a gateway older than them. A change
   * goes to every welcomed stream as a Settings message. Default: AGENT_SENDING, fixed.
   */
  sending?: AgentSending;
  /** Settings.shard_copies, in every welcome and settings message: 0 (default), agents stream to every replica. */
  shardCopies?: number;
  /** Streams whose token is under review at once, at most (default MAX_UNREVIEWED_STREAMS). */
  maxUnreviewedStreams?: number;
}

/**
 * Streams of one service (one thread: the main thread's, each ingest
 * thread's) whose token is under review at once, at most; one more is refused
 * at once (UNAVAILABLE, counted as a throttled refusal), before any review.
 * Each holds at most the HTTP/2 window, 64 KiB, unread: at most 16 MiB
 * together. Reviews in flight are fewer (--token-reviews-in-flight, 20 by
 * default; the others are refused as throttled at once) and a cached token
 * is answered at once; the rest are streams sharing one token's review, or
 * waiting for the lookup of their pod's node.
 */
export const MAX_UNREVIEWED_STREAMS = 256;

/** What a stream's client may send before its stream is read: Node's HTTP/2 stream window, which grpc-js keeps. */
export const UNREAD_BYTES_PER_STREAM = 65_535;

// Messages held per stream while its reads are held back. None in practice:
// grpc-js delivers a message only for a read the gate let through, one per
// read, and the gate closes while handling the message that closes it (the
// hello); this bounds what a grpc-js that read ahead could leave.
const WAIT_LIMIT = 16;

// RFC 1123 DNS subdomain, as Kubernetes requires of node names.
const NODE_NAME = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;

export function isValidNodeName(name: string): boolean {
  return name.length > 0 && name.length <= 253 && NODE_NAME.test(name);
}

/**
 * Holds back a stream's reads while closed: grpc-js takes the next message
 * off the HTTP/2 stream only when the stream's _read asks for it (the call's
 * startRead), one message per ask. Closed, the gate keeps the ask and passes
 * it on when it opens.
 */
export function readGate(stream: Readable): { open(): void; close(): void } {
  const read = stream._read;
  let isOpen = false;
  let asked: number | undefined;
  stream._read = function gatedRead(this: Readable, size: number) {
    if (isOpen) read.call(this, size);
    else asked = size;
  };
  return {
    open() {
      isOpen = true;
      if (asked === undefined) return;
      const size = asked;
      asked = undefined;
      read.call(stream, size);
    },
    close() {
      isOpen = false;
    },
  };
}


export function agentStreamService(options: AgentStreamServiceOptions): AgentStreamHandlers {
  const { store, metrics, log } = options;
  const logRefusal = refusalLog(log);
  const { nextStreamId } = options;
  const ackEvery = options.ackEvery ?? 5;
  const now = options.now ?? Date.now;
  const rate = options.maxSamplesPerSecond ?? 10;
  const burst = options.replayBurst ?? 200;
  const sending = options.sending ?? new AgentSending(AGENT_SENDING);
  const shardCopies = options.shardCopies ?? 0;
  const maxUnreviewed = options.maxUnreviewedStreams ?? MAX_UNREVIEWED_STREAMS;
  // Each sample is written here, checked here and handed on from here: the store copies it.
  const row = new Float64Array(sampleRow().width);
  /** This service's streams whose token is under review now. */
  let unreviewed = 0;

  return {
    Report(call: grpc.ServerDuplexStream<AgentMessage__Output, GatewayMessage>) {
      const streamId = nextStreamId();
      const peer = call.getPeer();
      let node: string | undefined;
      let sinceAck = 0;
      let lastAckAtMs = -Infinity;
      let summaryAckEveryMs = SUMMARY_ACK_EVERY_MS;
      let ended = false;
      const bucket = new TokenBucket(rate, burst, now);
      let principal: AgentPrincipal | undefined;
      let expiryTimer: NodeJS.Timeout | undefined;
      let unfollow: (() => void) | undefined;
      let closed = false;
      // Nothing is read while the token is under review or the hello is being
      // attached (on another thread): the client's messages wait unread in the
      // HTTP/2 stream. A message already read when the gate closed waits here.
      const gate = readGate(call);
      let waiting: AgentMessage__Output[] | undefined;
      const resume = () => {
        const queued = waiting ?? [];
        waiting = undefined;
        for (const msg of queued) onMessage(msg);
        if (!ended && !closed && waiting === undefined) gate.open();
      };

      const fail = (code: grpc.status, details: string) => {
        if (ended) return;
        ended = true;
        log.warn({ peer, node, code: grpc.status[code], details }, 'agent stream refused');
        clearTimeout(expiryTimer);
        unfollow?.();
        call.emit('error', { code, details });
      };

      const supersede = () => fail(grpc.status.ABORTED, `a newer stream reports for node ${node}; this one is closed`);

      const refuse = (reason: string, code: grpc.status, details: string) => {
        metrics.authRefused('agent-stream', reason);
        fail(code, details);
      };

      let reviewing = false;
      const reviewed = () => {
        if (!reviewing) return;
        reviewing = false;
        unreviewed -= 1;
      };
      if (options.authenticate) {
        if (unreviewed >= maxUnreviewed) {
          // Before any review: the budget of streams waiting for one is spent, as the review budget may be.
          return refuse('throttled', grpc.status.UNAVAILABLE, `${unreviewed} agent streams already wait for their token review on this gateway thread (at most ${maxUnreviewed}); retry in a few seconds (agents do so on their own)`);
        }
        unreviewed += 1;
        reviewing = true;
        waiting = [];
        options.authenticate(call.metadata.get('authorization')[0]).then(
          (p) => {
            reviewed();
            if (ended || closed) return;
            principal = p;
            if (p.expiresAtMs !== undefined) {
              // The stream lives as long as its token: the agent reconnects with the refreshed one.
              // A timer fires after at most 2^31-1 ms (Node fires a longer one at once): re-arm until exp.
              const expiresAtMs = p.expiresAtMs;
              const arm = () => {
                const left = expiresAtMs - now();
                if (left > MAX_TIMER_MS) expiryTimer = setTimeout(arm, MAX_TIMER_MS);
                else expiryTimer = setTimeout(() => refuse('expired', grpc.status.UNAUTHENTICATED, 'token expired; reconnect with the refreshed token'), Math.max(0, left));
                expiryTimer.unref();
              };
              arm();
            }
            resume();
          },
          (err: unknown) => {
            reviewed();
            const s = authStatus(err);
            refuse(s.failure, s.code, s.details);
          },
        );
      }

      const onMessage = (msg: AgentMessage__Output) => {
        if (ended) return;
        if (waiting) {
          if (waiting.length >= WAIT_LIMIT) return fail(grpc.status.RESOURCE_EXHAUSTED, `${WAIT_LIMIT} messages sent before the stream was accepted (token review or hello pending); wait for welcome`);
          waiting.push(msg);
          return;
        }
        if (msg.hello) {
          if (node !== undefined) return fail(grpc.status.INVALID_ARGUMENT, 'hello sent twice on one stream');
          const { nodeName, instanceId } = msg.hello;
          if (!isValidNodeName(nodeName)) {
            return fail(grpc.status.INVALID_ARGUMENT, `node name ${JSON.stringify(nodeName.slice(0, 300))} is not a valid Kubernetes node name`);
          }
          if (!instanceId) return fail(grpc.status.INVALID_ARGUMENT, 'hello.instance_id is empty');
          // Its strings are kept for as long as the node is, and sent with every query of it.
          const tooLong = checkHello(msg.hello);
          if (tooLong) return fail(grpc.status.INVALID_ARGUMENT, `${tooLong}: no host has strings this long (docs/security.md, sane agent data); an agent of this version cuts them`);
          if (principal && principal.node !== nodeName) {
            return refuse('node-mismatch', grpc.status.PERMISSION_DENIED, `${principal.subject} runs on node ${principal.node} and may not report for node ${nodeName}`);
          }
          node = nodeName;
          const { agentVersion } = msg.hello;
          // An agent that reads the interval is acknowledged less often; an older one waits for an ack every 30 s.
          summaryAckEveryMs = msg.hello.readsSummaryAckEvery ? SUMMARY_ACK_EVERY_READER_MS : SUMMARY_ACK_EVERY_MS;
          const settingsOf = (s: Sending) => ({
            sampleIntervalMs: 0, podReportEvery: 0, maxBatchSamples: s.maxBatchSamples, sendEveryMs: s.sendEveryMs, minSampleIntervalMs: s.minSampleIntervalMs ?? 0, shardCopies,
            summaryPlans: [...(s.summaryPlans ?? [])],
            summaryAckEveryMs: msg.hello!.readsSummaryAckEvery ? summaryAckEveryMs : 0,
            takesPodNamesAsBefore: true,
          });
          const welcome = (lastSeq: number) => {
            log.info({ node, peer, instanceId, lastSeq, agentVersion }, 'agent connected');
            call.write({ welcome: { lastSeq, settings: settingsOf(sending.current) } });
            // After the welcome: a stream hears a change only once it knows the first value.
            unfollow = sending.follow((s) => {
              if (!ended) call.write({ settings: settingsOf(s) });
            });
          };
          // Nothing more is read until the store has the stream.
          gate.close();
          waiting = [];
          store.attach(nodeName, instanceId, msg.hello.host, streamId, supersede).then(
            (lastSeq) => {
              if (ended) return;
              welcome(lastSeq);
              resume();
            },
            (err: unknown) => fail(grpc.status.UNAVAILABLE, `the gateway could not register the stream: ${(err as Error).message}; reconnect`),
          );
          return;
        }
        if (msg.sample || msg.batch) {
          if (node === undefined) return fail(grpc.status.FAILED_PRECONDITION, 'sample before hello; send hello first');
          const samples = msg.sample ? [msg.sample] : msg.batch!.samples;
          // A batch larger than this is refused whatever was announced: it would hold the thread.
          if (samples.length > MAX_BATCH_SAMPLES) return fail(grpc.status.INVALID_ARGUMENT, `a batch of ${samples.length} samples; at most ${MAX_BATCH_SAMPLES}`);
          const receivedAtMs = now();
          let lastTaken = 0;
          for (const sample of samples) {
            const result = take(node, sample, receivedAtMs);
            if (result === 'not-current-stream') return supersede();
            if (result !== undefined) lastTaken = sample.seq;
          }
          // A batch is acknowledged as a whole: its samples were sent together and are dropped together.
          // A summarized sample comes every send_every_ms: acknowledged often enough that the agent never takes the stream for silent.
          const summarized = (msg.sample?.summaries.length ?? 0) > 0 && receivedAtMs - lastAckAtMs >= summaryAckEveryMs;
          if (lastTaken > 0 && (sinceAck >= ackEvery || samples.length > 1 || summarized)) {
            sinceAck = 0;
            lastAckAtMs = receivedAtMs;
            call.write({ ack: { lastSeq: lastTaken } });
          }
        }
      };
      /** One sample into the store: what became of it, or undefined when the stream's rate was exceeded. */
      const take = (node: string, sample: Sample__Output, receivedAtMs: number): IngestResult | SampleRefused | undefined => {
        if (!bucket.take()) {
          metrics.sampleReceived('rate-limited');
          return undefined;
        }
        const refused = checkSample(sample, receivedAtMs, row, 0);
        let result: IngestResult | SampleRefused;
        if (refused) {
          const consumed = store.consume(node, streamId, sample.seq);
          result = consumed === 'consumed' ? `refused-${refused}` : consumed;
        } else {
          const summaries = sample.summaries.length > 0 ? summariesFromWire(sample.summaries, sample.timestampMs) : undefined;
          const pods = sample.pods.length > 0 ? { pods: sample.pods, namesAsBefore: sample.podNamesAsBefore } : undefined;
          result = store.ingest(node, streamId, row, 0, receivedAtMs, pods, summaries, summaries !== undefined && sample.onBeat);
        }
        metrics.sampleReceived(result);
        // A refused sample is acknowledged like a stored one: the agent drops
        // it, and an agent whose every sample is refused still hears from the
        // gateway instead of reconnecting and replaying them.
        if (isRefused(result)) logRefusal(node, result);
        if (result === 'stored' || isRefused(result)) {
          sinceAck += 1;
          return result;
        }
        return result === 'not-current-stream' ? result : undefined;
      };
      call.on('data', onMessage);
      // Without a review, the stream is read at once (local mode).
      if (!options.authenticate) resume();

      const close = () => {
        closed = true;
        reviewed();
        clearTimeout(expiryTimer);
        unfollow?.();
        if (node !== undefined) {
          store.detach(node, streamId);
          log.info({ node, peer }, 'agent disconnected');
          node = undefined;
        }
      };
      call.on('end', () => {
        close();
        if (!ended) {
          ended = true;
          call.end();
        }
      });
      call.on('cancelled', close);
      call.on('error', close);
      call.on('close', close);
    },
  };
}
