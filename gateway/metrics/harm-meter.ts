// Harm measured: what actually hurt pods on the nodes oversell governs, by
// pool (the OversellPolicy) and tier. The kubelet's evictions and the kernel's
// OOM kills come from the pods' own status (the gateway's pod watch sees a pod
// fail as Evicted, or a container terminate OOMKilled, as the kubelet reports
// it), oversell's own reliefs from relief-actor.ts. A protected pod hit is
// what the tiers promise never happens; the alert OversellProtectedPodsHarmed
// says when it does.
import type { Logger } from '../../lib/log.js';
import { podTier, type NamespaceLabels } from '../policies/namespace-labels.js';
import type { PolicySource } from '../policies/policy-source.js';
import type { Harm, PodFacts, PodFactsStore } from '../store/pod-facts.js';
import type { PoolHarmLedger } from '../decide/pool-harm.js';
import type { GatewayMetrics } from './metrics.js';

export interface HarmMeterOptions {
  pods: PodFactsStore;
  /** The opted-in nodes: harm elsewhere is not oversell's to count. */
  nodes: { get(name: string): { metadata?: { labels?: Record<string, string> } } | undefined };
  policies: PolicySource;
  namespaceLabels: NamespaceLabels;
  metrics: Pick<GatewayMetrics, 'harm'>;
  log: Logger;
  /** Where harm for lack of memory is kept against the pool's budget. */
  ledger?: PoolHarmLedger;
  now?: () => number;
}

/** Counts each harm the pod watch sees, once (every replica runs it: the counter is per replica, sum by pool and tier). */
export function meterHarm(o: HarmMeterOptions): void {
  o.pods.onHarm((pod, harm) => void count(o, pod, harm));
}

async function count(o: HarmMeterOptions, pod: PodFacts, harm: Harm): Promise<void> {
  const node = o.nodes.get(pod.node);
  const policy = node && o.policies.select(node.metadata?.labels ?? {})?.policy;
  if (!policy) return;
  // As relief takes it: a harm whose tier cannot be told is counted where it matters most.
  const { tier } = await podTier(pod, policy.protect, o.namespaceLabels);
  o.metrics.harm(policy.name, tier, harm.by, harm.count);
  o.ledger?.record(policy.name, harm.overload, (o.now ?? Date.now)());
  const what = harm.by === 'oom-kill' ? `${harm.count} container(s) OOM-killed by the kernel` : 'evicted by the kubelet';
  const line = `${pod.namespace}/${pod.name} on ${pod.node}: ${what}`;
  if (tier === 'protected') o.log.warn({ node: pod.node, pod: `${pod.namespace}/${pod.name}`, policy: policy.name, by: harm.by }, `a protected pod was hurt: ${line}`);
  else o.log.info({ node: pod.node, pod: `${pod.namespace}/${pod.name}`, policy: policy.name, by: harm.by }, `harm: ${line}`);
}
