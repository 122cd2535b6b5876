// A node's load factor (usage / bound requests) over hours: what a risk
// budget predicts the node's peak from. The 10-minute usage window cannot see
// yesterday's daily peak; this can, in about 4 KiB per node.
//
// Per resource, one histogram of the load factor, each observation weighted by
// the time it covered and decayed with a half-life, so a share of the weight is
// a share of recent node-time: the (1 - s) quantile is the load factor the node
// stayed under for all but s of its recent time. Load factor, not usage: pods
// come and go, and a factor learnt on yesterday's pods applies to today's
// (new pods are assumed to use their requests as the node's pods did).
//
// Weights are stored multiplied by 2^((t - origin) / halfLife), so a record
// touches one bucket; all are rescaled once the multiplier grows large.

/** Buckets of 1/128 of requests up to 2x requests; above that one bucket, kept with its largest value. */
const STEP = 128;
const BUCKETS = 2 * STEP;
const OVER = BUCKETS;
/** A bucket whose share of the weight is below this counts as unseen for the maximum (share 0). */
const UNSEEN = 1e-6;
/** One gap between observations counts at most this long: a silent agent is no evidence of a quiet node. */
const MAX_GAP_MS = 10_000;
/** Rescale before 2^exponent loses precision against new weights. */
const RESCALE_EXPONENT = 40;

export type LoadResource = 'cpu' | 'memory';

/** Buckets per resource: 1/128 of requests up to 2x, then the overflow bucket (its largest factor is overMax). */
export const HISTORY_BUCKETS = BUCKETS + 1;
/** The factor from which a sample lands in the overflow bucket. */
export const OVERFLOW_FACTOR = BUCKETS / STEP;
/** Weights are never more than their covered time times 2^this (the rescale keeps them there). */
export const MAX_WEIGHT_EXPONENT = RESCALE_EXPONENT;
/** The time the first record covers; each later one covers its gap, at most MAX_GAP_MS. */
export const FIRST_COVERED_MS = 1000;

/**
 * Everything a LoadHistory holds, for a snapshot that outlives the process
 * (load-history-codec.ts). cpu and memory have HISTORY_BUCKETS weights each,
 * scaled by 2^((t - originMs) / halfLifeMs); total is their common sum.
 */
export interface LoadHistoryState {
  halfLifeMs: number;
  originMs: number;
  firstMs: number;
  lastMs: number;
  total: number;
  overMax: { cpu: number; memory: number };
  cpu: Float64Array;
  memory: Float64Array;
}

/** A day: yesterday's peak still weighs half as much as today's. */
export const DEFAULT_HISTORY_HALF_LIFE_MS = 24 * 3_600_000;

/** What a decision reads of a node's load history. */
export interface LoadHistoryView {
  /** Time between the first and the last observation. */
  spanMs(): number;
  /** The load factor the node stayed at or under for all but `share` of its (decayed) time; share 0: the largest seen. */
  quantile(resource: LoadResource, share: number): number;
}

export class LoadHistory implements LoadHistoryView {
  readonly halfLifeMs: number;
  readonly #cpu = new Float64Array(BUCKETS + 1);
  readonly #memory = new Float64Array(BUCKETS + 1);
  #overMax = { cpu: 0, memory: 0 };
  #total = 0;
  #originMs = 0;
  #firstMs: number | undefined;
  #lastMs: number | undefined;

  constructor(halfLifeMs: number) {
    if (!(halfLifeMs > 0)) throw new RangeError(`load history half-life must be positive, got ${halfLifeMs}`);
    this.halfLifeMs = halfLifeMs;
  }

  /** A history as it was saved (state()); the state must have been checked (decodeLoadHistory does). */
  static fromState(state: LoadHistoryState): LoadHistory {
    const h = new LoadHistory(state.halfLifeMs);
    h.#cpu.set(state.cpu);
    h.#memory.set(state.memory);
    h.#overMax = { ...state.overMax };
    h.#total = state.total;
    h.#originMs = state.originMs;
    h.#firstMs = state.firstMs;
    h.#lastMs = state.lastMs;
    return h;
  }

