// The query API's view of the other replicas when the gateway shards
// (query/peer-nodes.ts): a get asks the node's owners best first, a list asks
// every other replica at once, each within one deadline, over HTTPS between
// replicas (peer-client.ts, peer-plugin.ts). A replica that does not answer
// in time is named in `failed`; the caller answers with the rest.
import type { NodeStatus } from '../../proto/gen/oversell/v1/NodeStatus.js';
import type { NodeSummaries__Output } from '../../proto/gen/oversell/v1/NodeSummaries.js';
import type { NodeFilterRequest } from '../query/local-nodes.js';
import type { MetricsQuery } from '../metrics-api/metrics-reader.js';
import type { NodeMetrics, PodMetrics } from '../metrics-api/resource-metrics.js';
import type { FromPeers, PeerNodes, PeerWatch, PeerWatchHandlers } from '../query/peer-nodes.js';
import type { PeerClient, PeerStream } from './peer-client.js';
import { PEER_PATHS, type PeerRequest } from './peer-plugin.js';
import { decodeNodes, decodeSummaries, EventFrames } from './peer-wire.js';
import { FORWARDED_BY } from './review-forwarder.js';
import type { ShardMember, ShardView } from './shard-view.js';

/** How soon a replica's watch stream that failed is opened again, while the replica is listed. */
const WATCH_RETRY_MS = 1000;

export class PeerQueries implements PeerNodes {
  constructor(
    private readonly view: ShardView,
    private readonly client: PeerClient,
    /** This replica's name, in each request's FORWARDED_BY header (the peer's logs). */
    private readonly identity: string,
    /** For all the peers asked by one call together. */
    private readonly deadlineMs: number,
  ) {}

  owners(node: string): string[] {
    return this.view.forwardTo(node).map((m) => m.key);
  }

  async get(node: string): Promise<FromPeers<NodeStatus>> {
    const until = Date.now() + this.deadlineMs;
    const failed: string[] = [];
    for (const owner of this.view.forwardTo(node)) {
      const left = until - Date.now();
      if (left <= 0) {
        failed.push(`${owner.webhook}: not asked, the ${this.deadlineMs} ms were spent`);
        continue;
      }
      try {
        const [status] = decodeNodes(await this.#ask(owner, PEER_PATHS.nodes, { labelSelector: '', policy: '', names: [node] }, left));
        if (status) return { answers: [status], failed };
      } catch (err) {
        failed.push(`${owner.webhook}: ${(err as Error).message}`);
      }
    }
    return { answers: [], failed };
  }

  list(request: NodeFilterRequest): Promise<FromPeers<NodeStatus[]>> {
    return this.#all(PEER_PATHS.nodes, { labelSelector: request.labelSelector, policy: request.policy }, decodeNodes);
  }

  summaries(request: NodeFilterRequest): Promise<FromPeers<NodeSummaries__Output>> {
    return this.#all(PEER_PATHS.summaries, { labelSelector: request.labelSelector, policy: request.policy }, decodeSummaries);
  }

  /** metrics.k8s.io's answer at every other replica: the items each finds for `query`. */
  metrics(query: MetricsQuery): Promise<FromPeers<Array<NodeMetrics | PodMetrics>>> {
    return this.#all(PEER_PATHS.metrics, query, (bytes) => (JSON.parse(bytes.toString()) as { items: Array<NodeMetrics | PodMetrics> }).items);
  }

  streams(node: string): boolean {
    return this.view.streams(node);
  }

  onMembersChange(listener: () => void): () => void {
    return this.view.onChange(listener);
  }

  watch(request: NodeFilterRequest, handlers: PeerWatchHandlers): PeerWatch {
    const body = Buffer.from(JSON.stringify({ labelSelector: request.labelSelector, policy: request.policy } satisfies PeerRequest));
    const headers = { 'content-type': 'application/json', [FORWARDED_BY]: this.identity };
    const open = new Map<string, PeerStream>();
    const retrying = new Map<string, NodeJS.Timeout>();
    let paused = false;
    let closed = false;
    const listed = (webhook: string) => this.view.others().some((m) => m.webhook === webhook);
    const start = (webhook: string) => {
      const frames = new EventFrames();
      const stream = this.client.stream(webhook, PEER_PATHS.watch, body, {
        headers,
        onData: (chunk) => {
          if (closed || open.get(webhook) !== stream) return;
          let events;
          try {
            events = frames.push(chunk);
          } catch (err) {
            failed(stream, webhook, (err as Error).message);
            return stream.close();
          }
          for (const event of events) handlers.event(webhook, event);
        },
        onEnd: (err) => failed(stream, webhook, err?.message ?? 'the stream ended'),
      });
      open.set(webhook, stream);
      if (paused) stream.pause();
    };
    /** Only the replica's current stream counts: one closed on purpose, or replaced, says nothing. */
    const failed = (stream: PeerStream, webhook: string, why: string) => {
      if (closed || open.get(webhook) !== stream) return;
      open.delete(webhook);
      handlers.failed(webhook, why);
      const again = setTimeout(() => {
        retrying.delete(webhook);
        if (!closed && listed(webhook) && !open.has(webhook)) start(webhook);
      }, WATCH_RETRY_MS);
      again.unref();
      retrying.set(webhook, again);
    };
    // Replicas that join get a stream; those that leave lose theirs (their nodes come from their new first owners).
    const follow = () => {
      const now = new Set(this.view.others().map((m) => m.webhook));
      for (const webhook of now) if (!open.has(webhook) && !retrying.has(webhook)) start(webhook);
      for (const [webhook, stream] of open) {
        if (now.has(webhook)) continue;
        open.delete(webhook);
        stream.close();
      }
    };
    const initial = this.view.others().map((m) => m.webhook);
    for (const webhook of initial) start(webhook);
    const unfollow = this.view.onChange(follow);
    return {
      initial,
      pause: () => {
        paused = true;
        for (const stream of open.values()) stream.pause();
      },
      resume: () => {
        paused = false;
        for (const stream of open.values()) stream.resume();
      },
      close: () => {
        closed = true;
        unfollow();
        for (const timer of retrying.values()) clearTimeout(timer);
        for (const stream of open.values()) stream.close();
        open.clear();
      },
    };
  }

  async #all<T>(path: string, request: PeerRequest | MetricsQuery, decode: (bytes: Buffer) => T): Promise<FromPeers<T>> {
    const asked = this.view.others();
    const settled = await Promise.allSettled(asked.map(async (m) => decode(await this.#ask(m, path, request, this.deadlineMs))));
    const answers: T[] = [];
    const failed: string[] = [];
    settled.forEach((s, i) => (s.status === 'fulfilled' ? answers.push(s.value) : failed.push(`${asked[i]!.webhook}: ${(s.reason as Error).message}`)));
    return { answers, failed };
  }

  #ask(member: ShardMember, path: string, request: PeerRequest | MetricsQuery, timeoutMs: number): Promise<Buffer> {
    const headers = { 'content-type': 'application/json', [FORWARDED_BY]: this.identity };
    return this.client.post(member.webhook, path, Buffer.from(JSON.stringify(request)), { timeoutMs, headers });
  }
}
