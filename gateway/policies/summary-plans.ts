// The plans agents summarize their windows by (--agent-summaries): one per
// distinct way the valid policies read a window, named by id, so a policy
// change reaches every agent as one Settings and each node's decision finds
// its policy's summary among those its agent sent.
import type { SummaryPlan__Output as SummaryPlan } from '../../proto/gen/oversell/v1/SummaryPlan.js';
import type { PolicyEntry } from '../decide/select-policy.js';
import { planId, type SummaryPlan as Plan } from '../../lib/usage/summary-plan.js';
import { MAX_SUMMARY_PLANS, planToWire } from '../../wire/usage-summary.js';

/**
 * The distinct plans of the valid policies, by id, after `first` (plans other
 * readers need, always kept); past MAX_SUMMARY_PLANS the rest decide from the
 * gateway's own window.
 */
export function summaryPlansOf(entries: readonly PolicyEntry[], first: readonly Plan[] = []): SummaryPlan[] {
  const kept = first.map(planToWire);
  const ids = new Set(kept.map((p) => p.id));
  return [...kept, ...distinctPlans(entries).map(planToWire).filter((p) => !ids.has(p.id)).sort((a, b) => a.id - b.id)].slice(0, MAX_SUMMARY_PLANS);
}

/** The distinct plans of the valid policies (one per id). */
export function distinctPlans(entries: readonly PolicyEntry[]): Plan[] {
  const byId = new Map<number, Plan>();
  for (const e of entries) if (e.policy) byId.set(planId(e.policy), e.policy);
  return [...byId.values()];
}
