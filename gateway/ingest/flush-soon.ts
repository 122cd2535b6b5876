// When an ingest thread hands its batch to the main thread: FLUSH_EVERY_MS
// after the first op since the last hand-over, never on an interval. An idle
// thread then never wakes (a 5 ms interval cost every idle ingest thread about
// 10 millicores: docs/performance-log.md, 2026-11-29), and a busy one still
// hands over every `everyMs`.

export interface Timers {
  setTimeout(fn: () => void, ms: number): unknown;
  clearTimeout(handle: unknown): void;
}

export interface FlushSoon {
  /** Something was queued: flush within `everyMs` (arms the timer unless it is armed). */
  soon(): void;
  /** Flush now (a question the main thread must answer at once); disarms the timer. */
  now(): void;
  /** Disarms the timer without flushing. */
  stop(): void;
}

export function flushSoon(flush: () => void, everyMs: number, timers: Timers = globalThis as unknown as Timers): FlushSoon {
  let armed: unknown;
  const disarm = () => {
    if (armed !== undefined) timers.clearTimeout(armed);
    armed = undefined;
  };
  const now = () => {
    disarm();
    flush();
  };
  // A timer that fired is spent: clearing it again cost a busy thread as much as the flush's own hand-over.
  const fired = () => {
    armed = undefined;
    flush();
  };
  return {
    soon: () => {
      armed ??= timers.setTimeout(fired, everyMs);
    },
    now,
    stop: disarm,
  };
}
