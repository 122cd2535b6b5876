// What a window is summarized by (a plan: the part of a policy that reads
// usage points) and what it is summarized to. The gateway holds policies; an
// agent is told the plans and summarizes its own window by them, so a
// decision reads the same figures wherever the points are.
import type { Statistic } from './usage-stats.js';

export interface SummaryPlan {
  /** The newest windowMs of points are summarized. */
  windowMs: number;
  /** Pressure counts while within this long before the newest point. */
  calmPeriodMs: number;
  cpu: { statistic: Statistic; pressureThreshold: number };
  memory: {
    statistic: Statistic;
    pressureThreshold: number;
    /** Working set / capacity at or above which memory is under pressure. */
    workingSetThreshold: number;
  };
}

/** What a decision reads of a node's recent usage under one plan (window-summary.ts makes it from a window). */
export interface WindowSummary {
  /** The newest point's time (agent clock); undefined: no point at all. */
  newestMs: number | undefined;
  /** Points within the plan's window (the newest windowMs). */
  samples: number;
  /** The time the points' CPU rates cover: from the point before the oldest in the window to the newest (0: unknown). */
  spanMs: number;
  /** The plan's CPU statistic over its window; 0 with no point in it. */
  cpuMillicores: number;
  /** The plan's memory statistic over its window; 0 with no point in it. */
  memoryBytes: number;
  /** A point within the calm period before the newest showed CPU pressure. */
  cpuPressure: boolean;
  /** A point within the calm period showed memory pressure (PSI, or a working set near capacity). */
  memoryPressure: boolean;
}

/** A window summarized where its points are (an agent), under the plan with this id. */
export interface AgentSummary {
  planId: number;
  summary: WindowSummary;
}

/** The summary among `summaries` made by `plan` and ending at newestMs (the newest point the reader holds), if any. */
export function summaryFor(summaries: readonly AgentSummary[], plan: SummaryPlan, newestMs: number | undefined): WindowSummary | undefined {
  if (summaries.length === 0 || newestMs === undefined) return undefined;
  const id = planId(plan);
  for (const s of summaries) if (s.planId === id && s.summary.newestMs === newestMs) return s.summary;
  return undefined;
}

const ids = new WeakMap<SummaryPlan, number>();

/**
 * A plan's name on the wire: FNV-1a of its fields, never 0. Every replica and
 * every agent computes the same id for the same plan, so a summary made for
 * one replica's plan is read by another's.
 */
export function planId(plan: SummaryPlan): number {
  const known = ids.get(plan);
  if (known !== undefined) return known;
  const text = [plan.windowMs, plan.calmPeriodMs, plan.cpu.statistic, plan.cpu.pressureThreshold, plan.memory.statistic, plan.memory.pressureThreshold, plan.memory.workingSetThreshold].join('|');
  let h = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) h = Math.imul(h ^ text.charCodeAt(i), 0x01000193) >>> 0;
  const id = h === 0 ? 1 : h;
  ids.set(plan, id);
  return id;
}
