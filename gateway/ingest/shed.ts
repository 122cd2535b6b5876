// How much to slow the agents, decided from measured event-loop delays: a pure
// step (state, delays, now) -> state, so the policy is table-tested and the
// measuring and announcing stay at the edge (load-shedder.ts). Reviews are
// never shed: when a thread falls behind, agents are told to send less often
// (a rise or pressure still goes at once, agent side), then, once that is at
// its longest and a thread is still behind, to sample less often; and, when it
// is the main thread, queries are refused.
import type { Sending } from './agent-sending.js';

export interface ShedLimits {
  /** The interval agents are told when calm (--agent-send-every). */
  baseMs: number;
  /** The longest ever announced (--shed-max-send-every); below the policies' staleAfter, or steady nodes go stale. */
  maxMs: number;
  /** A thread whose loop delay is above this is overloaded (--shed-loop-delay); 0: never. */
  overloadDelayMs: number;
  /** An overloaded thread is calm again below this (the hysteresis band between the two). */
  calmDelayMs: number;
  /** Periods over overloadDelayMs in a row before a thread is overloaded: one pause (a collection, a large list) is not overload. */
  overloadPeriods: number;
  /**
   * The least share of a period a thread's loop must have been busy for its
   * delay to count as overload. A few long tasks (one caller posting a
   * 1.5 MiB body twice a second: 80 ms of parsing each) move the 99th
   * percentile of the delay on their own, but leave the loop mostly idle;
   * a thread that cannot keep up with its agents is busy nearly all the time.
   */
  overloadBusy: number;
  /** Least time between two doublings: an agent shows its new interval only after its next batch. */
  slowEveryMs: number;
  /** Calm this long before each step back down. */
  calmForMs: number;
  /** The longest sampling interval agents are told (--shed-max-sample-every); 0 or under 2 s: samples are never shed. */
  maxSampleEveryMs: number;
}

export interface ShedState {
  /** The interval announced to agents now. */
  sendEveryMs: number;
  /** The least sampling interval announced now; 0: agents sample at their own. */
  sampleEveryMs: number;
  /** The main thread (store, webhook, query API) is behind: queries are refused. */
  mainOverloaded: boolean;
  /** The ingest thread is behind. */
  ingestOverloaded: boolean;
  /** Periods in a row each thread's delay was over overloadDelayMs. */
  mainOverFor: number;
  ingestOverFor: number;
  /** When sendEveryMs last changed. */
  changedAtMs: number;
  /** Since when every thread's delay has been under calmDelayMs; undefined while one is not. */
  calmSinceMs: number | undefined;
}

/** Loop delays of the last period, in ms; ingestMs undefined without an ingest thread (or before its first report). */
export interface LoopDelays {
  mainMs: number;
  /** The share of the period the main loop was busy (event loop utilization, 0..1); undefined: not measured, the delay alone decides. */
  mainBusy?: number | undefined;
  ingestMs?: number | undefined;
}

/**
 * Limits for a base interval: overloaded after two periods over delayMs with
 * the loop busy at least half of each, calm under half the delay, doubling at
 * most every 10 s, a step down per 30 s calm.
 */
export function shedLimits(baseMs: number, maxMs: number, overloadDelayMs: number, maxSampleEveryMs = 0): ShedLimits {
  return { baseMs, maxMs: Math.max(baseMs, maxMs), overloadDelayMs, calmDelayMs: overloadDelayMs / 2, overloadPeriods: 2, overloadBusy: 0.5, slowEveryMs: 10_000, calmForMs: 30_000, maxSampleEveryMs };
}

export function initialShedState(limits: ShedLimits, nowMs: number): ShedState {
  return { sendEveryMs: limits.baseMs, sampleEveryMs: 0, mainOverloaded: false, ingestOverloaded: false, mainOverFor: 0, ingestOverFor: 0, changedAtMs: nowMs, calmSinceMs: nowMs };
}

/** The smallest interval a doubling moves to: agents sample every second. */
const MIN_SLOWED_MS = 1000;
/** The first sampling interval shed to: every other sample of a 1 s agent. */
const MIN_SHED_SAMPLE_MS = 2000;

/** Hysteresis: overloaded after overloadPeriods over the overload delay, calm again only under the calm delay. */
function overload(was: boolean, overFor: number, delayMs: number | undefined, busy: number | undefined, limits: ShedLimits): [overloaded: boolean, overFor: number] {
  if (delayMs === undefined || limits.overloadDelayMs <= 0) return [false, 0];
  const over = delayMs > limits.overloadDelayMs && (busy === undefined || busy >= limits.overloadBusy) ? overFor + 1 : 0;
  return [was ? delayMs >= limits.calmDelayMs : over >= limits.overloadPeriods, over];
}

