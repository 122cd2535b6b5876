// What agents are told about sending (Settings.max_batch_samples,
// send_every_ms, min_sample_interval_ms, summary_plans): the welcome says the
// current value, and a change (the load shedder slowing agents, or letting
// them speed up again; the policies' plans) goes to every stream already
// welcomed, so agents follow it without reconnecting.
import type { SummaryPlan } from '../../proto/gen/oversell/v1/SummaryPlan.js';

export interface Sending {
  maxBatchSamples: number;
  sendEveryMs: number;
  /** The load shedder's least sampling interval (Settings.min_sample_interval_ms); 0 or absent: the agents' own. */
  minSampleIntervalMs?: number;
  /** The plans agents summarize their windows by (--agent-summaries); none: agents send samples. */
  summaryPlans?: readonly SummaryPlan[];
}

const samePlans = (a: readonly SummaryPlan[] = [], b: readonly SummaryPlan[] = []) => a.length === b.length && a.every((p, i) => p.id === b[i]!.id);

export class AgentSending {
  #current: Sending;
  readonly #streams = new Set<(s: Sending) => void>();

  constructor(initial: Sending) {
    this.#current = { ...initial };
  }

  get current(): Sending {
    return this.#current;
  }

  /** Welcomed streams now open. */
  get streams(): number {
    return this.#streams.size;
  }

  /** Tells every welcomed stream, once per change. */
  set(next: Sending): void {
    const c = this.#current;
    if (next.maxBatchSamples === c.maxBatchSamples && next.sendEveryMs === c.sendEveryMs && (next.minSampleIntervalMs ?? 0) === (c.minSampleIntervalMs ?? 0) && samePlans(next.summaryPlans, c.summaryPlans)) return;
    this.#current = { ...next };
    for (const tell of this.#streams) tell(this.#current);
  }

  /** A welcomed stream hears each later change until it calls the returned function. */
  follow(tell: (s: Sending) => void): () => void {
    this.#streams.add(tell);
    return () => void this.#streams.delete(tell);
  }
}
