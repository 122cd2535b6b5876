// Who is calling, as the API server's TokenReview said, and the errors the
// gRPC services turn into UNAUTHENTICATED / PERMISSION_DENIED / UNAVAILABLE.

export interface Identity {
  username: string;
  uid: string;
  groups: string[];
  extra: Record<string, string[]>;
  /** From the token's own exp claim (trusted once the API server accepted the token). */
  expiresAtMs: number | undefined;
}

/**
 * Why a caller was refused; also the `reason` label of oversell_auth_refusals_total.
 * The token-* and wrong-audience refusals are decided locally, before any
 * TokenReview; throttled is the gateway's own TokenReview budget being spent.
 */
export type AuthFailure =
  | 'unauthenticated'
  | 'permission-denied'
  | 'unavailable'
  | 'token-too-long'
  | 'token-malformed'
  | 'token-expired'
  | 'wrong-audience'
  | 'throttled';

export class AuthError extends Error {
  override name = 'AuthError';
  constructor(
    readonly failure: AuthFailure,
    message: string,
  ) {
    super(message);
  }
}

/** The bearer token of an `authorization` header value, or undefined. */
export function bearerToken(header: unknown): string | undefined {
  if (typeof header !== 'string') return undefined;
  const m = /^Bearer\s+(\S+)\s*$/i.exec(header);
  return m?.[1];
}

/**
 * The exp claim of a JWT, in ms, without verifying it: only used after the API
 * server accepted the token, to end a stream when its token runs out.
 */
export function jwtExpiry(token: string): number | undefined {
  const payload = token.split('.')[1];
  if (!payload) return undefined;
  try {
    const claims: unknown = JSON.parse(Buffer.from(payload, 'base64url').toString('utf8'));
    const exp = typeof claims === 'object' && claims !== null ? (claims as { exp?: unknown }).exp : undefined;
    return typeof exp === 'number' && Number.isFinite(exp) ? exp * 1000 : undefined;
  } catch {
    return undefined;
  }
}
