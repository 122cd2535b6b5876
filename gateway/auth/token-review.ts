// Bearer tokens checked by the API server (TokenReview), with a short cache so
// thousands of agents reconnecting after a gateway restart cost one review each,
// not one per stream attempt, and a flood of bad tokens costs one review per
// distinct token for a few seconds.
import { createHash } from 'node:crypto';
import { AuthenticationV1Api, type KubeConfig } from '@kubernetes/client-node';
import { AuthError, jwtExpiry, type Identity } from './identity.js';

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
  maxEntries: number;
  now?: () => number;
}

type Entry = { until: number; identity?: Identity; error?: AuthError; pending?: Promise<Identity> };

export class CachedTokenReviewer implements TokenReviewer {
  readonly #entries = new Map<string, Entry>();
  readonly #now: () => number;
  reviews = 0;

  constructor(
    private readonly inner: TokenReviewer,
    private readonly options: TokenCacheOptions,
  ) {
    this.#now = options.now ?? Date.now;
  }

  review(token: string): Promise<Identity> {
    const key = createHash('sha256').update(token).digest('base64url');
    const now = this.#now();
    const hit = this.#entries.get(key);
    if (hit && (hit.pending || hit.until > now)) {
      if (hit.pending) return hit.pending;
      return hit.identity ? Promise.resolve(hit.identity) : Promise.reject(hit.error);
    }
    this.reviews += 1;
    const pending = this.inner.review(token).then(
      (identity) => {
        const until = Math.min(this.#now() + this.options.ttlMs, identity.expiresAtMs ?? Infinity);
        this.#set(key, { until, identity });
        return identity;
      },
      (err: unknown) => {
        // An unreachable API server is not the token's fault: do not remember it.
        if (err instanceof AuthError && err.failure !== 'unavailable') this.#set(key, { until: this.#now() + this.options.negativeTtlMs, error: err });
        else this.#entries.delete(key);
        throw err;
      },
    );
    this.#set(key, { until: Infinity, pending });
    return pending;
  }

  #set(key: string, entry: Entry): void {
    this.#entries.delete(key);
    this.#entries.set(key, entry);
    // Oldest first in a Map: drop from the front when full.
    while (this.#entries.size > this.options.maxEntries) {
      const oldest = this.#entries.keys().next().value;
      if (oldest === undefined) break;
      this.#entries.delete(oldest);
    }
  }
}
