// Pressure in a node's usage window: PSI at or above a policy's threshold, or
// a working set near capacity. The decision falls to the floor while there was
// pressure within the calm period; the status writer checks the newest point.
import { COLUMN, type UsageWindow } from './usage-window.js';
import type { SummaryPlan } from './summary-plan.js';

/** The window's point i shows CPU pressure under this plan. */
function cpuPressureAt(window: UsageWindow, i: number, p: SummaryPlan['cpu']): boolean {
  return window.get(i, COLUMN.cpuPressure) >= p.pressureThreshold;
}

/** The window's point i shows memory pressure: PSI, or a working set near capacity. */
function memoryPressureAt(window: UsageWindow, i: number, p: SummaryPlan['memory'], capacity: number): boolean {
  return window.get(i, COLUMN.memoryPressure) >= p.pressureThreshold || (capacity > 0 && window.get(i, COLUMN.memoryBytes) >= p.workingSetThreshold * capacity);
}

/** The newest point of the window shows pressure of either kind: the one check the status writer makes on every sample. */
export function pressureNow(window: UsageWindow, policy: SummaryPlan, capacityMemoryBytes: number): boolean {
  const last = window.length - 1;
  return last >= 0 && (cpuPressureAt(window, last, policy.cpu) || memoryPressureAt(window, last, policy.memory, capacityMemoryBytes));
}

/** A point at or after sinceMs shows pressure, by `at`. */
function pressureSince(window: UsageWindow, sinceMs: number, at: (i: number) => boolean): boolean {
  for (let i = window.length - 1; i >= 0 && window.get(i, COLUMN.timestampMs) >= sinceMs; i--) if (at(i)) return true;
  return false;
}

export function cpuPressureSince(window: UsageWindow, sinceMs: number, p: SummaryPlan['cpu']): boolean {
  return pressureSince(window, sinceMs, (i) => cpuPressureAt(window, i, p));
}

export function memoryPressureSince(window: UsageWindow, sinceMs: number, p: SummaryPlan['memory'], capacity: number): boolean {
  return pressureSince(window, sinceMs, (i) => memoryPressureAt(window, i, p, capacity));
}
