// The agent's own usage window: every sample goes in, and while its gateway
// asks for summaries (Settings.summary_plans) the sample sent carries the
// window summarized by each plan, with the gateway's own code (lib/usage), so
// the gateway decides from every second of usage while it receives one sample
// in ten. The window is kept before any plan comes, so a gateway that starts
// asking gets a full window at once.
import type { Sample__Output } from '../../proto/gen/oversell/v1/Sample.js';
import type { SummaryPlan__Output } from '../../proto/gen/oversell/v1/SummaryPlan.js';
import type { UsageSummary__Output as UsageSummary } from '../../proto/gen/oversell/v1/UsageSummary.js';
import { MAX_RETAIN_MS, UsageWindow } from '../../lib/usage/usage-window.js';
import { summarizeWindow, type SummaryPlan } from '../../lib/usage/window-summary.js';
import { cpuPressureOf } from '../../wire/cpu-pressure.js';
import { MAX_SUMMARY_PLANS, planFromWire, summaryToWire } from '../../wire/usage-summary.js';

export type KeptPlan = { id: number; plan: SummaryPlan };

/** The plans of a Settings an agent keeps a window for: the well-formed ones, at most MAX_SUMMARY_PLANS. */
export function keptPlans(plans: readonly SummaryPlan__Output[]): KeptPlan[] {
  return plans.slice(0, MAX_SUMMARY_PLANS).flatMap((p) => planFromWire(p) ?? []);
}

export class UsageSummarizer {
  readonly #window = new UsageWindow();

  /** The sample's point into the window (the gateway's retention: at most MAX_RETAIN_MS of points). */
  add(s: Sample__Output): void {
    this.#window.keep({
      timestampMs: s.timestampMs, cpuMillicores: s.cpuUsageMillicores, memoryBytes: s.memoryWorkingSetBytes,
      cpuPressure: cpuPressureOf(s.pressure), memoryPressure: s.pressure?.memorySome?.avg10 ?? 0,
    }, MAX_RETAIN_MS);
  }

  /** The window as each plan reads it, ending at the newest sample added. */
  summaries(plans: readonly KeptPlan[], capacityMemoryBytes: number): UsageSummary[] {
    return plans.map(({ id, plan }) => summaryToWire(id, summarizeWindow(this.#window, plan, capacityMemoryBytes)));
  }
}
