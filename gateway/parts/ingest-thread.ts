// The agent port's ingest thread as a part of the gateway (lib/lifecycle.ts).
import type { Sending } from '../ingest/agent-sending.js';
import { startSupervisedIngest, type IngestWorker } from '../ingest/ingest-worker.js';
import { type Shared, MAX_RECEIVE_MESSAGE_BYTES } from './shared.js';

/** Agent streams on their own port, decoded by the ingest thread (--agent-port). */
export function ingestThreadPart(s: Shared, agentPort: number, onDown: (reason: string | undefined) => void, onLoad: (loopDelayMs: number) => void) {
  const { options } = s;
  let worker: IngestWorker | undefined;
  return {
    name: 'ingest thread',
    get port() {
      return worker?.port;
    },
    setTls: (tls: { cert: string; key: string }) => worker?.setTls(tls),
    setSending: (sending: Sending) => worker?.setSending(sending),
    async start() {
      worker = await startSupervisedIngest({
        store: s.store, metrics: s.metrics, log: s.log, bindAddress: options.bindAddress, port: agentPort, maxReceiveMessageBytes: MAX_RECEIVE_MESSAGE_BYTES,
        ...(options.ingestNice !== undefined && { nice: options.ingestNice }),
        ...(options.grpcTls && { tls: options.tls }),
        limits: { maxConnections: s.connections.grpcMaxConnections, handshakeTimeoutMs: s.connections.handshakeTimeoutMs },
        streams: s.streamLimits,
        ...(options.auth?.agents && { authenticate: options.auth.agents }),
        sending: s.agentSending(),
        shardCopies: options.shard?.copies ?? 0,
        onDown,
        onLoad,
      });
    },
    close: () => worker?.close(),
  };
}
