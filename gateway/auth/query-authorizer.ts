// The query API's callers: a bearer token (TokenReview) and a
// SubjectAccessReview for a verb on the virtual resource nodeusages.oversell.io,
// so access is granted with ordinary RBAC (deploy/base/rbac.yaml: oversell-viewer).
import { AuthorizationV1Api, type KubeConfig } from '@kubernetes/client-node';
import { AuthError, bearerToken, type Identity } from './identity.js';
import type { TokenReviewer } from './token-review.js';

export const QUERY_RESOURCE = { group: 'oversell.io', resource: 'nodeusages' } as const;
export type QueryVerb = 'get' | 'list' | 'watch';

/** How long an allowed call may go on unchecked: a watch outlives the moment it was allowed. */
export interface QueryGrant {
  /** The token's exp (JWTs only): a watch ends then. */
  expiresAtMs: number | undefined;
  /** A watch asks again this often, so revoked access or a deleted ServiceAccount ends it. */
  recheckMs: number;
  /** Who the API server says is calling (its username): per-caller limits count by it. */
  caller: string;
}

/** Throws AuthError unless the caller may `verb` nodeusages (name: the node, for get). */
export type QueryAuthorizer = (authorization: unknown, verb: QueryVerb, name?: string) => Promise<QueryGrant>;

export interface QueryAuthorizerOptions {
  /** How long an allowed decision is reused (default 10 s). */
  cacheMs?: number;
  /** How often a watch checks its caller again (default 60 s). */
  recheckMs?: number;
  now?: () => number;
}

export type AccessReview = (identity: Identity, verb: QueryVerb, name: string | undefined) => Promise<{ allowed: boolean; reason: string }>;

export function kubernetesAccessReview(kubeConfig: KubeConfig): AccessReview {
  const api = kubeConfig.makeApiClient(AuthorizationV1Api);
  return async (identity, verb, name) => {
    try {
      const { status } = await api.createSubjectAccessReview({
        body: {
          apiVersion: 'authorization.k8s.io/v1',
          kind: 'SubjectAccessReview',
          spec: { user: identity.username, uid: identity.uid, groups: identity.groups, extra: identity.extra, resourceAttributes: { ...QUERY_RESOURCE, verb, ...(name && { name }) } },
        },
      });
      return { allowed: status?.allowed === true, reason: status?.reason ?? '' };
    } catch (err) {
      throw new AuthError('unavailable', `cannot check access with the API server (${(err as Error).message}); retry shortly`);
    }
  };
}

/**
 * A named call (GetNode) first asks whether the caller may `verb` every
 * nodeusage: allowed without a name is what an RBAC rule without
 * resourceNames grants, and it covers every node, so a dashboard reading
 * 10,000 nodes costs one SubjectAccessReview per cache period, not one per
 * node. Only a caller refused that (a Role limited to resourceNames) is
 * asked about the node itself.
 */
export function queryAuthorizer(reviewer: TokenReviewer, review: AccessReview, options: QueryAuthorizerOptions = {}): QueryAuthorizer {
  const { cacheMs = 10_000, recheckMs = 60_000, now = Date.now } = options;
  const decisions = new Map<string, { until: number; allowed: boolean }>();
  /**
   * Refusals are kept only for the question before a named call (its own
   * node is asked next); any other refused call asks again next time, so a
   * new RoleBinding takes effect at once.
   */
  const ask = async (identity: Identity, verb: QueryVerb, name: string | undefined, keepRefusal: boolean) => {
    const key = `${identity.username}\u0000${identity.uid}\u0000${verb}\u0000${name ?? ''}`;
    const known = decisions.get(key);
    if (known && known.until > now() && (known.allowed || keepRefusal)) return { allowed: known.allowed, reason: '' };
    const answer = await review(identity, verb, name);
    if (answer.allowed || keepRefusal) {
      if (decisions.size > 10_000) decisions.clear();
      decisions.set(key, { until: now() + cacheMs, allowed: answer.allowed });
    }
    return answer;
  };
  return async (authorization, verb, name) => {
    const token = bearerToken(authorization);
    if (!token) throw new AuthError('unauthenticated', 'the query API needs a bearer token (oversell --token, or a kubeconfig user with a token)');
    const identity = await reviewer.review(token);
    const grant = { expiresAtMs: identity.expiresAtMs, recheckMs, caller: identity.username };
    const every = await ask(identity, verb, undefined, name !== undefined);
    if (every.allowed) return grant;
    const { allowed, reason } = name === undefined ? every : await ask(identity, verb, name, false);
    if (!allowed) {
      throw new AuthError('permission-denied', `${identity.username} may not ${verb} ${QUERY_RESOURCE.resource}.${QUERY_RESOURCE.group}${name ? ` ${name}` : ''}${reason ? ` (${reason})` : ''}; bind the ClusterRole oversell-viewer`);
    }
    return grant;
  };
}
