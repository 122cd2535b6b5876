// The gateway's budget of TokenReviews, shared by agents and query callers, so
// no stream of tokens (a flood of bogus ones, or every agent reconnecting at
// once) can send the API server more than a fixed rate and number in flight.
// Cached accepted tokens never come here (token-review.ts).
//
// Part of the budget is reserved for callers the gateway has accepted before
// (the pod uid of a bound ServiceAccount token, else the sub claim): a kubelet
// rotating an agent's token, or an agent reconnecting after its cache entry
// expired, is not queued behind a flood of tokens nobody has seen. The claim
// is unverified when the review is asked for: a flood naming a known pod uid
// competes for the reserved part too (docs/security.md).
import { TokenBucket } from '../../lib/token-bucket.js';
import { AuthError } from './identity.js';

export interface ReviewLimiterOptions {
  /** TokenReviews sent per second, both lanes together. */
  perSecond: number;
  /** Reviews that may be sent at once after a quiet period. */
  burst: number;
  /** Reviews waiting for the API server at any moment. */
  maxInFlight: number;
  /** Share of rate, burst and in-flight slots only known callers may use (default 0.2). */
  reserved?: number;
  /** Callers remembered as known (oldest forgotten first; default 100,000). */
  maxKnown?: number;
  now?: () => number;
}

export interface ReviewStats {
  /** TokenReviews sent to the API server. */
  sent: number;
  /** Reviews refused because the budget was spent. */
  throttled: number;
  inFlight: number;
}

export class ReviewLimiter implements ReviewStats {
  readonly #open: TokenBucket;
  readonly #reserved: TokenBucket;
  readonly #openSlots: number;
  readonly #known = new Set<string>();
  readonly #maxKnown: number;
  sent = 0;
  throttled = 0;
  inFlight = 0;

  constructor(private readonly options: ReviewLimiterOptions) {
    const share = options.reserved ?? 0.2;
    if (!(share >= 0 && share < 1)) throw new Error(`reserved share must be in [0, 1), got ${share}`);
    if (!(options.perSecond > 0 && options.burst >= 1 && options.maxInFlight >= 1)) throw new Error('token reviews need a positive rate, a burst and in-flight limit of at least 1');
    const now = options.now ?? Date.now;
    this.#open = new TokenBucket(options.perSecond * (1 - share), Math.max(1, Math.floor(options.burst * (1 - share))), now);
    this.#reserved = new TokenBucket(options.perSecond * share, Math.max(1, Math.floor(options.burst * share)), now);
    this.#openSlots = Math.max(1, options.maxInFlight - Math.ceil(options.maxInFlight * share));
    this.#maxKnown = options.maxKnown ?? 100_000;
  }

  knows(caller: string | undefined): boolean {
    return caller !== undefined && this.#known.has(caller);
  }

  /** Called once the API server accepted a token naming this caller. */
  remember(caller: string): void {
    this.#known.delete(caller);
    this.#known.add(caller);
    if (this.#known.size > this.#maxKnown) {
      const oldest = this.#known.values().next().value;
      if (oldest !== undefined) this.#known.delete(oldest);
    }
  }

  /** Runs review within the budget, or throws AuthError('throttled') at once: callers retry, nothing queues here. */
  async run<T>(caller: string | undefined, review: () => Promise<T>): Promise<T> {
    const known = this.knows(caller);
    const slots = known ? this.options.maxInFlight : this.#openSlots;
    if (this.inFlight >= slots) return this.#throttle(`${this.inFlight} token reviews are already waiting for the API server`);
    // Known callers spend the reserve first, so the open part stays for newcomers.
    if (!(known && this.#reserved.take()) && !this.#open.take()) return this.#throttle('the gateway\'s token review rate is spent');
    this.inFlight += 1;
    this.sent += 1;
    try {
      return await review();
    } finally {
      this.inFlight -= 1;
    }
  }

  #throttle(why: string): never {
    this.throttled += 1;
    throw new AuthError('throttled', `${why}; retry in a few seconds (agents do so on their own)`);
  }
}
