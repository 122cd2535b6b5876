// The per-node series (nine a node), kept as plain numbers and written to the
// exposition text by hand, a slice of nodes per event-loop turn. As
// prom-client gauges, a scrape at 10,000 nodes hashed, flattened and formatted
// 90,000 labelled values in one turn of the main thread (0.4-0.65 s), and
// every review that arrived meanwhile waited for it.
import { setImmediate as nextTurn } from 'node:timers/promises';
import { escapeLabel, familyHeader, formatValue } from '../../lib/prometheus-text-format.js';

export type NodeResource = 'cpu' | 'memory';

/** One resource's last decision on a node, as its gauges show it. */
export interface NodeResourceValues {
  /** Raw allocatable: cores (cpu) or bytes (memory). */
  raw: number;
  /** Granted / raw; undefined when raw was not positive. */
  grantedRatio: number | undefined;
  appliedRatio: number | undefined;
  overCap: boolean;
}

/** What the sample-age family reads of a store record. */
export interface SampledNode {
  readonly name: string;
  readonly hasSample: boolean;
  readonly receivedAtMs: number;
}

interface Family {
  name: string;
  help: string;
  labels: readonly string[];
}

/** A family of the last decisions, per node and resource, and what it shows of a resource's values (undefined: no series). */
interface DecidedFamily extends Family {
  shown(v: NodeResourceValues): number | undefined;
}

const decided = (name: string, help: string, shown: DecidedFamily['shown']): DecidedFamily => ({ name, help, labels: ['node', 'resource'], shown });
const DECIDED: readonly DecidedFamily[] = [
  decided('oversell_node_granted_ratio', 'Granted / raw allocatable per node and resource at the last decision; in DryRun, what would be granted.', (v) => v.grantedRatio),
  decided('oversell_node_applied_ratio', 'Allocatable written / raw allocatable per node and resource at the last decision (1 in DryRun unless bound requests exceed raw).', (v) => v.appliedRatio),
  decided('oversell_node_requests_over_cap', '1 when the bound requests the node\'s agent reports exceed the oversell cap (the floor stops at the cap; a kubelet restart may reject pods), else 0; per node and resource at the last decision.', (v) => (v.overCap ? 1 : 0)),
  decided('oversell_node_raw_allocatable', 'Raw allocatable the kubelet wrote, per node and resource, in cores (cpu) or bytes (memory).', (v) => (v.grantedRatio === undefined ? undefined : v.raw)),
];
const SAMPLE_AGE: Family = { name: 'oversell_node_sample_age_seconds', help: 'Age of the newest sample of each node, on the gateway clock.', labels: ['node'] };

/** The families this module writes, in the order written: type and labels for the dashboard checks and docs. */
export const NODE_FAMILIES: readonly Family[] = [...DECIDED, SAMPLE_AGE];

/** Nodes written per event-loop turn: about a millisecond of work each. */
export const NODES_PER_TURN = 500;

export class NodeSeries {
  readonly #values = new Map<string, Partial<Record<NodeResource, NodeResourceValues>>>();

  set(node: string, resource: NodeResource, values: NodeResourceValues): void {
    const entry = this.#values.get(node);
    if (entry) entry[resource] = values;
    else this.#values.set(node, { [resource]: values });
  }

  forget(node: string): void {
    this.#values.delete(node);
  }

  /**
   * The exposition text of every family, a slice of nodes per chunk and per
   * event-loop turn, ending in a line feed: streamed, a scrape at 10,000
   * nodes (6 MB) is never built or flattened in one turn. `records`: the
   * store's nodes, each read as the scrape reaches it; ages against nowMs.
   */
  async *chunks(records: readonly SampledNode[], nowMs: number): AsyncGenerator<string> {
    const decided = [...this.#values.keys()];
    for (const family of DECIDED) {
      yield header(family);
      for (let from = 0; from < decided.length; from += NODES_PER_TURN) {
        if (from > 0) await nextTurn();
        let text = '';
        for (const node of decided.slice(from, from + NODES_PER_TURN)) {
          const entry = this.#values.get(node); // undefined: forgotten while the scrape yielded
          for (const resource of RESOURCES) {
            const v = entry?.[resource];
            const value = v && family.shown(v);
            if (value !== undefined) text += `${family.name}{node="${escapeLabel(node)}",resource="${resource}"} ${formatValue(value)}\n`;
          }
        }
        yield text;
      }
    }
    yield header(SAMPLE_AGE);
    for (let from = 0; from < records.length; from += NODES_PER_TURN) {
      if (from > 0) await nextTurn();
      let text = '';
      for (const r of records.slice(from, from + NODES_PER_TURN)) {
        if (r.hasSample) text += `${SAMPLE_AGE.name}{node="${escapeLabel(r.name)}"} ${formatValue((nowMs - r.receivedAtMs) / 1000)}\n`;
      }
      yield text;
    }
  }
}

const RESOURCES: readonly NodeResource[] = ['cpu', 'memory'];

const header = (f: Family): string => familyHeader(f.name, f.help, 'gauge');