/** The next state from the delays measured since the last step. */
export function shedStep(prev: ShedState, delays: LoopDelays, nowMs: number, limits: ShedLimits): ShedState {
  const [mainOverloaded, mainOverFor] = overload(prev.mainOverloaded, prev.mainOverFor, delays.mainMs, delays.mainBusy, limits);
  // Only agents reach an ingest thread: its delay alone decides.
  const [ingestOverloaded, ingestOverFor] = overload(prev.ingestOverloaded, prev.ingestOverFor, delays.ingestMs, undefined, limits);
  const worst = Math.max(delays.mainMs, delays.ingestMs ?? 0);
  const calm = !mainOverloaded && !ingestOverloaded && worst < limits.calmDelayMs;
  let { sendEveryMs, sampleEveryMs, changedAtMs } = prev;
  const calmSinceMs = calm ? (prev.calmSinceMs ?? nowMs) : undefined;
  const canShedSamples = limits.maxSampleEveryMs >= MIN_SHED_SAMPLE_MS;
  if (mainOverloaded || ingestOverloaded) {
    // The first overloaded step slows at once; later ones wait for agents to
    // have heard the last, and only while a delay is still over the limit
    // (inside the hysteresis band the interval holds). Fewer messages first;
    // fewer samples only once messages are as few as they go.
    const first = !prev.mainOverloaded && !prev.ingestOverloaded;
    const over = mainOverFor > 0 || ingestOverFor > 0;
    const due = over && (first || nowMs - changedAtMs >= limits.slowEveryMs);
    if (due && sendEveryMs < limits.maxMs) {
      sendEveryMs = Math.min(limits.maxMs, Math.max(sendEveryMs * 2, MIN_SLOWED_MS));
      changedAtMs = nowMs;
    } else if (due && canShedSamples && sampleEveryMs < limits.maxSampleEveryMs) {
      sampleEveryMs = Math.min(limits.maxSampleEveryMs, Math.max(sampleEveryMs * 2, MIN_SHED_SAMPLE_MS));
      changedAtMs = nowMs;
    }
  } else if (calmSinceMs !== undefined && nowMs - calmSinceMs >= limits.calmForMs && nowMs - changedAtMs >= limits.calmForMs) {
    // Back down in the reverse order: every sample first, then timely sending.
    if (sampleEveryMs > 0) {
      const half = sampleEveryMs / 2;
      sampleEveryMs = half < MIN_SHED_SAMPLE_MS ? 0 : Math.round(half);
      changedAtMs = nowMs;
    } else if (sendEveryMs > limits.baseMs) {
      const half = sendEveryMs / 2;
      sendEveryMs = half < Math.max(limits.baseMs, MIN_SLOWED_MS) ? limits.baseMs : Math.round(half);
      changedAtMs = nowMs;
    }
  }
  return { sendEveryMs, sampleEveryMs, mainOverloaded, ingestOverloaded, mainOverFor, ingestOverFor, changedAtMs, calmSinceMs };
}

/** Whether anything is being shed: a thread is overloaded, or agents still send less often than when calm. */
export function isShedding(state: ShedState, limits: ShedLimits): boolean {
  return state.mainOverloaded || state.ingestOverloaded || state.sendEveryMs > limits.baseMs || state.sampleEveryMs > 0;
}

/** The most samples one batch may carry (agent-stream-service.ts refuses more). */
export const MAX_BATCH_SAMPLES = 256;

/**
 * What agents are told at an interval: the batch grows with it, so a batch
 * does not fill (and go) before its time; base.maxBatchSamples 0 (no batches)
 * stays 0: such agents send every sample at once and cannot be slowed.
 */
export function sendingAt(sendEveryMs: number, base: Sending, minSampleIntervalMs = 0): Sending {
  if (base.maxBatchSamples === 0 || sendEveryMs <= base.sendEveryMs) return { maxBatchSamples: base.maxBatchSamples, sendEveryMs, minSampleIntervalMs };
  const scaled = Math.ceil((base.maxBatchSamples * sendEveryMs) / Math.max(base.sendEveryMs, MIN_SLOWED_MS));
  return { maxBatchSamples: Math.min(MAX_BATCH_SAMPLES, Math.max(base.maxBatchSamples, scaled)), sendEveryMs, minSampleIntervalMs };
}
