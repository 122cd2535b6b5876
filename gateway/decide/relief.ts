// Relief before harm: when a node's memory crosses the relief line, which
// unprotected pods to evict (through the Eviction API, PodDisruptionBudgets
// honoured) so that the kubelet's eviction and the kernel's OOM killer never
// have to choose. Pure: the node's usage, its pods and the limits in, the
// pods to evict and why out; the caller evicts, counts and rate-limits.
//
// Order (who pays first): lowest priority, then most memory used over its
// request, then youngest; never a protected pod. Just enough: victims are
// taken until their usage brings the node under the calm line, not the relief
// line, so that one relief is not followed at once by the next.
import type { Policy } from './decision-types.js';
import type { Tier } from './tiers.js';

export interface ReliefPolicy {
  /** Working set over capacity past which pods are relieved (above the policy's workingSetThreshold, below the kubelet's eviction threshold). */
  memoryLine: number;
  /** Relief takes pods until the working set is under this share of capacity. */
  calmLine: number;
  /** At most this many evictions per node per minute. */
  perNodePerMinute: number;
  /** DryRun: plan and report, never evict. */
  dryRun: boolean;
}

export const DEFAULT_RELIEF: ReliefPolicy = { memoryLine: 0.95, calmLine: 0.9, perNodePerMinute: 2, dryRun: false };

/** The pure step's limits from an OversellPolicy: its lines and rate; a DryRun policy only reports. */
export function reliefLimits(policy: Pick<Policy, 'relief' | 'mode'>): ReliefPolicy {
  const { memoryLine, calmLine, perNodePerMinute } = policy.relief;
  return { memoryLine, calmLine, perNodePerMinute, dryRun: policy.mode === 'DryRun' };
}

export interface ReliefCandidate {
  namespace: string;
  name: string;
  uid: string;
  tier: Tier;
  priority: number;
  memoryUsageBytes: number;
  memoryRequestBytes: number;
  startedAtMs: number;
}

/** Who pays first sorts first: lowest priority, then most usage over request, then youngest; names last, so the order is total. */
export function reliefOrder(a: ReliefCandidate, b: ReliefCandidate): number {
  if (a.priority !== b.priority) return a.priority - b.priority;
  const overA = a.memoryUsageBytes - a.memoryRequestBytes;
  const overB = b.memoryUsageBytes - b.memoryRequestBytes;
  if (overA !== overB) return overB - overA;
  if (a.startedAtMs !== b.startedAtMs) return b.startedAtMs - a.startedAtMs;
  return `${a.namespace}/${a.name}`.localeCompare(`${b.namespace}/${b.name}`);
}

export interface ReliefInput {
  memoryCapacityBytes: number;
  memoryWorkingSetBytes: number;
  candidates: readonly ReliefCandidate[];
  /** Pods an eviction was refused for (a PodDisruptionBudget) or is under way for: skipped, not retried in a loop. */
  skip: ReadonlySet<string>;
  /** Evictions this node may still have this minute. */
  allowance: number;
  /** Usage already freed by this relief's evictions (the sample still shows it): counted towards the need, not against the line. */
  freedBytes?: number;
  policy: ReliefPolicy;
}

export interface ReliefPlan {
  /** Bytes to free to reach the calm line; 0: under the relief line, nothing to do. */
  needBytes: number;
  victims: ReliefCandidate[];
  /** What the plan could not do: no unprotected pod left, or the rate limit. */
  short?: string;
}

export function planRelief(input: ReliefInput): ReliefPlan {
  const { memoryCapacityBytes: cap, memoryWorkingSetBytes: used, policy } = input;
  if (!(cap > 0) || !(used > policy.memoryLine * cap)) return { needBytes: 0, victims: [] };
  const needBytes = Math.ceil(used - policy.calmLine * cap - (input.freedBytes ?? 0));
  if (needBytes <= 0) return { needBytes: 0, victims: [] };
  // A pod with no usage reported (or none at all) frees nothing: evicting it would be harm for no relief.
  const eligible = input.candidates.filter((c) => c.tier.tier === 'unprotected' && !input.skip.has(c.uid) && c.memoryUsageBytes > 0).sort(reliefOrder);
  const victims: ReliefCandidate[] = [];
  let freed = 0;
  for (const c of eligible) {
    if (freed >= needBytes) break;
    if (victims.length >= input.allowance) return { needBytes, victims, short: `the rate limit (${policy.perNodePerMinute} a minute on a node) stops relief ${needBytes - freed} bytes short` };
    victims.push(c);
    freed += c.memoryUsageBytes;
  }
  if (freed < needBytes) return { needBytes, victims, short: `no unprotected pod with usage reported left to relieve: ${needBytes - freed} bytes short of the calm line` };
  return { needBytes, victims };
}
