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
import type { FromPeers, PeerNodes } from '../query/peer-nodes.js';
import type { PeerClient } from './peer-client.js';
import { PEER_PATHS, type PeerRequest } from './peer-plugin.js';
import { decodeNodes, decodeSummaries } from './peer-wire.js';
import { FORWARDED_BY } from './review-forwarder.js';
import type { ShardMember, ShardView } from './shard-view.js';

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
