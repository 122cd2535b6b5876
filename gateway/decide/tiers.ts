// Who pays when a node gets busier than its history said: an OversellPolicy's
// spec.protect names the pods that never depend on oversold capacity and are
// never chosen for relief (protected); every other pod may be relieved, in the
// order reliefOrder gives. Pure: the facts of a pod in, its tier and why out.
import { type LabelSelector, selectorMatches } from '../../lib/label-selector.js';
import type { QosClass } from '../../lib/pod-qos.js';

export interface ProtectPolicy {
  /** Guaranteed pods (requests equal to limits for CPU and memory): what their owner asked for is what they get. */
  guaranteed: boolean;
  /** Pods holding exclusive CPUs (integer-CPU Guaranteed pods under the static CPU manager), even when guaranteed is false. */
  exclusiveCpus: boolean;
  /** Pods of this priority or higher; undefined: none by priority. */
  minPriority: number | undefined;
  /** Pods in namespaces whose labels match; undefined: none by namespace. */
  namespaceSelector: LabelSelector | undefined;
}

/** system-cluster-critical; system-node-critical (2000001000) is above it. */
export const SYSTEM_CLUSTER_CRITICAL = 2_000_000_000;
export const PROTECT_NAMESPACE_LABEL = 'oversell.io/protect';

export const DEFAULT_PROTECT: ProtectPolicy = {
  guaranteed: true,
  exclusiveCpus: true,
  minPriority: SYSTEM_CLUSTER_CRITICAL,
  namespaceSelector: { matchLabels: { [PROTECT_NAMESPACE_LABEL]: 'true' } },
};

/** What the tier of a pod is decided from: its spec, its namespace's labels. */
export interface PodFacts {
  qos: QosClass;
  /** Exclusive CPUs it holds or will hold under the static CPU manager (lib/pod-qos.ts). */
  exclusiveCpus: number;
  /** spec.priority as the API server resolved it (0 when unset). */
  priority: number;
  namespaceLabels: Record<string, string>;
}

export type Tier = { tier: 'protected'; because: string } | { tier: 'unprotected' };

/** The kubelet's CPU manager policy on the pod's node, as its agent reads it; unknown: no agent said (older agents, an unreadable checkpoint). */
export type CpuManagerPolicy = 'static' | 'none' | 'unknown';

/**
 * cpuManager: the pod's node's. The exclusiveCpus rule holds for an
 * integer-CPU Guaranteed pod on a static node, and on a node whose policy is
 * unknown (taken for static: a protection is never dropped for want of a
 * fact); under none the pod holds no CPU of its own and the rule does not hold
 * (the others still may: Guaranteed QoS protects it by default).
 */
export function tierOf(pod: PodFacts, protect: ProtectPolicy, cpuManager: CpuManagerPolicy = 'unknown'): Tier {
  if (protect.exclusiveCpus && pod.exclusiveCpus > 0 && cpuManager !== 'none') {
    return { tier: 'protected', because: `holds ${pod.exclusiveCpus} exclusive CPU(s)${cpuManager === 'static' ? ' (static CPU manager)' : ''}` };
  }
  if (protect.guaranteed && pod.qos === 'Guaranteed') return { tier: 'protected', because: 'Guaranteed QoS' };
  if (protect.minPriority !== undefined && pod.priority >= protect.minPriority) return { tier: 'protected', because: `priority ${pod.priority} >= ${protect.minPriority}` };
  if (protect.namespaceSelector && selectorMatches(protect.namespaceSelector, pod.namespaceLabels)) return { tier: 'protected', because: 'its namespace is protected' };
  return { tier: 'unprotected' };
}
