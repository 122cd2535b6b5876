// The query API's view of the other replicas when the gateway shards
// (query/peer-nodes.ts), over HTTPS between replicas (peer-client.ts,
// peer-plugin.ts), each call within one deadline. A get asks the node's
// owners best first, each with a share of the deadline before the next is
// asked too (hedged.ts). A list asks every other replica at once; once every
// node has an owner that answered (fewer replicas unanswered than the copies),
// the rest get a share more, not the whole deadline. A watch waits for a
// replica's SYNCED only while it keeps sending: one that sends nothing for the
// deadline first is unreachable, and its nodes come from their next owners
// until it syncs again. A replica that does not answer in time is named in
// `failed` (counted by the caller), which answers with the rest.
import type { NodeStatus } from '../../proto/gen/oversell/v1/NodeStatus.js';
import type { NodeSummaries__Output } from '../../proto/gen/oversell/v1/NodeSummaries.js';
import type { NodeFilterRequest } from '../query/local-nodes.js';
import type { MetricsQuery } from '../metrics-api/metrics-reader.js';
import type { NodeMetrics, PodMetrics } from '../metrics-api/resource-metrics.js';
import type { FromPeers, PeerNodes, PeerWatch, PeerWatchHandlers } from '../query/peer-nodes.js';
import { firstAnswer, shareOf } from './hedged.js';
import { FORWARDED_BY, type PeerClient, type PeerStream } from './peer-client.js';
import { PEER_PATHS, type PeerRequest } from './peer-plugin.js';
import { decodeNodes, decodeSummaries, EventFrames } from './peer-wire.js';
import type { ShardMember, ShardView } from './shard-view.js';

/** How soon a replica's watch stream that failed is opened again, while the replica is listed. */
const WATCH_RETRY_MS = 1000;

export class PeerQueries implements PeerNodes {
  constructor(
    private readonly view: ShardView,
    private readonly client: PeerClient,
    /** This replica's name, in each request's FORWARDED_BY header (the peer's logs). */
    private readonly identity: string,
    /** For all the peers asked by one call together; and how long a watch's stream may send nothing before its SYNCED. */
    private readonly deadlineMs: number,
  ) {}

  owners(node: string): string[] {
    return this.view.forwardTo(node).map((m) => m.key);
  }

