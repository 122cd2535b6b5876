// When an ingest thread hands its batch to the main thread: within `everyMs`
// (or the op's own wait) of the first op since the last hand-over, never on
// an interval. An idle thread then never wakes (a 5 ms interval cost every
// idle ingest thread about 10 millicores: docs/performance-log.md,
// 2026-11-29), and a busy one still hands over every `everyMs`.

export interface Timers {
  setTimeout(fn: () => void, ms: number): unknown;
  clearTimeout(handle: unknown): void;
  /** Milliseconds on a clock that never goes back. */
  now(): number;
}

const realTimers: Timers = {
  setTimeout: (fn, ms) => setTimeout(fn, ms),
  clearTimeout: (handle) => clearTimeout(handle as NodeJS.Timeout),
  now: () => performance.now(),
};

export interface FlushSoon {
  /**
   * Something was queued that may wait `withinMs` (default everyMs): flush by
   * then. Arms the timer, or brings an armed one forward; never later.
   */
  soon(withinMs?: number): void;
  /** Flush now (a question the main thread must answer at once); disarms the timer. */
  now(): void;
  /** Disarms the timer without flushing. */
  stop(): void;
}

export function flushSoon(flush: () => void, everyMs: number, timers: Timers = realTimers): FlushSoon {
  let armed: unknown;
  let dueAt = Number.POSITIVE_INFINITY;
  const disarm = () => {
    if (armed !== undefined) timers.clearTimeout(armed);
    armed = undefined;
    dueAt = Number.POSITIVE_INFINITY;
  };
  const now = () => {
    disarm();
    flush();
  };
  // A timer that fired is spent: clearing it again cost a busy thread as much as the flush's own hand-over.
  const fired = () => {
    armed = undefined;
    dueAt = Number.POSITIVE_INFINITY;
    flush();
  };
  return {
    soon: (withinMs = everyMs) => {
      const at = timers.now() + withinMs;
      if (at >= dueAt) return;
      if (armed !== undefined) timers.clearTimeout(armed);
      dueAt = at;
      armed = timers.setTimeout(fired, withinMs);
    },
    now,
    stop: disarm,
  };
}
