// What can be refused about a bearer token without asking the API server: its
// size, its JWT shape, its exp and aud claims. The signature is not checked
// here (the API server does that in the TokenReview), so nothing read here is
// trusted as an identity; it only decides whether a review is worth sending,
// and in which lane of the review budget (review-limiter.ts) it waits.
import { AuthError } from './identity.js';

export interface PrecheckOptions {
  /** Required in the aud claim (agents: --agent-audience); undefined: any audience. */
  audience?: string;
  /**
   * Tokens that are not JWTs (static token files, some OIDC setups) and JWTs
   * without exp (legacy ServiceAccount token Secrets) go on to the TokenReview; otherwise refused.
   */
  acceptOpaque: boolean;
  /** Longest token worth reviewing (default 16 KiB; projected ServiceAccount tokens are about 1 KiB). */
  maxBytes?: number;
  /** How far past exp a token is still sent to the API server, for clock skew (default 30 s). */
  skewMs?: number;
  now?: () => number;
}

export const DEFAULT_MAX_TOKEN_BYTES = 16 * 1024;

export interface UnverifiedClaims {
  expiresAtMs: number | undefined;
  /**
   * Who the token claims to be, for prioritising reviews: the pod uid of a
   * bound ServiceAccount token, else its sub. Unverified until a review accepts it.
   */
  caller: string | undefined;
}

const record = (v: unknown): Record<string, unknown> | undefined => (typeof v === 'object' && v !== null && !Array.isArray(v) ? (v as Record<string, unknown>) : undefined);

function callerOf(claims: Record<string, unknown>): string | undefined {
  const uid = record(record(claims['kubernetes.io'])?.pod)?.uid;
  if (typeof uid === 'string' && uid) return `pod:${uid}`;
  return typeof claims.sub === 'string' && claims.sub ? `sub:${claims.sub}` : undefined;
}

/** Throws for a token longer than any worth reviewing: checked before it is hashed or decoded. */
export function checkLength(token: string, maxBytes = DEFAULT_MAX_TOKEN_BYTES): void {
  if (token.length > maxBytes) throw new AuthError('token-too-long', `bearer token of ${token.length} bytes is longer than ${maxBytes}; send the projected ServiceAccount token itself`);
}

/**
 * The token's unverified claims, undefined for an accepted opaque token; throws
 * AuthError (token-too-long, token-malformed, token-expired, wrong-audience).
 */
export function precheckToken(token: string, options: PrecheckOptions): UnverifiedClaims | undefined {
  checkLength(token, options.maxBytes);
  const parts = token.split('.');
  if (parts.length !== 3) {
    if (options.acceptOpaque && parts.length === 1) return undefined;
    throw new AuthError('token-malformed', 'bearer token is not a JWT (header.payload.signature); agents send their projected ServiceAccount token (--token-file)');
  }
  let claims: Record<string, unknown> | undefined;
  try {
    claims = record(JSON.parse(Buffer.from(parts[1]!, 'base64url').toString('utf8')));
  } catch {
    claims = undefined;
  }
  if (!claims) throw new AuthError('token-malformed', 'bearer token payload is not a JSON object; send the token exactly as the API server issued it');
  const exp = claims.exp;
  if (exp === undefined && options.acceptOpaque) return { expiresAtMs: undefined, caller: callerOf(claims) };
  if (typeof exp !== 'number' || !Number.isFinite(exp)) throw new AuthError('token-malformed', 'bearer token has no exp claim; use a token with an expiry (a projected ServiceAccount token, or kubectl create token)');
  const now = (options.now ?? Date.now)();
  if (exp * 1000 + (options.skewMs ?? 30_000) < now) {
    throw new AuthError('token-expired', `bearer token expired at ${new Date(exp * 1000).toISOString()}; use a fresh one (the kubelet rotates projected tokens; kubectl create token)`);
  }
  if (options.audience !== undefined) {
    const aud = claims.aud;
    const audiences = typeof aud === 'string' ? [aud] : Array.isArray(aud) ? aud.filter((a): a is string => typeof a === 'string') : [];
    if (!audiences.includes(options.audience)) {
      // The aud values are the caller's words: not echoed into logs.
      throw new AuthError('wrong-audience', `bearer token is not for audience ${options.audience}; project the token with audience ${options.audience} (deploy/base/agent.yaml)`);
    }
  }
  return { expiresAtMs: exp * 1000, caller: callerOf(claims) };
}
