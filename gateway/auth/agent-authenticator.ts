// Agent streams: bearer token -> TokenReview -> the node the agent's pod runs
// on. The node comes from the token's node-name claim where the cluster sets
// it, otherwise from the pod's spec.nodeName (cached: pods do not move).
import { CoreV1Api, type KubeConfig } from '@kubernetes/client-node';
import { agentBinding } from './agent-binding.js';
import { AuthError, bearerToken } from './identity.js';
import type { TokenReviewer } from './token-review.js';

export interface AgentPrincipal {
  /** The only node this stream may report for. */
  node: string;
  /** namespace/name of the ServiceAccount. */
  subject: string;
  expiresAtMs: number | undefined;
}

/** Resolves the caller of a stream from its `authorization` metadata value; throws AuthError. */
export type AgentAuthenticator = (authorization: unknown) => Promise<AgentPrincipal>;

export type PodNodeLookup = (pod: { namespace: string; name: string; uid: string | undefined }) => Promise<string>;

export function kubernetesPodNodeLookup(kubeConfig: KubeConfig): PodNodeLookup {
  const api = kubeConfig.makeApiClient(CoreV1Api);
  const known = new Map<string, string>();
  return async ({ namespace, name, uid }) => {
    const key = `${namespace}/${name}/${uid ?? ''}`;
    const hit = known.get(key);
    if (hit) return hit;
    let pod;
    try {
      pod = await api.readNamespacedPod({ namespace, name });
    } catch (err) {
      const code = (err as { code?: number }).code;
      if (code === 404) throw new AuthError('permission-denied', `pod ${namespace}/${name} named by the token does not exist`);
      throw new AuthError('unavailable', `cannot read pod ${namespace}/${name} (${(err as Error).message}); retry shortly`);
    }
    if (uid && pod.metadata?.uid !== uid) throw new AuthError('permission-denied', `pod ${namespace}/${name} was replaced since the token was issued`);
    const node = pod.spec?.nodeName;
    if (!node) throw new AuthError('permission-denied', `pod ${namespace}/${name} is not bound to a node yet`);
    if (known.size > 50_000) known.clear();
    known.set(key, node);
    return node;
  };
}

export function agentAuthenticator(reviewer: TokenReviewer, serviceAccounts: readonly string[], podNode: PodNodeLookup): AgentAuthenticator {
  return async (authorization) => {
    const token = bearerToken(authorization);
    if (!token) throw new AuthError('unauthenticated', 'no bearer token: agents send their projected ServiceAccount token in the authorization metadata (--token-file)');
    const identity = await reviewer.review(token);
    const binding = agentBinding(identity, serviceAccounts);
    const node = 'node' in binding ? binding.node : await podNode(binding.pod);
    return { node, subject: binding.subject, expiresAtMs: identity.expiresAtMs };
  };
}