  /** What the history holds, copied; undefined before its first record (nothing to keep). */
  state(): LoadHistoryState | undefined {
    if (this.#firstMs === undefined || this.#lastMs === undefined) return undefined;
    return {
      halfLifeMs: this.halfLifeMs,
      originMs: this.#originMs,
      firstMs: this.#firstMs,
      lastMs: this.#lastMs,
      total: this.#total,
      overMax: { ...this.#overMax },
      cpu: this.#cpu.slice(),
      memory: this.#memory.slice(),
    };
  }

  spanMs(): number {
    return this.#firstMs === undefined || this.#lastMs === undefined ? 0 : this.#lastMs - this.#firstMs;
  }

  /**
   * The node's load factors at tMs (usage / bound requests, per resource),
   * covering the time since the previous record (at most MAX_GAP_MS). Records
   * out of order, or with a factor that is not a finite non-negative number, are
   * ignored.
   */
  record(tMs: number, cpu: number, memory: number): void {
    if (!(cpu >= 0 && memory >= 0 && Number.isFinite(cpu) && Number.isFinite(memory) && Number.isFinite(tMs))) return;
    if (this.#lastMs !== undefined && tMs <= this.#lastMs) return;
    if (this.#firstMs === undefined) {
      this.#firstMs = tMs;
      this.#originMs = tMs;
    }
    const covered = this.#lastMs === undefined ? FIRST_COVERED_MS : Math.min(MAX_GAP_MS, tMs - this.#lastMs);
    this.#lastMs = tMs;
    let exponent = (tMs - this.#originMs) / this.halfLifeMs;
    if (exponent > RESCALE_EXPONENT) {
      this.#rescale(tMs);
      exponent = 0;
    }
    const weight = covered * 2 ** exponent;
    const c = bucketOf(cpu);
    const m = bucketOf(memory);
    this.#cpu[c] = this.#cpu[c]! + weight;
    this.#memory[m] = this.#memory[m]! + weight;
    if (cpu >= BUCKETS / STEP && cpu > this.#overMax.cpu) this.#overMax.cpu = cpu;
    if (memory >= BUCKETS / STEP && memory > this.#overMax.memory) this.#overMax.memory = memory;
    this.#total += weight;
  }

  quantile(resource: LoadResource, share: number): number {
    if (this.#total <= 0) return 0;
    const h = resource === 'cpu' ? this.#cpu : this.#memory;
    // Walk down from the top until more than `share` of the weight lies above.
    const allowed = Math.max(share, 0) * this.#total;
    const unseen = UNSEEN * this.#total;
    let above = 0;
    for (let b = OVER; b >= 0; b--) {
      const w = h[b]!;
      if (w <= unseen && share <= 0) continue;
      above += w;
      if (above > allowed) return b === OVER ? this.#overMax[resource] : (b + 1) / STEP;
    }
    return 0;
  }

  #rescale(tMs: number): void {
    const f = 2 ** (-(tMs - this.#originMs) / this.halfLifeMs);
    for (let b = 0; b <= OVER; b++) {
      this.#cpu[b] = this.#cpu[b]! * f;
      this.#memory[b] = this.#memory[b]! * f;
    }
    this.#total *= f;
    this.#originMs = tMs;
  }
}

/** The bucket a factor falls in; its upper edge is what quantile() reports (never below the factor). */
function bucketOf(factor: number): number {
  return Math.min(OVER, Math.floor(factor * STEP));
}

/** Below this share of raw allocatable bound, the node's own daemons weigh too much in usage / requests to learn from. */
export const MIN_REQUESTS_SHARE = 0.25;

/**
 * Records one sample of a node in its history, unless its load factor would
 * mislead: a pod still starting (its requests count, its usage does not show
 * yet) or a node with little bound (the system's own usage over few requests).
 */
export function recordLoad(
  history: LoadHistory,
  tMs: number,
  usage: { cpu: number; memory: number },
  requests: { cpu: number; memory: number },
  raw: { cpu: number; memory: number },
  starting: boolean,
): void {
  if (starting || !(requests.cpu >= MIN_REQUESTS_SHARE * raw.cpu) || !(requests.memory >= MIN_REQUESTS_SHARE * raw.memory)) return;
  history.record(tMs, usage.cpu / requests.cpu, usage.memory / requests.memory);
}
