// What a node's decision reads from its past samples: the usage window and
// the load history. One pure step builds both from each sample, and the
// gateway's store and the simulator both call it with the node's own policy,
// so the two cannot learn by different rules.
import { DEFAULT_HISTORY_HALF_LIFE_MS, LoadHistory, recordLoad } from './load-history.js';
import { DEFAULT_POLICY, type Policy } from './policy.js';
import { MAX_RETAIN_MS, UsageWindow, type WindowPoint } from '../../lib/usage/usage-window.js';

export { MAX_RETAIN_MS } from '../../lib/usage/usage-window.js';

/** How long a node's window is kept: the longest window or calm period of the policies (at least the default window), at most MAX_RETAIN_MS. */
export function retainFor(policies: readonly (Policy | undefined)[]): number {
  const longest = Math.max(DEFAULT_POLICY.windowMs, ...policies.map((p) => Math.max(p?.windowMs ?? 0, p?.calmPeriodMs ?? 0)));
  return Math.min(MAX_RETAIN_MS, longest);
}

/** A node's decision inputs built from its samples; the store's record is one. */
export interface NodeInputs {
  readonly window: UsageWindow;
  history: LoadHistory | undefined;
}

/** What a sample's load factor is measured against; `requests` undefined when they are not known (nothing is learnt). */
export interface LearnAgainst {
  requests: { cpu: number; memory: number } | undefined;
  raw: { cpu: number; memory: number } | undefined;
  /** Age of the newest pod bound to the node; undefined when not known (the agent's own requests). */
  newestPodAgeMs: number | undefined;
}

export interface LearnRules {
  retainMs: number;
  /** The node's policy's startupGraceMs: a pod bound this recently may not show its usage yet, so the history waits. */
  startupGraceMs: number;
}

export const newNodeInputs = (): NodeInputs => ({ window: new UsageWindow(), history: undefined });

/** One sample into the node's window (`retainMs` on the agent's timeline, UsageWindow.keep) and history. */
export function learnSample(inputs: NodeInputs, point: WindowPoint, against: LearnAgainst, rules: LearnRules): void {
  inputs.window.keep(point, rules.retainMs);
  const t = point.timestampMs;

  const { requests, raw } = against;
  if (!requests || !raw) return;
  inputs.history ??= new LoadHistory(DEFAULT_HISTORY_HALF_LIFE_MS);
  USAGE.cpu = point.cpuMillicores;
  USAGE.memory = point.memoryBytes;
  const starting = against.newestPodAgeMs !== undefined && against.newestPodAgeMs < rules.startupGraceMs;
  recordLoad(inputs.history, t, USAGE, requests, raw, starting);
}

// Reused on every sample: recordLoad reads it and keeps nothing.
const USAGE = { cpu: 0, memory: 0 };
