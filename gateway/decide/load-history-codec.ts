// A node's load history as bytes, so it outlives the gateway process (the
// leader keeps them in ConfigMaps: gateway/act/history-snapshots.ts). The bytes
// come back from the API server, where anyone with write access to the
// gateway's namespace could have changed them: decoding checks every field
// against what LoadHistory itself can produce and refuses anything else with a
// reason, so a bad entry costs one node its history, never a NaN in a decision.
//
// Version 1, little-endian:
//   u8 version | f64 halfLifeMs originMs firstMs lastMs total overMaxCpu overMaxMemory
//   | cpu bitmap (33 bytes: which of the 257 buckets are non-zero) | memory bitmap
//   | the non-zero weights, f64 each: cpu's in bucket order, then memory's
// Sparse: a node's factor moves over a few dozen buckets, so a typical entry is
// about 1 KiB; the largest possible is MAX_ENCODED_BYTES (every bucket set).
import { HISTORY_BUCKETS, LoadHistory, FIRST_COVERED_MS, MAX_WEIGHT_EXPONENT, OVERFLOW_FACTOR, type LoadHistoryState } from './load-history.js';

export const LOAD_HISTORY_CODEC_VERSION = 1;

const BITMAP_BYTES = Math.ceil(HISTORY_BUCKETS / 8);
const HEADER_BYTES = 1 + 7 * 8 + 2 * BITMAP_BYTES;
/** Every bucket of both resources non-zero. */
export const MAX_ENCODED_BYTES = HEADER_BYTES + 2 * HISTORY_BUCKETS * 8;
/** Half-lives a gateway could have been built with: a minute to a year. */
const HALF_LIFE_RANGE = [60_000, 365 * 24 * 3_600_000] as const;
/** The latest time a Date can hold: later is not a timestamp. */
const MAX_TIME_MS = 8.64e15;
/** Largest overflow factor believed (usage / bound requests, with requests at least a quarter of raw: a few at most). */
export const MAX_LOAD_FACTOR = 1000;
/** Sums of the same weights in another order agree to far better than this. */
const SUM_TOLERANCE = 1e-6;

export type DecodedHistory = { history: LoadHistory } | { error: string };

/** The history as bytes; undefined for a history with no record yet (nothing worth keeping). */
export function encodeLoadHistory(history: LoadHistory): Uint8Array | undefined {
  const s = history.state();
  if (!s) return undefined;
  const count = nonZero(s.cpu) + nonZero(s.memory);
  const bytes = new Uint8Array(HEADER_BYTES + 8 * count);
  const view = new DataView(bytes.buffer);
  bytes[0] = LOAD_HISTORY_CODEC_VERSION;
  let at = 1;
  for (const v of [s.halfLifeMs, s.originMs, s.firstMs, s.lastMs, s.total, s.overMax.cpu, s.overMax.memory]) {
    view.setFloat64(at, v, true);
    at += 8;
  }
  let weightAt = HEADER_BYTES;
  for (const weights of [s.cpu, s.memory]) {
    for (let b = 0; b < HISTORY_BUCKETS; b++) {
      const w = weights[b]!;
      if (w === 0) continue;
      bytes[at + (b >> 3)]! |= 1 << (b & 7);
      view.setFloat64(weightAt, w, true);
      weightAt += 8;
    }
    at += BITMAP_BYTES;
  }
  return bytes;
}

/** The history the bytes hold, or why they are refused. Never throws. */
export function decodeLoadHistory(bytes: Uint8Array): DecodedHistory {
  try {
    const state = readState(bytes);
    return typeof state === 'string' ? { error: state } : { history: LoadHistory.fromState(state) };
  } catch (err) {
    return { error: `not a load history: ${(err as Error).message}` };
  }
}

