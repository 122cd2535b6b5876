// Who pays when a node's memory runs out and oversell did not act first: the
// kernel's OOM killer (memory demand past capacity, at once) and the kubelet's
// eviction manager (the working set past capacity minus its eviction
// threshold, one pod per housekeeping interval). Each picks its victims by its
// own rule, reproduced here; every pod has a tier, so the report can say who
// was hit.
import { DEFAULT_PROTECT, tierOf } from '../gateway/decide/tiers.js';
import type { QosClass } from '../lib/pod-qos.js';
import type { PodClass } from './scenario.js';

/** A pod as the kubelet, the kernel and oversell's tiers see it. */
export interface PodTier {
  qos: QosClass;
  priority: number;
  /** tierOf with DEFAULT_PROTECT: never relieved; its hits are counted apart. */
  protected: boolean;
}

/** A pod with no tier said: Burstable at priority 0 (a public trace's pods). */
export const DEFAULT_TIER: PodTier = { qos: 'Burstable', priority: 0, protected: false };

/** A class's tier, decided by the gateway's own tierOf with the default protection (no namespace labels in the model). */
export function classTier(c: PodClass): PodTier {
  const qos = c.qos ?? 'Burstable';
  const priority = c.priority ?? 0;
  // The static CPU manager gives a Guaranteed pod's whole cores to it alone (lib/pod-qos.ts).
  const exclusiveCpus = qos === 'Guaranteed' && c.requests.cpu % 1000 === 0 ? c.requests.cpu / 1000 : 0;
  return { qos, priority, protected: tierOf({ qos, priority, exclusiveCpus, namespaceLabels: {} }, DEFAULT_PROTECT).tier === 'protected' };
}

/** What both rankings read of a running pod. */
export interface MemoryCandidate {
  usage: number;
  request: number;
  priority: number;
  qos: QosClass;
  /** Ties broken by this (the pod's slot): the order is total, the run deterministic. */
  order: number;
}

/**
 * The kubelet's memory-pressure ranking (pkg/kubelet/eviction, rankMemoryPressure):
 * pods whose usage exceeds their requests first, then lowest priority, then
 * most usage above requests.
 */
export function kubeletEvictionOrder(a: MemoryCandidate, b: MemoryCandidate): number {
  const exceedsA = a.usage > a.request;
  const exceedsB = b.usage > b.request;
  if (exceedsA !== exceedsB) return exceedsA ? -1 : 1;
  if (a.priority !== b.priority) return a.priority - b.priority;
  const over = b.usage - b.request - (a.usage - a.request);
  return over !== 0 ? over : a.order - b.order;
}

/** system-cluster-critical: the kubelet's eviction manager refuses to evict a pod at this priority or above (kubelettypes.IsCriticalPod). */
export const CRITICAL_PRIORITY = 2_000_000_000;
/** system-node-critical: its containers get Guaranteed's oom_score_adj whatever their QoS. */
export const NODE_CRITICAL_PRIORITY = 2_000_001_000;

/** Whether the kubelet's eviction manager may evict the pod at all. */
export function kubeletMayEvict(c: MemoryCandidate): boolean {
  return c.priority < CRITICAL_PRIORITY;
}

/**
 * oom_score_adj the kubelet gives a pod's containers (pkg/kubelet/qos/policy.go):
 * Guaranteed (and system-node-critical) -997, BestEffort 1000, Burstable
 * 1000 - 1000 x request / capacity (integer division) within [3, 999].
 */
export function oomScoreAdj(qos: QosClass, requestMemory: number, capacityMemory: number, priority = 0): number {
  if (qos === 'Guaranteed' || priority >= NODE_CRITICAL_PRIORITY) return -997;
  if (qos === 'BestEffort') return 1000;
  const adj = 1000 - Math.floor((1000 * requestMemory) / capacityMemory);
  return Math.min(999, Math.max(3, adj));
}

/** The kernel's badness (mm/oom_kill.c, oom_badness): memory used plus oom_score_adj thousandths of all memory. */
export function oomBadness(c: MemoryCandidate, capacityMemory: number): number {
  return c.usage + (oomScoreAdj(c.qos, c.request, capacityMemory, c.priority) * capacityMemory) / 1000;
}

/** The kernel's order: highest badness first. */
export function oomKillOrder(capacityMemory: number): (a: MemoryCandidate, b: MemoryCandidate) => number {
  return (a, b) => oomBadness(b, capacityMemory) - oomBadness(a, capacityMemory) || a.order - b.order;
}

/**
 * The victims, in order, until the node's memory is at most `limit` (or `most`
 * are taken); each frees its usage. Returns them and the node's memory after.
 */
export function takeUntil<T extends MemoryCandidate>(ranked: readonly T[], memory: number, limit: number, most = Infinity): { victims: T[]; memory: number } {
  const victims: T[] = [];
  for (const c of ranked) {
    if (memory <= limit || victims.length >= most) break;
    victims.push(c);
    memory -= c.usage;
  }
  return { victims, memory };
}
