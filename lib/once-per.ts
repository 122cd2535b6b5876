// "At most once per key per interval", for logs that would otherwise repeat
// at the rate of heartbeats or samples. Keys come from requests, so the map
// is bounded: past maxKeys it starts over (a few lines logged twice).

export class OncePer {
  readonly #last = new Map<string, number>();
  constructor(
    private readonly intervalMs: number,
    private readonly now: () => number = Date.now,
    private readonly maxKeys = 50_000,
  ) {}

  /** True when `key` was not let through within the interval (and lets it through now). */
  take(key: string): boolean {
    const t = this.now();
    const prev = this.#last.get(key);
    if (prev !== undefined && t - prev < this.intervalMs) return false;
    if (this.#last.size >= this.maxKeys) this.#last.clear();
    this.#last.set(key, t);
    return true;
  }
}
