// What a decision reads of a node's recent usage under one policy: the
// policy's statistic of each resource over its window, the points in it, and
// whether there was pressure within its calm period. Everything else in a
// window is for other readers (relief, the harm meter, the query API).
//
// A summary is what a node's usage costs the decision, whoever holds the
// points: the gateway summarizes the window it keeps, and the same figures are
// what an agent can send instead of its samples (issue 46).
import { COLUMN, type UsageWindow } from './usage-window.js';
import { windowStart, windowStatistic } from './usage-stats.js';
import { cpuPressureSince, memoryPressureSince } from './pressure.js';
import { summaryFor, type AgentSummary, type SummaryPlan, type WindowSummary } from './summary-plan.js';

export type { SummaryPlan, WindowSummary } from './summary-plan.js';

/** The summary of no usage at all. */
export const NO_USAGE: WindowSummary = Object.freeze({ newestMs: undefined, samples: 0, spanMs: 0, cpuMillicores: 0, memoryBytes: 0, cpuPressure: false, memoryPressure: false });

/**
 * The window as `plan` reads it, wherever the summary was made: the agent's
 * own under the plan when it ends at the window's newest point, else made
 * here from the points.
 */
export function summaryUnder(window: UsageWindow, plan: SummaryPlan | undefined, capacityMemoryBytes: number, agentSummaries: readonly AgentSummary[] = []): WindowSummary {
  return (plan && summaryFor(agentSummaries, plan, window.newestMs())) ?? summarizeWindow(window, plan, capacityMemoryBytes);
}

/** The window as `policy` reads it; with no policy, only whether there are points (nothing is decided from them). */
export function summarizeWindow(window: UsageWindow, policy: SummaryPlan | undefined, capacityMemoryBytes: number): WindowSummary {
  const newestMs = window.newestMs();
  if (newestMs === undefined) return NO_USAGE;
  if (!policy) return { newestMs, samples: 0, spanMs: 0, cpuMillicores: 0, memoryBytes: 0, cpuPressure: false, memoryPressure: false };
  const from = windowStart(window, policy.windowMs);
  const calmFrom = newestMs - policy.calmPeriodMs;
  return {
    newestMs,
    samples: window.length - from,
    spanMs: spanOf(window, from, newestMs),
    cpuMillicores: windowStatistic(window, from, 'cpuMillicores', policy.cpu.statistic),
    memoryBytes: windowStatistic(window, from, 'memoryBytes', policy.memory.statistic),
    cpuPressure: cpuPressureSince(window, calmFrom, policy.cpu),
    memoryPressure: memoryPressureSince(window, calmFrom, policy.memory, capacityMemoryBytes),
  };
}

/**
 * What the CPU rates of the points from `from` cover: each point's rate is
 * since the point before it, so the span starts there when the window still
 * holds it; else the points' mean spacing stands in for the first one's.
 */
function spanOf(window: UsageWindow, from: number, newestMs: number): number {
  if (from > 0) return newestMs - window.get(from - 1, COLUMN.timestampMs);
  const n = window.length;
  if (n < 2) return 0;
  return Math.round(((newestMs - window.get(0, COLUMN.timestampMs)) * n) / (n - 1));
}
