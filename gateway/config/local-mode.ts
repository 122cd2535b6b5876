// Local mode (no authentication, plaintext gRPC) is for `npm start` and tests
// on one machine. It is the default only where no kubeconfig is in use, and
// then every listener binds the loopback: a gateway that can reach a cluster
// never ends up open by accident.

export interface TransportAsked {
  /** --auth as given, if given. */
  auth?: string | undefined;
  /** --grpc-tls as given (already read as on/off), if given. */
  grpcTls?: boolean | undefined;
  /** --bind-address as given, if given. */
  bindAddress?: string | undefined;
}

export interface Transport {
  auth: 'kubernetes' | 'none';
  grpcTls: boolean;
  bindAddress: string;
  /** Set when local-mode settings were asked for next to a kubeconfig: said at start, loudly. */
  warning?: string;
}

export function chooseTransport(kubeconfigInUse: boolean, asked: TransportAsked, clusterBindAddress = '0.0.0.0'): Transport {
  const auth = asked.auth ?? (kubeconfigInUse ? 'kubernetes' : 'none');
  if (auth !== 'kubernetes' && auth !== 'none') throw new Error(`--auth must be "kubernetes" or "none", got ${JSON.stringify(auth)}`);
  const grpcTls = asked.grpcTls ?? kubeconfigInUse;
  const bindAddress = asked.bindAddress ?? (kubeconfigInUse ? clusterBindAddress : '127.0.0.1');
  const open = [auth === 'none' && 'agents and query callers are not authenticated (--auth none)', !grpcTls && 'gRPC is plaintext (--grpc-tls off)'].filter(Boolean);
  if (kubeconfigInUse && open.length > 0) {
    return { auth, grpcTls, bindAddress, warning: `a kubeconfig is in use but ${open.join(' and ')}: use this only on a private test cluster` };
  }
  return { auth, grpcTls, bindAddress };
}