  async get(node: string): Promise<FromPeers<NodeStatus>> {
    const request = { labelSelector: '', policy: '', names: [node] };
    const { answer, failed } = await firstAnswer(
      this.view.forwardTo(node),
      async (owner, o) => decodeNodes(await this.#ask(owner, PEER_PATHS.nodes, request, o.timeoutMs, o.signal))[0],
      this.deadlineMs,
    );
    return { answers: answer ? [answer.value] : [], failed: failed.map((f) => `${f.target.webhook}: ${f.why}`) };
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

  standsIn(node: string, unreachable: ReadonlySet<string>): boolean {
    return this.view.standsIn(node, unreachable);
  }

  onMembersChange(listener: () => void): () => void {
    return this.view.onChange(listener);
  }

  watch(request: NodeFilterRequest, handlers: PeerWatchHandlers): PeerWatch {
    const bodyOf = (standInFor?: string[]) => Buffer.from(JSON.stringify({ labelSelector: request.labelSelector, policy: request.policy, ...(standInFor && { standInFor }) } satisfies PeerRequest));
    const body = bodyOf();
    const headers = { 'content-type': 'application/json', [FORWARDED_BY]: this.identity };
    /** Each stream by its source's name: a replica's webhook for its own nodes, "<webhook> standing in" for those it streams in place of the unreachable. */
    const open = new Map<string, WatchSource>();
    const retrying = new Map<string, NodeJS.Timeout>();
    /** Replicas (member keys) whose stream failed and has not synced since. */
    const unreachable = new Set<string>();
    /** The stand-ins now open (their names), and for which replicas ("" for none). */
    let standIns: string[] = [];
    let standingInFor = '';
    let paused = false;
    let closed = false;
    const listed = (m: ShardMember) => this.view.others().some((o) => o.webhook === m.webhook && o.key === m.key);
    /** Until its SYNCED, a stream that sends nothing for the deadline (while it is read) counts as failed. */
    const quiet = (source: WatchSource) => {
      clearTimeout(source.quiet);
      if (source.synced || paused) return;
      source.quiet = setTimeout(() => {
        failed(source, `sent nothing for ${this.deadlineMs} ms before its SYNCED`);
        source.stream.close();
      }, this.deadlineMs);
      source.quiet.unref();
    };
    const start = (name: string, member: ShardMember, standIn: boolean, requestBody: Buffer) => {
      const frames = new EventFrames();
      const stream = this.client.stream(member.webhook, PEER_PATHS.watch, requestBody, {
        headers,
        onData: (chunk) => {
          if (closed || open.get(name) !== source) return;
          let events;
          try {
            events = frames.push(chunk);
          } catch (err) {
            failed(source, (err as Error).message);
            return source.stream.close();
          }
          quiet(source);
          for (const event of events) {
            if (open.get(name) !== source) return;
            if (event.type === 'SYNCED' && !source.synced) {
              source.synced = true;
              clearTimeout(source.quiet);
              if (!standIn && unreachable.delete(member.key)) standInFor();
            }
            handlers.event(name, event);
          }
        },
        onEnd: (err) => failed(source, err?.message ?? 'the stream ended'),
      });
      // The stream's callbacks come later, from its socket's events.
      const source: WatchSource = { name, member, standIn, body: requestBody, synced: false, stream };
      open.set(name, source);
      if (paused) source.stream.pause();
      quiet(source);
    };
    const stop = (name: string) => {
      const source = open.get(name);
      open.delete(name);
      clearTimeout(retrying.get(name));
      retrying.delete(name);
      if (!source) return;
      clearTimeout(source.quiet);
      source.stream.close();
    };
    /**
     * Opens, at each replica it can reach, a stand-in for the unreachable
     * ones (closing the last), when they changed or `again` (the members did).
     * The stand-ins are closed, never made to send REMOVED: a replica that
     * syncs again has re-sent its nodes already.
     */
    const standInFor = (again = false) => {
      for (const key of unreachable) if (!this.view.others().some((m) => m.key === key)) unreachable.delete(key);
      const keys = [...unreachable].sort();
      if (keys.join(',') === standingInFor && !again) return;
      standingInFor = keys.join(',');
      for (const name of standIns) stop(name);
      standIns = [];
      if (keys.length > 0) {
        const standInBody = bodyOf(keys);
        for (const m of this.view.others()) {
          if (unreachable.has(m.key)) continue;
          const name = `${m.webhook} standing in`;
          start(name, m, true, standInBody);
          standIns.push(name);
        }
      }
      handlers.standIn(new Set(keys), standIns);
    };
    /** Only the current stream of a source counts: one closed on purpose, or replaced, says nothing. */
    const failed = (source: WatchSource, why: string) => {
      if (closed || open.get(source.name) !== source) return;
      open.delete(source.name);
      clearTimeout(source.quiet);
      // Its stand-ins first, so that a watch not yet synced waits for them.
      if (!source.standIn && !unreachable.has(source.member.key)) {
        unreachable.add(source.member.key);
        standInFor();
      }
      handlers.failed(source.name, why);
      const again = setTimeout(() => {
        retrying.delete(source.name);
        const member = this.view.others().find((m) => m.webhook === source.member.webhook);
        const wanted = !source.standIn || standIns.includes(source.name);
        if (!closed && wanted && member && !open.has(source.name)) start(source.name, member, source.standIn, source.body);
      }, WATCH_RETRY_MS);
      again.unref();
      retrying.set(source.name, again);
    };
    // Replicas that join get a stream; those that leave lose theirs (their nodes come from their new first owners).
    const follow = () => {
      for (const [name, source] of open) if (!source.standIn && !listed(source.member)) stop(name);
      for (const m of this.view.others()) if (!open.has(m.webhook) && !retrying.has(m.webhook)) start(m.webhook, m, false, body);
      if (unreachable.size > 0 || standingInFor !== '') standInFor(true);
    };
    const initial = this.view.others();
    for (const m of initial) start(m.webhook, m, false, body);
    const unfollow = this.view.onChange(follow);
    return {
      initial: initial.map((m) => m.webhook),
      pause: () => {
        paused = true;
        for (const source of open.values()) {
          source.stream.pause();
          clearTimeout(source.quiet);
        }
      },
      resume: () => {
        paused = false;
        for (const source of open.values()) {
          source.stream.resume();
          quiet(source);
        }
      },
      close: () => {
        closed = true;
        unfollow();
        for (const timer of retrying.values()) clearTimeout(timer);
        for (const source of open.values()) {
          clearTimeout(source.quiet);
          source.stream.close();
        }
        open.clear();
      },
    };
  }

  /**
   * Asks every other replica at once, within the deadline. Once fewer are
   * unanswered than a node has owners, each node has an owner that answered
   * (or is this replica): the rest get a share of the deadline more, since
   * what they would add is at most a fresher view of nodes already there.
   */
  #all<T>(path: string, request: PeerRequest | MetricsQuery, decode: (bytes: Buffer) => T): Promise<FromPeers<T>> {
    const asked = this.view.others();
    const owners = Math.min(this.view.copies, this.view.members);
    const graceMs = shareOf(this.deadlineMs, this.view.copies);
    const answers: T[] = [];
    const failed: string[] = [];
    const waiting = new Map(asked.map((m) => [m.webhook, new AbortController()]));
    return new Promise((resolve) => {
      let grace: NodeJS.Timeout | undefined;
      const finish = (why: string) => {
        clearTimeout(deadline);
        clearTimeout(grace);
        for (const [webhook, abort] of waiting) {
          failed.push(`${webhook}: ${why}`);
          abort.abort();
        }
        waiting.clear();
        resolve({ answers, failed });
      };
      const settled = () => {
        if (waiting.size === 0) return finish('');
        if (!grace && asked.length - answers.length < owners) grace = setTimeout(() => finish(`no answer within ${Math.round(graceMs)} ms of the others, which hold its nodes too`), graceMs);
      };
      const deadline = setTimeout(() => finish(`no answer within ${this.deadlineMs} ms`), this.deadlineMs);
      for (const m of asked) {
        const abort = waiting.get(m.webhook)!;
        this.#ask(m, path, request, this.deadlineMs, abort.signal).then(
          (bytes) => {
            if (waiting.get(m.webhook) !== abort) return;
            waiting.delete(m.webhook);
            try {
              answers.push(decode(bytes));
            } catch (err) {
              failed.push(`${m.webhook}: ${(err as Error).message}`);
            }
            settled();
          },
          (err: Error) => {
            if (waiting.get(m.webhook) !== abort) return;
            waiting.delete(m.webhook);
            failed.push(`${m.webhook}: ${err.message}`);
            settled();
          },
        );
      }
      settled();
    });
  }

  #ask(member: ShardMember, path: string, request: PeerRequest | MetricsQuery, timeoutMs: number, signal?: AbortSignal): Promise<Buffer> {
    const headers = { 'content-type': 'application/json', [FORWARDED_BY]: this.identity };
    return this.client.post(member.webhook, path, Buffer.from(JSON.stringify(request)), { timeoutMs, headers, ...(signal && { signal }) });
  }
}

/** One stream of a watch: a replica's own nodes, or those it stands in for. */
interface WatchSource {
  name: string;
  member: ShardMember;
  standIn: boolean;
  body: Buffer;
  stream: PeerStream;
  synced: boolean;
  /** Set until SYNCED: ends the stream if it sends nothing for the deadline. */
  quiet?: NodeJS.Timeout;
}
