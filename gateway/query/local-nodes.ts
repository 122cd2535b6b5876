// The nodes this replica holds, as the query API shows them: one place that
// turns store records into NodeStatus and summary rows, read by the gRPC
// query service and, when the gateway shards, by the other replicas
// (gateway/shard/peer-plugin.ts), so a node looks the same from any replica.
import { setImmediate as yieldToEventLoop } from 'node:timers/promises';
import type { NodeStatus } from '../../proto/gen/oversell/v1/NodeStatus.js';
import type { NodeSummaries__Output } from '../../proto/gen/oversell/v1/NodeSummaries.js';
import { parseLabelSelector } from '../../lib/label-selector.js';
import { matches } from '../decide/select-policy.js';
import type { PolicySource } from '../policies/policy-source.js';
import type { NodeRecord, NodeStore } from '../store/node-store.js';
import type { NodeRequests } from '../store/bound-requests.js';
import { nodeStatus } from './node-status.js';
import { SummaryTable, type RowFilter } from './summary-table.js';

export interface NodeFilterRequest {
  labelSelector: string;
  policy: string;
}

/** The request's selector and policy as a row filter; throws SelectorError for a bad selector. */
export function filterOf(req: NodeFilterRequest): RowFilter {
  const selector = parseLabelSelector(req.labelSelector);
  return (r, policy) => (!selector || matches(selector, r.labels)) && (!req.policy || policy === req.policy);
}

/**
 * Whether this replica holds the node's usage: its agent has sent a sample
 * here. With a cluster every replica has every node's record (the node watch
 * fills raw allocatable and labels), but when sharded only the owners hold samples.
 */
export const holdsUsage = (r: NodeRecord): boolean => r.lastSeq > 0;

/** Nodes whose status a list computes before it lets heartbeats and samples in. */
const LIST_CHUNK = 500;
const byName = (a: NodeRecord, b: NodeRecord) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0);

export class LocalNodes {
  readonly #table: SummaryTable;

  constructor(
    readonly store: NodeStore,
    private readonly policies: PolicySource,
    private readonly now: () => number,
    private readonly boundRequests?: (node: string) => NodeRequests | undefined,
  ) {
    this.#table = new SummaryTable(store, policies, now, boundRequests);
  }

  status(record: NodeRecord): NodeStatus {
    return nodeStatus(record, this.policies, this.now(), this.boundRequests);
  }

  /**
   * Every node `filter` keeps, in name order. A status costs tens of
   * microseconds; 10,000 of them in one go would hold kubelet heartbeats back
   * for a quarter second, so it yields between chunks.
   */
  async list(filter: RowFilter, records: NodeRecord[] = this.store.list()): Promise<NodeStatus[]> {
    records.sort(byName);
    const nodes: NodeStatus[] = [];
    for (let i = 0; i < records.length; i++) {
      if (i > 0 && i % LIST_CHUNK === 0) await yieldToEventLoop();
      const r = records[i]!;
      const s = this.status(r);
      if (filter(r, s.policy ?? '')) nodes.push(s);
    }
    return nodes;
  }

  /** The summary rows `filter` keeps (undefined: every row); the table keeps them current (summary-table.ts). */
  summaries(filter: RowFilter | undefined): NodeSummaries__Output {
    return this.#table.summaries(filter);
  }
}
