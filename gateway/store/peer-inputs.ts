// What the other replicas of a sharded gateway said about the nodes whose
// agents stream to them (shard/node-inputs-sender.ts): the newest report per
// node, so this replica decides a review for any node without asking its
// owner. Keeps only; the webhook reads it when it holds no stream of its own.
import type { AgentSummary } from '../../lib/usage/summary-plan.js';
import type { UsageInput } from '../decide/decision-types.js';

/** Another replica's report on a node: its decision inputs, and how old its sample was when sent. */
export interface PeerNodeInputs {
  ageMs: number;
  usage: Omit<Extract<UsageInput, { planned: readonly AgentSummary[] }>, 'ageMs'>;
}

interface Kept {
  inputs: PeerNodeInputs;
  /** This replica's clock when the sample the report is of arrived at its sender: receipt - its age. */
  sampleAtMs: number;
}

export class PeerInputs {
  readonly #nodes = new Map<string, Kept>();

  constructor(
    /** Reports older than this are forgotten (prune()): the node's decision would read them as stale long before. */
    private readonly forgetAfterMs: number,
  ) {}

  get size(): number {
    return this.#nodes.size;
  }

  /**
   * Keeps each node's report unless the one kept is of a newer sample: two
   * owners of a node both report it, and their reports may cross.
   */
  put(nodes: ReadonlyMap<string, PeerNodeInputs>, nowMs: number): void {
    for (const [name, inputs] of nodes) {
      const sampleAtMs = nowMs - inputs.ageMs;
      const kept = this.#nodes.get(name);
      if (kept && kept.sampleAtMs > sampleAtMs) continue;
      this.#nodes.set(name, { inputs, sampleAtMs });
    }
  }

  /** The node's inputs as the decision reads them, aged to now; undefined with no report. */
  usage(name: string, nowMs: number): UsageInput | undefined {
    const kept = this.#nodes.get(name);
    return kept && { ...kept.inputs.usage, ageMs: Math.max(0, nowMs - kept.sampleAtMs) };
  }

  /** When the sample of the node's newest report arrived at its sender (this replica's clock); undefined with none. */
  reportedSampleAtMs(name: string): number | undefined {
    return this.#nodes.get(name)?.sampleAtMs;
  }

  prune(nowMs: number): void {
    for (const [name, kept] of this.#nodes) if (nowMs - kept.sampleAtMs > this.forgetAfterMs) this.#nodes.delete(name);
  }
}
