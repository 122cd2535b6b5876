// May this caller do this to nodes or pods of metrics.k8s.io? Asked of the
// API server (SubjectAccessReview, as metrics-server's delegated authorizer
// does), so ordinary RBAC decides (oversell:aggregated-metrics-reader). Answers
// are kept a few seconds in a bounded LRU: the HPA controller and kubectl
// repeat the same question. A review that fails is never taken as allowed.
import { AuthorizationV1Api, type KubeConfig } from '@kubernetes/client-node';
import type { Caller } from './front-proxy.js';
import { GROUP, type Resource } from './resource-metrics.js';

export type Verb = 'get' | 'list' | 'watch';

export interface Attributes {
  verb: Verb;
  resource: Resource;
  namespace?: string;
  name?: string;
}

export interface Decision {
  allowed: boolean;
  reason: string;
}

/** Throws when the API server could not answer: the caller then refuses (500), never allows. */
export type AccessReview = (caller: Caller, attributes: Attributes) => Promise<Decision>;

export function kubernetesAccessReview(kubeConfig: KubeConfig): AccessReview {
  const api = kubeConfig.makeApiClient(AuthorizationV1Api);
  return async (caller, a) => {
    let status;
    try {
      ({ status } = await api.createSubjectAccessReview({
        body: {
          apiVersion: 'authorization.k8s.io/v1',
          kind: 'SubjectAccessReview',
          spec: {
            user: caller.username,
            ...(caller.uid && { uid: caller.uid }),
            groups: caller.groups,
            extra: caller.extra,
            resourceAttributes: { group: GROUP, version: 'v1beta1', resource: a.resource, verb: a.verb, ...(a.namespace && { namespace: a.namespace }), ...(a.name && { name: a.name }) },
          },
        },
      }));
    } catch (err) {
      throw new Error(`cannot check access with the API server (SubjectAccessReview: ${(err as Error).message}); the gateway needs create on subjectaccessreviews (ClusterRole system:auth-delegator)`);
    }
    if (status?.evaluationError && !status.allowed) return { allowed: false, reason: status.reason || status.evaluationError };
    return { allowed: status?.allowed === true && status.denied !== true, reason: status?.reason ?? '' };
  };
}

export interface CacheOptions {
  /** How long an answer is reused (default 10 s, metrics-server's delegated authorizer's default). */
  ttlMs?: number;
  /** Answers kept at most; the least recently used goes first (default 10,000). */
  maxEntries?: number;
  now?: () => number;
}

/** The same question in the same seconds costs one review; questions in flight are shared. */
export function cachedAccessReview(review: AccessReview, options: CacheOptions = {}): AccessReview & { reviews(): number } {
  const { ttlMs = 10_000, maxEntries = 10_000, now = Date.now } = options;
  const answers = new Map<string, { until: number; decision: Decision }>();
  const pending = new Map<string, Promise<Decision>>();
  let reviews = 0;
  const cached = (caller: Caller, a: Attributes): Promise<Decision> => {
    const extra = Object.keys(caller.extra).sort().map((k) => [k, caller.extra[k]]);
    const key = JSON.stringify([caller.username, caller.uid, [...caller.groups].sort(), extra, a.verb, a.resource, a.namespace ?? '', a.name ?? '']);
    const known = answers.get(key);
    if (known && known.until > now()) {
      // Map order is insertion order: re-inserting makes it the most recently used.
      answers.delete(key);
      answers.set(key, known);
      return Promise.resolve(known.decision);
    }
    const inFlight = pending.get(key);
    if (inFlight) return inFlight;
    reviews += 1;
    const asked = review(caller, a).then(
      (decision) => {
        pending.delete(key);
        answers.delete(key);
        answers.set(key, { until: now() + ttlMs, decision });
        while (answers.size > maxEntries) {
          const oldest = answers.keys().next().value;
          if (oldest === undefined) break;
          answers.delete(oldest);
        }
        return decision;
      },
      (err: unknown) => {
        pending.delete(key);
        throw err;
      },
    );
    pending.set(key, asked);
    return asked;
  };
  return Object.assign(cached, { reviews: () => reviews });
}
