// Every pool's typical predicted peak (decide/pool-load.ts), from the load
// histories in the store, computed again every few seconds rather than per
// decision: a history moves slowly (its half-life is a day), and 10,000 nodes
// are about five million bucket reads. Sharded, a replica sees the nodes it
// owns: a sample of the pool, which is what a typical node is taken from.
import { poolLoads, type PoolLoad } from '../decide/pool-load.js';
import type { LoadHistoryView } from '../decide/load-history.js';
import type { Policy } from '../decide/policy.js';

export const POOL_LOAD_EVERY_MS = 10_000;

export interface PoolLoadKeeperOptions {
  /** The nodes whose histories count: their labels (what selects their policy) and history. */
  nodes: () => Iterable<{ labels: Record<string, string>; history: LoadHistoryView | undefined }>;
  /** The node's policy, as decisions select it. */
  policyOf: (labels: Record<string, string>) => Policy | undefined;
  everyMs?: number;
}

export class PoolLoadKeeper {
  readonly #o: PoolLoadKeeperOptions;
  #loads = new Map<string, PoolLoad>();
  #timer: NodeJS.Timeout | undefined;

  constructor(options: PoolLoadKeeperOptions) {
    this.#o = options;
  }

  /** The pool's typical peak as last computed; undefined before any of its nodes has a history as long as its policy asks. */
  of(pool: string): PoolLoad | undefined {
    return this.#loads.get(pool);
  }

  refresh(): void {
    const { nodes, policyOf } = this.#o;
    this.#loads = poolLoads(
      (function* () {
        for (const n of nodes()) yield { policy: n.history ? policyOf(n.labels) : undefined, history: n.history };
      })(),
    );
  }

  start(): void {
    this.refresh();
    this.#timer = setInterval(() => this.refresh(), this.#o.everyMs ?? POOL_LOAD_EVERY_MS);
    this.#timer.unref();
  }

  stop(): void {
    clearInterval(this.#timer);
    this.#timer = undefined;
  }
}
