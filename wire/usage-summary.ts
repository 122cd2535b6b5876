// Summary plans and summaries as the contract carries them (Settings.summary_plans,
// Sample.summaries), to and from lib/usage's types. Reading from the wire
// refuses what no plan or window can be: the agent gets plans from a gateway,
// the gateway gets summaries from agents, and neither trusts the other's bytes.
import type { SummaryPlan__Output } from '../proto/gen/oversell/v1/SummaryPlan.js';
import type { UsageSummary__Output } from '../proto/gen/oversell/v1/UsageSummary.js';
import { planId, type AgentSummary, type SummaryPlan, type WindowSummary } from '../lib/usage/summary-plan.js';
import { STATISTICS, type Statistic } from '../lib/usage/usage-stats.js';

/** At most this many plans in one Settings, and summaries in one sample: more distinct windows than any gateway's policies have. */
export const MAX_SUMMARY_PLANS = 16;
/** No plan's window is longer than a day: an agent keeps the points of its longest plan. */
export const MAX_PLAN_WINDOW_MS = 86_400_000;
/**
 * A gateway acknowledges a stream of summarized samples once this long has
 * passed since its last ack (a summary needs no replay; the ack only says the
 * gateway is there), and the agent waits this long plus two send intervals
 * before it takes the gateway for silent. What an agent older than
 * Hello.reads_summary_ack_every waits for, and what an agent assumes of a
 * gateway that does not say (Settings.summary_ack_every_ms 0).
 */
export const SUMMARY_ACK_EVERY_MS = 30_000;
/**
 * The same for an agent that reads Settings.summary_ack_every_ms. An ack costs
 * the gateway about 300 µs (a write through grpc-js, HTTP/2 and TLS on its own
 * connection; docs/performance-log.md, 2026-12-07); the price is a silent
 * gateway (a half-open connection; a closed one is seen at once) noticed
 * after 130 s instead of 70 at the default 20 s send interval.
 */
export const SUMMARY_ACK_EVERY_READER_MS = 90_000;

/** How long an agent waits for an ack on a summarizing stream before it takes the gateway for silent. */
export function summarySilenceMs(summaryAckEveryMs: number, sendEveryMs: number): number {
  return (summaryAckEveryMs > 0 ? summaryAckEveryMs : SUMMARY_ACK_EVERY_MS) + 2 * sendEveryMs;
}

export function planToWire(plan: SummaryPlan): SummaryPlan__Output {
  return {
    id: planId(plan), windowMs: plan.windowMs, calmPeriodMs: plan.calmPeriodMs,
    cpuStatistic: plan.cpu.statistic, memoryStatistic: plan.memory.statistic,
    cpuPressureThreshold: plan.cpu.pressureThreshold, memoryPressureThreshold: plan.memory.pressureThreshold,
    memoryWorkingSetThreshold: plan.memory.workingSetThreshold,
  };
}

const isStatistic = (s: string): s is Statistic => (STATISTICS as readonly string[]).includes(s);
const fraction = (x: number) => Number.isFinite(x) && x >= 0 && x <= 100;

/** The plan a gateway sent, or undefined for one no agent should keep a window for (an id that is not its fields' is refused too). */
export function planFromWire(p: SummaryPlan__Output): { id: number; plan: SummaryPlan } | undefined {
  if (!isStatistic(p.cpuStatistic) || !isStatistic(p.memoryStatistic)) return undefined;
  if (!(p.windowMs > 0 && p.windowMs <= MAX_PLAN_WINDOW_MS && p.calmPeriodMs <= MAX_PLAN_WINDOW_MS)) return undefined;
  if (!fraction(p.cpuPressureThreshold) || !fraction(p.memoryPressureThreshold) || !fraction(p.memoryWorkingSetThreshold)) return undefined;
  const plan: SummaryPlan = {
    windowMs: p.windowMs, calmPeriodMs: p.calmPeriodMs,
    cpu: { statistic: p.cpuStatistic, pressureThreshold: p.cpuPressureThreshold },
    memory: { statistic: p.memoryStatistic, pressureThreshold: p.memoryPressureThreshold, workingSetThreshold: p.memoryWorkingSetThreshold },
  };
  return planId(plan) === p.id ? { id: p.id, plan } : undefined;
}

export function summaryToWire(id: number, s: WindowSummary): UsageSummary__Output {
  return { planId: id, samples: s.samples, spanMs: Math.round(s.spanMs), cpuMillicores: Math.round(s.cpuMillicores), memoryBytes: Math.round(s.memoryBytes), cpuPressure: s.cpuPressure, memoryPressure: s.memoryPressure };
}


/** A checked sample's summaries (gateway/store/sample-check.ts) as the store keeps them: each ends at the sample's own time. */
export function summariesFromWire(summaries: readonly UsageSummary__Output[], timestampMs: number): AgentSummary[] {
  return summaries.map((s) => ({
    planId: s.planId,
    summary: { newestMs: timestampMs, samples: s.samples, spanMs: s.spanMs, cpuMillicores: s.cpuMillicores, memoryBytes: s.memoryBytes, cpuPressure: s.cpuPressure, memoryPressure: s.memoryPressure },
  }));
}
