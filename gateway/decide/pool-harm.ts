// Harm on the nodes each pool (OversellPolicy) governs: for memory, kubelet
// evictions and OOM kills of containers without a memory limit, with when; for
// CPU, the node-time observed and how much of it had CPU demand over capacity.
// Kept for the last hour, which is what the policy's risk budget is
// weighed over (policy.ts). Pure, like the load history: the gateway's harm
// meter (metrics/harm-meter.ts) and the simulator (sim/allocators.ts) feed the
// same ledger, so both close the loop by the same rule.

/** How far back harm counts against a pool's budget. */
export const POOL_HARM_WINDOW_MS = 3_600_000;

/** Contention (percent of a node's CPUs with a runnable task waiting, avg10) at or above this counts the node as over capacity. */
export const CPU_OVER_CAPACITY_CONTENTION = 10;

/**
 * The CPU budget is spent when the pool's nodes had CPU demand over capacity
 * for more than this many times its overShare of their node-time in the last
 * hour: the alert OversellCpuBudgetBurning's rate. Below it a pool burns its
 * budget slowly enough for the operator to act; above it the grants stop.
 */
export const CPU_BUDGET_BURN = 10;
/** Node-seconds the pool must have been observed in the hour before its CPU budget can be spent: a few samples are no evidence. */
export const CPU_BUDGET_MIN_OBSERVED_SECONDS = 600;

/** CPU time over capacity is kept in slots of a minute: an hour is 60 of them, whatever the number of nodes. */
const CPU_SLOT_MS = 60_000;

export interface PoolHarmState {
  /** Pods hurt for lack of memory in the window. */
  memoryOverloads: number;
  /** When the newest of them leaves the window (ms), 0 with none: the budget is spent until then. */
  untilMs: number;
  /** Node-seconds of the pool observed in the window (samples with pressure), and of them with CPU demand over capacity. */
  cpuObservedSeconds: number;
  cpuOverSeconds: number;
}

/** A pool with no harm in the window: one object, not one per decision (every review selects a policy). */
const NO_HARM: Readonly<PoolHarmState> = Object.freeze({ memoryOverloads: 0, untilMs: 0, cpuObservedSeconds: 0, cpuOverSeconds: 0 });

interface CpuSlots {
  /** [slot start (ms), observed s, over s], oldest first. */
  slots: [number, number, number][];
  observed: number;
  over: number;
}

export class PoolHarmLedger {
  /** Pool -> [when, how many] of each harm, oldest first. */
  readonly #harms = new Map<string, [number, number][]>();
  readonly #cpu = new Map<string, CpuSlots>();

  record(pool: string, count: number, atMs: number): void {
    if (!(count > 0)) return;
    let list = this.#harms.get(pool);
    if (!list) this.#harms.set(pool, (list = []));
    list.push([atMs, count]);
  }

  /** Node-seconds of one of the pool's nodes observed at atMs, and how many of them with CPU demand over capacity. */
  recordCpu(pool: string, atMs: number, observedSeconds: number, overSeconds: number): void {
    if (!(observedSeconds > 0)) return;
    let c = this.#cpu.get(pool);
    if (!c) this.#cpu.set(pool, (c = { slots: [], observed: 0, over: 0 }));
    const start = Math.floor(atMs / CPU_SLOT_MS) * CPU_SLOT_MS;
    let last = c.slots[c.slots.length - 1];
    if (!last || last[0] < start) c.slots.push((last = [start, 0, 0]));
    const over = Math.min(observedSeconds, Math.max(0, overSeconds));
    // A sample older than the newest slot (out of order) counts in it: the hour moves on either way.
    last[1] += observedSeconds;
    last[2] += over;
    c.observed += observedSeconds;
    c.over += over;
  }

  of(pool: string, nowMs: number): Readonly<PoolHarmState> {
    const memory = this.#memory(pool, nowMs);
    const cpu = this.#cpuOf(pool, nowMs);
    if (!memory && !cpu) return NO_HARM;
    return {
      memoryOverloads: memory?.overloads ?? 0,
      untilMs: memory?.untilMs ?? 0,
      cpuObservedSeconds: cpu?.observed ?? 0,
      cpuOverSeconds: cpu?.over ?? 0,
    };
  }

  #memory(pool: string, nowMs: number): { overloads: number; untilMs: number } | undefined {
    const list = this.#harms.get(pool);
    if (!list) return undefined;
    while (list.length > 0 && list[0]![0] <= nowMs - POOL_HARM_WINDOW_MS) list.shift();
    if (list.length === 0) {
      this.#harms.delete(pool);
      return undefined;
    }
    return { overloads: list.reduce((sum, [, n]) => sum + n, 0), untilMs: list[list.length - 1]![0] + POOL_HARM_WINDOW_MS };
  }

  #cpuOf(pool: string, nowMs: number): CpuSlots | undefined {
    const c = this.#cpu.get(pool);
    if (!c) return undefined;
    while (c.slots.length > 0 && c.slots[0]![0] + CPU_SLOT_MS <= nowMs - POOL_HARM_WINDOW_MS) {
      const [, observed, over] = c.slots.shift()!;
      c.observed -= observed;
      c.over -= over;
    }
    if (c.slots.length === 0) {
      this.#cpu.delete(pool);
      return undefined;
    }
    // Sums of floats shrink back to a crumb, not to 0: below a millisecond over capacity is none.
    return c.over > 1e-3 ? c : undefined;
  }

  /** The pools with memory harm in the window (for the metric). */
  pools(nowMs: number): string[] {
    return [...this.#harms.keys()].filter((p) => this.of(p, nowMs).memoryOverloads > 0);
  }
}
