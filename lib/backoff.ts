// Capped exponential backoff with full jitter: after the gateway restarts, a
// fleet of agents spreads its reconnects over the window instead of arriving at once.

export interface BackoffOptions {
  initialMs: number;
  maxMs: number;
}

export class Backoff {
  #attempt = 0;
  constructor(
    private readonly options: BackoffOptions,
    private readonly random: () => number = Math.random,
  ) {}

  /** Delay before the next attempt; grows until reset(). */
  next(): number {
    const ceiling = Math.min(this.options.maxMs, this.options.initialMs * 2 ** this.#attempt);
    this.#attempt = Math.min(this.#attempt + 1, 30);
    return Math.round(this.random() * ceiling);
  }

  reset(): void {
    this.#attempt = 0;
  }
}
