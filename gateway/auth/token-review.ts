// Bearer tokens checked by the API server (TokenReview), with a short cache so
// thousands of agents reconnecting after a gateway restart cost one review each,
// not one per stream attempt. What can be refused locally is (token-precheck.ts),
// and what is left spends a budget shared by the whole gateway (review-limiter.ts).
import { createHash } from 'node:crypto';
import { AuthenticationV1Api, type KubeConfig } from '@kubernetes/client-node';
import { AuthError, jwtExpiry, type Identity } from './identity.js';
import type { ReviewLimiter } from './review-limiter.js';
import { checkLength, precheckToken, type PrecheckOptions, type UnverifiedClaims } from './token-precheck.js';

export interface TokenReviewer {
  /** Throws AuthError. */
  review(token: string): Promise<Identity>;
}

/** The API server's verdict on a token, for one audience (undefined: the API server's own). */
export function kubernetesTokenReviewer(kubeConfig: KubeConfig, audience: string | undefined): TokenReviewer {
  const api = kubeConfig.makeApiClient(AuthenticationV1Api);
  return {
    async review(token) {
      let status;
      try {
        ({ status } = await api.createTokenReview({ body: { apiVersion: 'authentication.k8s.io/v1', kind: 'TokenReview', spec: { token, ...(audience && { audiences: [audience] }) } } }));
      } catch (err) {
        throw new AuthError('unavailable', `cannot review the token with the API server (${(err as Error).message}); retry shortly`);
      }
      if (!status?.authenticated || !status.user?.username) {
        throw new AuthError('unauthenticated', `token not accepted${audience ? ` for audience ${audience}` : ''}${status?.error ? `: ${status.error}` : ''}`);
      }
      if (audience && status.audiences && !status.audiences.includes(audience)) {
        throw new AuthError('unauthenticated', `token is not for audience ${audience}`);
      }
      const u = status.user;
      return { username: u.username ?? '', uid: u.uid ?? '', groups: u.groups ?? [], extra: u.extra ?? {}, expiresAtMs: jwtExpiry(token) };
    },
  };
}

export interface TokenCacheOptions {
  /** How long an accepted token is trusted without asking again (never past its exp). */
  ttlMs: number;
  /** How long a refused token stays refused. */
  negativeTtlMs: number;
  /** Accepted tokens remembered; refused ones are kept apart, so a flood of bad tokens cannot push good ones out. */
  maxEntries: number;
  /** Refused tokens remembered (default: maxEntries / 5). */
  maxRefused?: number;
  /** Refuse what needs no review (size, shape, exp, audience) before asking the API server. */
  precheck?: PrecheckOptions;
  /** The review budget (shared by every reviewer of the gateway); cache hits never spend it. */
  limiter?: ReviewLimiter;
  now?: () => number;
}

type Accepted = { until: number; identity: Identity };
type Refused = { until: number; error: AuthError };

/** Failures that say nothing about the token: never remembered. */
const TRANSIENT = new Set(['unavailable', 'throttled']);

export class CachedTokenReviewer implements TokenReviewer {
  readonly #accepted = new Map<string, Accepted>();
  readonly #refused = new Map<string, Refused>();
  readonly #pending = new Map<string, Promise<Identity>>();
  readonly #now: () => number;
  /** Reviews asked of the inner reviewer (the API server). */
  reviews = 0;

  constructor(
    private readonly inner: TokenReviewer,
    private readonly options: TokenCacheOptions,
  ) {
    this.#now = options.now ?? Date.now;
  }

  review(token: string): Promise<Identity> {
    const { precheck, limiter } = this.options;
    try {
      // Before hashing: a megabyte of "token" costs nothing but this comparison.
      if (precheck) checkLength(token, precheck.maxBytes);
    } catch (err) {
      return Promise.reject(err);
    }
    const key = createHash('sha256').update(token).digest('base64url');
    const now = this.#now();
    const ok = this.#accepted.get(key);
    if (ok && ok.until > now) return Promise.resolve(ok.identity);
    const pending = this.#pending.get(key);
    if (pending) return pending;
    const no = this.#refused.get(key);
    if (no && no.until > now) return Promise.reject(no.error);
    let claims: UnverifiedClaims | undefined;
    try {
      // Local refusals are not remembered: checking again is as cheap as remembering, and takes no memory.
      claims = precheck && precheckToken(token, { ...precheck, now: precheck.now ?? this.#now });
    } catch (err) {
      return Promise.reject(err);
    }
    const ask = () => {
      this.reviews += 1;
      return this.inner.review(token);
    };
    const review = (limiter ? limiter.run(claims?.caller, ask) : ask()).then(
      (identity) => {
        this.#pending.delete(key);
        if (claims?.caller) limiter?.remember(claims.caller);
        const until = Math.min(this.#now() + this.options.ttlMs, identity.expiresAtMs ?? Infinity);
        this.#set(this.#accepted, key, { until, identity }, this.options.maxEntries);
        return identity;
      },
      (err: unknown) => {
        this.#pending.delete(key);
        // An unreachable API server or a spent budget is not the token's fault: do not remember it.
        if (err instanceof AuthError && !TRANSIENT.has(err.failure)) {
          this.#set(this.#refused, key, { until: this.#now() + this.options.negativeTtlMs, error: err }, this.options.maxRefused ?? Math.ceil(this.options.maxEntries / 5));
        }
        throw err;
      },
    );
    this.#pending.set(key, review);
    return review;
  }

  #set<V>(map: Map<string, V>, key: string, value: V, max: number): void {
    map.delete(key);
    map.set(key, value);
    // Oldest first in a Map: drop from the front when full.
    while (map.size > max) {
      const oldest = map.keys().next().value;
      if (oldest === undefined) break;
      map.delete(oldest);
    }
  }
}
