// What agents are told about sending (Settings.max_batch_samples,
// send_every_ms, min_sample_interval_ms): the welcome says the current value, and a change (the load
// shedder slowing agents, or letting them speed up again) goes to every stream
// already welcomed, so agents follow it without reconnecting.

export interface Sending {
  maxBatchSamples: number;
  sendEveryMs: number;
  /** The load shedder's least sampling interval (Settings.min_sample_interval_ms); 0 or absent: the agents' own. */
  minSampleIntervalMs?: number;
}

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
    if (next.maxBatchSamples === this.#current.maxBatchSamples && next.sendEveryMs === this.#current.sendEveryMs && (next.minSampleIntervalMs ?? 0) === (this.#current.minSampleIntervalMs ?? 0)) return;
    this.#current = { ...next };
    for (const tell of this.#streams) tell(this.#current);
  }

  /** A welcomed stream hears each later change until it calls the returned function. */
  follow(tell: (s: Sending) => void): () => void {
    this.#streams.add(tell);
    return () => void this.#streams.delete(tell);
  }
}
