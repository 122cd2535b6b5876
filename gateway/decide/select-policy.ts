// Which OversellPolicy governs a node. Deterministic precedence, documented in
// docs/policy.md: among the valid policies whose nodeSelector matches the node's
// labels, the highest spec.priority wins; on a tie, the alphabetically first
// name. A matching policy that failed validation is never skipped in favour of
// a lower one: the node gets no inflation until the policy is fixed, so a typo
// cannot silently move a node pool under a different policy.
import { type LabelSelector, selectorMatches } from '../../lib/label-selector.js';
import type { Policy } from './policy.js';

export interface PolicyEntry {
  name: string;
  priority: number;
  selector: LabelSelector;
  /** Undefined when the object failed validation; `error` says why. */
  policy: Policy | undefined;
  error?: string;
  /** What the operator should know though the policy is valid (policies/policy-spec.ts). */
  warnings?: string[];
}

// An empty selector selects nothing: the CRD refuses it, and a node pool is
// never put under a policy by accident (lib/label-selector.ts).
export const matches = selectorMatches;

/** Orders entries by precedence: priority high to low, then name. */
export function byPrecedence(a: PolicyEntry, b: PolicyEntry): number {
  return b.priority - a.priority || (a.name < b.name ? -1 : a.name > b.name ? 1 : 0);
}

export function selectPolicy(entries: readonly PolicyEntry[], labels: Record<string, string>): PolicyEntry | undefined {
  let best: PolicyEntry | undefined;
  for (const e of entries) if (matches(e.selector, labels) && (!best || byPrecedence(e, best) < 0)) best = e;
  return best;
}

/** Per-node lower caps: `oversell.io/max-ratio-cpu: "1.5"`. Values below 1 or unparsable are ignored. */
export function nodeMaxRatio(annotations: Record<string, unknown> | undefined): { cpu?: number; memory?: number } {
  const read = (key: string) => {
    const v = annotations?.[key];
    const n = typeof v === 'string' ? Number(v) : NaN;
    return Number.isFinite(n) && n >= 1 ? n : undefined;
  };
  const cpu = read('oversell.io/max-ratio-cpu');
  const memory = read('oversell.io/max-ratio-memory');
  return { ...(cpu !== undefined && { cpu }), ...(memory !== undefined && { memory }) };
}
