// gRPC over TLS with the webhook's certificate, swappable like the webhook's:
// grpc-js takes new identities from a certificate provider, so a renewed
// certificate reaches new agent connections without a restart.
import * as grpc from '@grpc/grpc-js';
import type { Tls } from './tls-keeper.js';

type IdentityListener = (update: { certificate: Buffer; privateKey: Buffer } | null) => void;

/** A certificate provider fed from memory (grpc-js ships file-watching ones only). */
export class MemoryCertificateProvider implements grpc.experimental.CertificateProvider {
  readonly #listeners = new Set<IdentityListener>();
  #current: { certificate: Buffer; privateKey: Buffer };

  constructor(tls: Tls) {
    this.#current = { certificate: Buffer.from(tls.cert), privateKey: Buffer.from(tls.key) };
  }

  set(tls: Tls): void {
    this.#current = { certificate: Buffer.from(tls.cert), privateKey: Buffer.from(tls.key) };
    for (const l of this.#listeners) l(this.#current);
  }

  addIdentityCertificateListener(listener: IdentityListener): void {
    this.#listeners.add(listener);
    // Later, not now: grpc-js registers its server's watcher only after this
    // call returns, so an identity delivered synchronously never reaches it.
    queueMicrotask(() => this.#listeners.has(listener) && listener(this.#current));
  }

  removeIdentityCertificateListener(listener: IdentityListener): void {
    this.#listeners.delete(listener);
  }

  // No client certificates: agents and query callers authenticate with tokens.
  addCaCertificateListener(): void {}
  removeCaCertificateListener(): void {}
}

export function grpcServerCredentials(provider: MemoryCertificateProvider): grpc.ServerCredentials {
  return grpc.experimental.createCertificateProviderServerCredentials(provider, null, false);
}