function readState(bytes: Uint8Array): LoadHistoryState | string {
  if (bytes.length === 0) return 'empty';
  if (bytes[0] !== LOAD_HISTORY_CODEC_VERSION) return `version ${bytes[0]}, this gateway reads version ${LOAD_HISTORY_CODEC_VERSION}`;
  if (bytes.length < HEADER_BYTES) return `truncated: ${bytes.length} bytes, the header alone is ${HEADER_BYTES}`;
  if (bytes.length > MAX_ENCODED_BYTES) return `${bytes.length} bytes, over the ${MAX_ENCODED_BYTES} a load history can take`;
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const f = (i: number) => view.getFloat64(1 + 8 * i, true);
  const [halfLifeMs, originMs, firstMs, lastMs, total, overCpu, overMemory] = [f(0), f(1), f(2), f(3), f(4), f(5), f(6)] as const;
  const bitmaps = 1 + 7 * 8;
  let count = 0;
  for (let i = 0; i < 2 * BITMAP_BYTES; i++) count += popcount(bytes[bitmaps + i]!);
  const spare = 0xff & ~((1 << (HISTORY_BUCKETS % 8)) - 1);
  if ((bytes[bitmaps + BITMAP_BYTES - 1]! & spare) !== 0 || (bytes[bitmaps + 2 * BITMAP_BYTES - 1]! & spare) !== 0) {
    return `its bitmaps name buckets past the ${HISTORY_BUCKETS} there are`;
  }
  if (bytes.length !== HEADER_BYTES + 8 * count) return `${bytes.length} bytes where its bitmaps name ${count} weights (${HEADER_BYTES + 8 * count} bytes)`;

  if (!(halfLifeMs >= HALF_LIFE_RANGE[0] && halfLifeMs <= HALF_LIFE_RANGE[1])) return `half-life ${halfLifeMs} ms outside ${HALF_LIFE_RANGE[0]}..${HALF_LIFE_RANGE[1]} ms`;
  if (!(firstMs >= 0 && firstMs <= originMs && originMs <= lastMs && lastMs <= MAX_TIME_MS)) {
    return `times out of order or range: first ${firstMs}, origin ${originMs}, last ${lastMs} (needs 0 <= first <= origin <= last <= ${MAX_TIME_MS})`;
  }
  const exponent = (lastMs - originMs) / halfLifeMs;
  if (exponent > MAX_WEIGHT_EXPONENT) return `last record ${lastMs - originMs} ms after its origin, past the ${MAX_WEIGHT_EXPONENT} half-lives a history rescales at`;
  for (const [name, over] of [['cpu', overCpu], ['memory', overMemory]] as const) {
    if (!(over === 0 || (over >= OVERFLOW_FACTOR && over <= MAX_LOAD_FACTOR))) return `${name} overflow maximum ${over} is neither 0 nor within ${OVERFLOW_FACTOR}..${MAX_LOAD_FACTOR}`;
  }

  const cpu = new Float64Array(HISTORY_BUCKETS);
  const memory = new Float64Array(HISTORY_BUCKETS);
  let weightAt = HEADER_BYTES;
  const sums = [0, 0];
  for (const [r, weights] of [cpu, memory].entries()) {
    for (let b = 0; b < HISTORY_BUCKETS; b++) {
      if ((bytes[bitmaps + r * BITMAP_BYTES + (b >> 3)]! & (1 << (b & 7))) === 0) continue;
      const w = view.getFloat64(weightAt, true);
      weightAt += 8;
      if (!(w > 0 && Number.isFinite(w))) return `${r === 0 ? 'cpu' : 'memory'} bucket ${b} has weight ${w}, not a positive number`;
      weights[b] = w;
      sums[r]! += w;
    }
  }
  // Every record adds its weight to one bucket of each resource and to the total;
  // a record covers at most its gap (the first FIRST_COVERED_MS), scaled by at most 2^exponent.
  const most = (FIRST_COVERED_MS + (lastMs - firstMs)) * 2 ** exponent * (1 + SUM_TOLERANCE);
  if (!(total > 0 && total <= most)) return `total weight ${total} outside (0, ${most}], what ${lastMs - firstMs} ms of records can add up to`;
  for (const [r, sum] of sums.entries()) {
    if (!(Math.abs(sum - total) <= SUM_TOLERANCE * total)) return `${r === 0 ? 'cpu' : 'memory'} weights sum to ${sum}, not the total ${total}`;
  }
  if (cpu[HISTORY_BUCKETS - 1]! > 0 && overCpu === 0) return 'cpu overflow bucket has weight but no maximum';
  if (memory[HISTORY_BUCKETS - 1]! > 0 && overMemory === 0) return 'memory overflow bucket has weight but no maximum';
  return { halfLifeMs, originMs, firstMs, lastMs, total, overMax: { cpu: overCpu, memory: overMemory }, cpu, memory };
}

function nonZero(weights: Float64Array): number {
  let n = 0;
  for (const w of weights) if (w !== 0) n += 1;
  return n;
}

function popcount(byte: number): number {
  let n = 0;
  for (let b = byte; b !== 0; b &= b - 1) n += 1;
  return n;
}
