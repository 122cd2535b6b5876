// Tells the other replicas of a sharded gateway what the decision reads of
// each node whose agent streams here, a few times a second and only for the
// nodes whose data changed (a sample, a stream's start or end), so that a
// review decides where it lands instead of travelling to the node's owner.
// The node's first owner reports it; another owner holds its own report back
// while the first owner's reports cover the samples it holds, and sends it
// once they fall a second behind (the first owner lost the agent's stream,
// or is gone): every replica then receives each node's reports about once,
// not once per owner. The receiver keeps the report of the newest sample
// (store/peer-inputs.ts).
import { planId, type AgentSummary, type SummaryPlan } from '../../lib/usage/summary-plan.js';
import { summaryUnder } from '../../lib/usage/window-summary.js';
import type { Logger } from '../../lib/log.js';
import { OncePer } from '../../lib/once-per.js';
import { digestHistory, digestShares } from '../decide/history-digest.js';
import type { PolicyEntry } from '../decide/select-policy.js';
import { distinctPlans } from '../policies/summary-plans.js';
import type { NodeRecord, NodeStore } from '../store/node-store.js';
import { nodeInputsToWire } from './node-inputs-wire.js';
import { FORWARDED_BY, type PeerClient } from './peer-client.js';
import { PEER_PATHS } from './peer-plugin.js';
import type { ShardView } from './shard-view.js';

export interface NodeInputsSenderOptions {
  store: NodeStore;
  /** The valid policies now: their plans and risk budget shares are what a decision elsewhere reads. */
  policies: () => readonly PolicyEntry[];
  view: ShardView;
  client: Pick<PeerClient, 'post'>;
  /** This replica's name, in each request's FORWARDED_BY header (the peer's logs). */
  identity: string;
  now: () => number;
  log: Logger;
  /** A send to one replica failed (counted by the caller). */
  onFailed: () => void;
  /** How often changed nodes are sent (default 250 ms: a rise reaches every replica well inside the 2 s pressure-to-node target). */
  everyMs?: number;
  /** Most nodes in one request (default 4,000: about 1.6 MB, inside the webhook port's body limit). */
  maxNodesPerRequest?: number;
  /**
   * When the newest report this replica received of the node was of a
   * sample that arrived at its sender (this replica's clock); undefined: none.
   * Without it, every owner reports every change.
   */
  reportedSampleAtMs?: (node: string) => number | undefined;
}

/** How long an owner other than the first holds a change back for the first owner's report to cover it. */
export const FIRST_OWNER_GRACE_MS = 1000;
/** A report covers a sample this replica holds when its sample arrived at its sender no more than this before: the same agent message reaches both owners about at once. */
const SAME_MESSAGE_MS = 1000;

/** How long one send to one replica may take: that replica's next send waits for it. */
const SEND_TIMEOUT_MS = 2000;

/** What a report carries of the policies: their distinct plans, and the shares their risk budgets read. */
export interface ReportShape {
  plans: SummaryPlan[];
  shares: number[];
}

export function reportShape(policies: readonly PolicyEntry[]): ReportShape {
  return {
    plans: distinctPlans(policies),
    shares: digestShares(policies.flatMap((e) => (e.policy ? [e.policy.cpu.riskBudget.overShare, e.policy.memory.riskBudget.overShare] : []))),
  };
}

/** The window under each plan, as the decision reads it (window-summary.ts, summaryUnder). */
function plannedSummaries(record: NodeRecord, plans: readonly SummaryPlan[]): AgentSummary[] {
  const capacity = record.value('capacity.memoryBytes');
  return plans.map((plan) => ({ planId: planId(plan), summary: summaryUnder(record.window, plan, capacity, record.summaries) }));
}

/**
 * A node's report as JSON, built once for every replica it goes to;
 * undefined unless its agent streams here (a report is never relayed).
 */
export function nodeReport(store: NodeStore, name: string, shape: ReportShape, nowMs: number): string | undefined {
  const record = store.get(name);
  const usage = record?.streamId !== undefined ? store.usage(name, nowMs) : undefined;
  if (!record || !usage) return undefined;
  const history = record.history && digestHistory(record.history, shape.shares);
  return JSON.stringify(nodeInputsToWire(name, { ...usage, window: undefined, agentSummaries: undefined, summary: undefined, planned: plannedSummaries(record, shape.plans) }, history));
}

interface Peer {
  /** Nodes changed since its last send began. */
  pending: Set<string>;
  sending: boolean;
}

export class NodeInputsSender {
  readonly #o: NodeInputsSenderOptions;
  readonly #changed = new Set<string>();
  /** Per other replica (member key): each is sent on its own, so one that hangs holds back only itself. */
  readonly #peers = new Map<string, Peer>();
  readonly #failedLog = new OncePer(60_000);
  /** Changes of nodes this replica is not the first owner of, held back: node -> since when. */
  readonly #held = new Map<string, number>();
  #timer: NodeJS.Timeout | undefined;
  #stopListening: (() => void) | undefined;

