// Harm from a lack of memory on the nodes each pool (OversellPolicy) governs:
// kubelet evictions and OOM kills of containers without a memory limit, with
// when. Kept for the last hour, which is what the policy's risk budget is
// weighed over (policy.ts). Pure, like the load history: the gateway's harm
// meter (metrics/harm-meter.ts) and the simulator (sim/allocators.ts) feed the
// same ledger, so both close the loop by the same rule.

/** How far back harm counts against a pool's budget. */
export const POOL_HARM_WINDOW_MS = 3_600_000;

export interface PoolHarmState {
  /** Pods hurt for lack of memory in the window. */
  memoryOverloads: number;
  /** When the newest of them leaves the window (ms), 0 with none: the budget is spent until then. */
  untilMs: number;
}

/** A pool with no harm in the window: one object, not one per decision (every review selects a policy). */
const NO_HARM: Readonly<PoolHarmState> = Object.freeze({ memoryOverloads: 0, untilMs: 0 });

export class PoolHarmLedger {
  /** Pool -> [when, how many] of each harm, oldest first. */
  readonly #harms = new Map<string, [number, number][]>();

  record(pool: string, count: number, atMs: number): void {
    if (!(count > 0)) return;
    let list = this.#harms.get(pool);
    if (!list) this.#harms.set(pool, (list = []));
    list.push([atMs, count]);
  }

  of(pool: string, nowMs: number): Readonly<PoolHarmState> {
    const list = this.#harms.get(pool);
    if (!list) return NO_HARM;
    while (list.length > 0 && list[0]![0] <= nowMs - POOL_HARM_WINDOW_MS) list.shift();
    if (list.length === 0) {
      this.#harms.delete(pool);
      return NO_HARM;
    }
    return { memoryOverloads: list.reduce((sum, [, n]) => sum + n, 0), untilMs: list[list.length - 1]![0] + POOL_HARM_WINDOW_MS };
  }

  /** The pools with harm in the window (for the metric). */
  pools(nowMs: number): string[] {
    return [...this.#harms.keys()].filter((p) => this.of(p, nowMs).memoryOverloads > 0);
  }
}
