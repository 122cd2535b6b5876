// Which node labels a kubelet may set on its own Node under the NodeRestriction
// admission plugin (k8s.io/kubernetes plugin/pkg/admission/noderestriction,
// k8s.io/kubelet/pkg/apis IsKubeletLabel, as of v1.36). A policy that selects
// nodes by such a label lets a node's own credentials move it into that
// policy; labels under node-restriction.kubernetes.io/ it may not set.
import type { LabelSelector } from '../../lib/label-selector.js';

export const NODE_RESTRICTION_PREFIX = 'node-restriction.kubernetes.io/';

/** Labels under kubernetes.io or k8s.io that kubelets set themselves. */
const KUBELET_LABELS = new Set([
  'kubernetes.io/hostname', 'kubernetes.io/os', 'kubernetes.io/arch', 'beta.kubernetes.io/os', 'beta.kubernetes.io/arch',
  'beta.kubernetes.io/instance-type', 'node.kubernetes.io/instance-type',
  'failure-domain.beta.kubernetes.io/zone', 'failure-domain.beta.kubernetes.io/region',
  'topology.kubernetes.io/zone', 'topology.kubernetes.io/region',
]);
const KUBELET_NAMESPACES = ['kubelet.kubernetes.io', 'node.kubernetes.io'];

const within = (namespace: string, domain: string) => namespace === domain || namespace.endsWith(`.${domain}`);

/** Whether NodeRestriction lets a node's kubelet add, change or remove this label on its own Node. */
export function kubeletMaySet(key: string): boolean {
  const slash = key.indexOf('/');
  const namespace = slash < 0 ? '' : key.slice(0, slash);
  if (within(namespace, 'node-restriction.kubernetes.io')) return false;
  const kubernetes = within(namespace, 'kubernetes.io') || within(namespace, 'k8s.io');
  return !kubernetes || KUBELET_LABELS.has(key) || KUBELET_NAMESPACES.some((d) => within(namespace, d));
}

/** The selector's keys a kubelet may set on its own Node, in order, each once. */
export function kubeletSettableKeys(selector: LabelSelector): string[] {
  const keys = [...Object.keys(selector.matchLabels ?? {}), ...(selector.matchExpressions ?? []).map((e) => e.key)];
  return [...new Set(keys)].filter(kubeletMaySet);
}
