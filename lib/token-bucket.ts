// A rate limit: `perSecond` tokens a second, at most `burst` saved up.
export class TokenBucket {
  #tokens: number;
  #last: number;
  constructor(
    private readonly perSecond: number,
    private readonly burst: number,
    private readonly now: () => number = Date.now,
  ) {
    this.#tokens = burst;
    this.#last = now();
  }

  /**
   * Takes `cost` tokens if there are that many and `reserve` more left after
   * (kept for more urgent callers); a cost over the burst is never granted.
   */
  take(cost = 1, reserve = 0): boolean {
    const t = this.now();
    this.#tokens = Math.min(this.burst, this.#tokens + ((t - this.#last) / 1000) * this.perSecond);
    this.#last = t;
    if (this.#tokens < cost + reserve) return false;
    this.#tokens -= cost;
    return true;
  }
}
