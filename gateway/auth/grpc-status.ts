// How an authentication or authorization failure is answered over gRPC.
import * as grpc from '@grpc/grpc-js';
import { AuthError, type AuthFailure } from './identity.js';

const STATUS: Record<AuthFailure, grpc.status> = {
  unauthenticated: grpc.status.UNAUTHENTICATED,
  'permission-denied': grpc.status.PERMISSION_DENIED,
  unavailable: grpc.status.UNAVAILABLE,
  'token-too-long': grpc.status.UNAUTHENTICATED,
  'token-malformed': grpc.status.UNAUTHENTICATED,
  'token-expired': grpc.status.UNAUTHENTICATED,
  'wrong-audience': grpc.status.UNAUTHENTICATED,
  // Retryable: agents back off and come again, the CLI says to retry.
  throttled: grpc.status.UNAVAILABLE,
};

/** The gRPC status of a failure; anything but an AuthError is the API server being unreachable or a bug: UNAVAILABLE. */
export function authStatus(err: unknown): { code: grpc.status; details: string; failure: AuthFailure } {
  if (err instanceof AuthError) return { code: STATUS[err.failure], details: err.message, failure: err.failure };
  return { code: grpc.status.UNAVAILABLE, details: `authentication failed: ${(err as Error).message}`, failure: 'unavailable' };
}
