// How late this thread's event loop runs: what a review, a query or an agent's
// batch arriving now would wait before its callback runs. Per thread (a
// worker's monitor sees its own loop only).
import { type EventLoopUtilization, monitorEventLoopDelay, performance } from 'node:perf_hooks';

/** The monitor's timer period; what it records includes this, which read() takes off. */
const RESOLUTION_MS = 10;

export interface LoopDelay {
  /** The 99th percentile of the delay since the last read, in ms; starts the next period. */
  read(): number;
  /** The share of the time since the last busy() the loop was busy (event loop utilization, 0..1); starts the next period. */
  busy(): number;
  stop(): void;
}

export function loopDelay(): LoopDelay {
  const h = monitorEventLoopDelay({ resolution: RESOLUTION_MS });
  h.enable();
  let since: EventLoopUtilization = performance.eventLoopUtilization();
  return {
    busy() {
      const now = performance.eventLoopUtilization();
      const { utilization } = performance.eventLoopUtilization(now, since);
      since = now;
      return utilization;
    },
    read() {
      // Nothing recorded yet: a period shorter than the resolution.
      const ms = h.count === 0 ? 0 : Math.max(0, h.percentile(99) / 1e6 - RESOLUTION_MS);
      h.reset();
      return ms;
    },
    stop: () => h.disable(),
  };
}