  constructor(o: NodeInputsSenderOptions) {
    this.#o = o;
  }

  start(): void {
    const onUpdated = (r: NodeRecord) => this.#changed.add(r.name);
    this.#o.store.on('updated', onUpdated);
    // A replica that joins knows none of this one's nodes yet.
    const stopView = this.#o.view.onChange(() => {
      for (const r of this.#o.store.list()) this.#changed.add(r.name);
    });
    this.#stopListening = () => {
      this.#o.store.off('updated', onUpdated);
      stopView();
    };
    this.#timer = setInterval(() => void this.flush(), this.#o.everyMs ?? 250);
    this.#timer.unref();
  }

  stop(): void {
    clearInterval(this.#timer);
    this.#stopListening?.();
  }

  /**
   * Sends each other replica the nodes changed since its last send whose
   * agent streams here; a replica whose last send has not finished gets them
   * with its next. Resolves when the sends begun here answered or failed.
   */
  async flush(): Promise<void> {
    const members = this.#o.view.others();
    for (const key of this.#peers.keys()) if (!members.some((m) => m.key === key)) this.#peers.delete(key);
    const due = this.#due(this.#o.now());
    const ready: { webhook: string; key: string; peer: Peer }[] = [];
    for (const m of members) {
      let peer = this.#peers.get(m.key);
      if (!peer) this.#peers.set(m.key, (peer = { pending: new Set(), sending: false }));
      for (const name of due) peer.pending.add(name);
      if (!peer.sending && peer.pending.size > 0) ready.push({ webhook: m.webhook, key: m.key, peer });
    }
    if (ready.length === 0) return;
    const entries = this.#entries(ready);
    const headers = { 'content-type': 'application/json', [FORWARDED_BY]: this.#o.identity };
    await Promise.all(ready.map(async ({ webhook, key, peer }) => {
      const bodies = this.#bodies(peer.pending, entries);
      peer.pending = new Set();
      peer.sending = true;
      try {
        for (const body of bodies) await this.#o.client.post(webhook, PEER_PATHS.inputs, body, { timeoutMs: SEND_TIMEOUT_MS, headers });
      } catch (err) {
        this.#o.onFailed();
        if (this.#failedLog.take(key)) this.#o.log.warn({ peer: webhook, err: (err as Error).message }, 'node inputs not sent to a replica: reviews of these nodes that reach it are decided there with older inputs until their next change (check its readiness and logs)');
      } finally {
        peer.sending = false;
      }
    }));
  }

  /** The changed nodes to report now: the first owner's at once, another owner's once the first owner's reports stop covering them. */
  #due(now: number): string[] {
    const reported = this.#o.reportedSampleAtMs;
    const due: string[] = [];
    for (const name of this.#changed) {
      if (!reported || this.#o.view.isFirstOwner(name)) due.push(name);
      else if (!this.#held.has(name)) this.#held.set(name, now);
    }
    this.#changed.clear();
    if (!reported) return due;
    for (const [name, since] of this.#held) {
      const record = this.#o.store.get(name);
      const streamed = record !== undefined && record.streamId !== undefined;
      const covered = streamed && (reported(name) ?? Number.NEGATIVE_INFINITY) >= record.receivedAtMs - SAME_MESSAGE_MS;
      // Reported now: it became the first owner, or the first owner's reports have not covered it for the grace.
      const report = streamed && (this.#o.view.isFirstOwner(name) || (!covered && now - since >= FIRST_OWNER_GRACE_MS));
      if (report) due.push(name);
      if (report || !streamed || covered) this.#held.delete(name);
    }
    return due;
  }

  /** Each node pending for a ready peer, as JSON, once however many peers get it; undefined for nodes not streamed here. */
  #entries(ready: readonly { peer: Peer }[]): Map<string, string | undefined> {
    const shape = reportShape(this.#o.policies());
    const now = this.#o.now();
    const out = new Map<string, string | undefined>();
    for (const { peer } of ready) {
      for (const name of peer.pending) if (!out.has(name)) out.set(name, nodeReport(this.#o.store, name, shape, now));
    }
    return out;
  }

  #bodies(names: ReadonlySet<string>, entries: ReadonlyMap<string, string | undefined>): Buffer[] {
    const max = this.#o.maxNodesPerRequest ?? 4000;
    const bodies: Buffer[] = [];
    let nodes: string[] = [];
    const close = () => bodies.push(Buffer.from(`{"nodes":[${nodes.join(',')}]}`));
    for (const name of names) {
      const entry = entries.get(name);
      if (entry === undefined) continue;
      nodes.push(entry);
      if (nodes.length === max) {
        close();
        nodes = [];
      }
    }
    if (nodes.length > 0) close();
    return bodies;
  }
}
