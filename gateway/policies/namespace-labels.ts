// A namespace's labels, for spec.protect.namespaceSelector: read from the API
// server when asked and kept a minute (relief and the harm count ask for a
// handful of namespaces, rarely: a watch of every namespace would cost more).
import { CoreV1Api, type KubeConfig } from '@kubernetes/client-node';
import { tierOf, type CpuManagerPolicy, type PodFacts, type ProtectPolicy, type Tier } from '../decide/tiers.js';

type TierFacts = Omit<PodFacts, 'namespaceLabels'>;

export type NamespaceLabels = (namespace: string) => Promise<Record<string, string>>;

export function namespaceLabelsFrom(kubeConfig: KubeConfig, now: () => number = Date.now, ttlMs = 60_000): NamespaceLabels {
  const core = kubeConfig.makeApiClient(CoreV1Api);
  const cache = new Map<string, { labels: Record<string, string>; at: number }>();
  return async (namespace) => {
    const cached = cache.get(namespace);
    if (cached && now() - cached.at < ttlMs) return cached.labels;
    const ns = await core.readNamespace({ name: namespace });
    const labels = ns.metadata?.labels ?? {};
    if (cache.size >= 4096) cache.delete(cache.keys().next().value as string);
    cache.set(namespace, { labels, at: now() });
    return labels;
  };
}

/**
 * The pod's tier, its namespace's labels read only when the policy names
 * namespaces. A namespace that cannot be read makes the pod protected: one
 * whose tier cannot be told is never taken for an unprotected one.
 * cpuManager: the pod's node's; every caller leaves it unknown, so no agent
 * report changes a tier (security.md, invariant 39; decide/tiers.ts says what
 * each value means).
 */
export async function podTier(pod: TierFacts & { namespace: string }, protect: ProtectPolicy, labels: NamespaceLabels, cpuManager: CpuManagerPolicy = 'unknown'): Promise<Tier> {
  try {
    const namespaceLabels = protect.namespaceSelector ? await labels(pod.namespace) : {};
    return tierOf({ qos: pod.qos, exclusiveCpus: pod.exclusiveCpus, priority: pod.priority, namespaceLabels }, protect, cpuManager);
  } catch {
    return { tier: 'protected', because: 'its namespace could not be read' };
  }
}
