// Which node an authenticated agent may report for. Pure: the identity from a
// TokenReview in, a node name (or the pod to look the node up from) out.
import { AuthError, type Identity } from './identity.js';

/** Claims the API server puts in bound ServiceAccount tokens (extra of the TokenReview user). */
export const CLAIM = {
  nodeName: 'authentication.kubernetes.io/node-name',
  podName: 'authentication.kubernetes.io/pod-name',
  podUid: 'authentication.kubernetes.io/pod-uid',
} as const;

export type Binding = { node: string; subject: string } | { pod: { namespace: string; name: string; uid: string | undefined }; subject: string };

/**
 * serviceAccounts: "namespace/name" of the agent's ServiceAccount(s). A token of
 * any other account, or one not bound to a pod, may not report at all.
 */
export function agentBinding(identity: Identity, serviceAccounts: readonly string[]): Binding {
  const m = /^system:serviceaccount:([^:]+):([^:]+)$/.exec(identity.username);
  if (!m) throw new AuthError('permission-denied', `${identity.username} is not a ServiceAccount; agents authenticate with their pod's projected ServiceAccount token`);
  const subject = `${m[1]}/${m[2]}`;
  if (!serviceAccounts.includes(subject)) {
    throw new AuthError('permission-denied', `ServiceAccount ${subject} may not report node usage (allowed: ${serviceAccounts.join(', ')})`);
  }
  const first = (key: string) => identity.extra[key]?.[0] || undefined;
  const node = first(CLAIM.nodeName);
  if (node) return { node, subject };
  const pod = first(CLAIM.podName);
  if (pod) return { pod: { namespace: m[1]!, name: pod, uid: first(CLAIM.podUid) }, subject };
  throw new AuthError('permission-denied', `the token of ${subject} is not bound to a pod; mount a projected serviceAccountToken volume (deploy/base/agent.yaml)`);
}
