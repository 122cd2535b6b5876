// What kubectl top's node CPU is when agents summarize (--agent-summaries): the
// gateway no longer holds every 1 s sample, so agents are told one more plan,
// the mean of their CPU over the send interval, and the metrics API serves it
// with the time it covers as its window (metrics-server serves the kubelet's
// rate over its own ~15 s resolution the same way).
import type { SummaryPlan } from '../../lib/usage/summary-plan.js';

const plans = new Map<number, SummaryPlan>();

/** The plan a node's metrics are read by when agents send every `sendEveryMs`; the same object for the same interval (plan ids are cached by object). */
export function metricsPlan(sendEveryMs: number): SummaryPlan {
  let plan = plans.get(sendEveryMs);
  if (!plan) {
    // Pressure is not read from it: thresholds no point reaches.
    plan = Object.freeze({
      windowMs: sendEveryMs,
      calmPeriodMs: 0,
      cpu: Object.freeze({ statistic: 'avg' as const, pressureThreshold: 100 }),
      memory: Object.freeze({ statistic: 'avg' as const, pressureThreshold: 100, workingSetThreshold: 100 }),
    });
    plans.set(sendEveryMs, plan);
  }
  return plan;
}
