// The gateway replicas behind a (headless) Service, from its EndpointSlices:
// every ready address, on the port named "grpc" (or the slice's only port;
// lib/endpoint-addresses.ts, which a sharded gateway reads the same way).
import { connectionOf, type KubeAccess } from '../kube/kube-access.js';
import { watchServiceAddresses } from '../../lib/endpoint-addresses.js';
import type { Logger } from '../../lib/log.js';

export async function watchGatewayEndpoints(
  access: KubeAccess,
  namespace: string,
  service: string,
  onChange: (addresses: string[]) => void,
  log: Logger,
): Promise<{ stop(): Promise<void> }> {
  return watchServiceAddresses({
    connection: connectionOf(access),
    namespace,
    service,
    what: `gateway replicas (${namespace}/${service})`,
    onChange: (addresses) => {
      log.info({ service: `${namespace}/${service}`, addresses }, 'gateway replicas changed');
      onChange(addresses);
    },
    log,
    userAgent: 'oversell-agent',
  });
}
