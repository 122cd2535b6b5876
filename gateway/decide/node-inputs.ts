// What a node's decision reads from its past samples: the usage window and
// the load history. One pure step builds both from each sample, and the
// gateway's store and the simulator both call it with the node's own policy,
// so the two cannot learn by different rules.
import { DEFAULT_HISTORY_HALF_LIFE_MS, LoadHistory, recordLoad } from './load-history.js';
import { DEFAULT_POLICY, type Policy } from './policy.js';
import { UsageWindow, type WindowPoint } from '../../lib/usage/usage-window.js';

/** Windows are never kept longer than this, whatever a policy asks (memory: a point a second per node). */
export const MAX_RETAIN_MS = 600_000;

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

/**
 * One sample into the node's window and history. The window keeps
 * `retainMs` on the agent's timeline; a sample behind the whole window means
 * the agent's clock stepped back (an NTP fix, or one bad timestamp before it),
 * and the window restarts on the new timeline instead of keeping every later
 * sample out until the clock catches up.
 */
export function learnSample(inputs: NodeInputs, point: WindowPoint, against: LearnAgainst, rules: LearnRules): void {
  const window = inputs.window;
  const t = point.timestampMs;
  const newestMs = window.newestMs() ?? t;
  const cut = t <= newestMs - rules.retainMs ? Infinity : Math.max(newestMs, t) - rules.retainMs;
  window.dropThrough(cut);
  if (cut === Infinity || t > cut) window.add(point);

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
