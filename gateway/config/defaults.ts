// The gateway's defaults, where flags, loadConfig and test gateways read them.
export const GATEWAY_DEFAULTS = {
  bindAddress: '0.0.0.0',
  webhookPort: 8443,
  grpcPort: 50051,
  /** Agent streams, on a thread of their own. */
  agentPort: 50052,
  metricsPort: 9090,
  /** metrics.k8s.io (--metrics-api on): metrics-server's own secure port in its manifests. */
  metricsApiPort: 4443,
  forgetAfterMs: 600_000,
  bodyLimitBytes: 4 * 1024 * 1024,
  /**
   * Per listener. gRPC: 10,000 agents per replica (docs/install.md) with
   * room for a reconnect overlap and query callers. The webhook: the API
   * servers open one HTTP/1.1 connection per review in flight, 1,000 reviews/s
   * (10,000 nodes) waiting 2 s is 2,000. 10 s to finish TLS and speak: a
   * handshake is one round trip and a few milliseconds of CPU.
   */
  connections: { grpcMaxConnections: 20_000, webhookMaxConnections: 4_000, webhookBacklog: 64, handshakeTimeoutMs: 10_000 },
  /**
   * After SIGTERM, answering on with /readyz failing: the EndpointSlice drops
   * a terminating pod at once, but kube-proxy and the API server's own view
   * follow a second or more later, and until then reviews still arrive.
   */
  shutdownDrainMs: 5_000,
};

/** Agents send batches of up to 10 samples, every 5 s at the latest: a fifth of the messages, a rise as fast as before. */
export const AGENT_SENDING = { maxBatchSamples: 10, sendEveryMs: 5000 };

/**
 * With summaries (--agent-summaries, on by default) agents send every 20 s: a
 * message is most of what an agent costs the gateway, and 20 s leaves one
 * lost message of margin under the default staleAfter (40 s).
 */
export const SUMMARY_SEND_EVERY_MS = 20_000;

/**
 * Load shedding: a thread whose event loop runs 50 ms late (99th percentile
 * over a second; a review waits that long) is overloaded, agents are then told
 * to send at most every 20 s: half the default staleAfter (40 s), so a steady
 * node's data stays fresh enough to inflate from.
 */
export const SHEDDING = { loopDelayMs: 50, maxSendEveryMs: 20_000, maxSampleEveryMs: 4_000 };
