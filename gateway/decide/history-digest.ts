// A node's load history as another replica reads it: its span and the
// quantiles the policies read (each risk budget's share, and 0: the largest
// factor seen), in a few numbers instead of its 4 KiB of buckets. A share the
// digest does not hold reads as the largest seen, so a digest never predicts
// a smaller peak than the history would.
import type { LoadHistoryView, LoadResource } from './load-history.js';

/** [share, cpu load factor, memory load factor]. */
export type DigestQuantile = readonly [share: number, cpu: number, memory: number];

export interface HistoryDigest {
  spanMs: number;
  /** Share 0 first. */
  quantiles: readonly DigestQuantile[];
}

/** Most shares a digest holds: more than any gateway's policies read. */
export const MAX_DIGEST_SHARES = 33;

/** The shares `history` is digested at: 0, then each distinct share asked for, at most MAX_DIGEST_SHARES in all. */
export function digestShares(shares: Iterable<number>): number[] {
  const out = [0];
  for (const s of shares) if (s > 0 && s <= 1 && !out.includes(s) && out.length < MAX_DIGEST_SHARES) out.push(s);
  return out;
}

export function digestHistory(history: LoadHistoryView, shares: readonly number[]): HistoryDigest {
  return { spanMs: history.spanMs(), quantiles: shares.map((s) => [s, history.quantile('cpu', s), history.quantile('memory', s)] as const) };
}

export class DigestedHistory implements LoadHistoryView {
  constructor(private readonly digest: HistoryDigest) {}

  spanMs(): number {
    return this.digest.spanMs;
  }

  quantile(resource: LoadResource, share: number): number {
    const q = this.digest.quantiles;
    const at = resource === 'cpu' ? 1 : 2;
    for (const row of q) if (row[0] === share) return row[at];
    // The largest seen: share 0, first.
    return q.length > 0 ? q[0]![at] : 0;
  }
}
