// The gateway replicas behind a (headless) Service, from its EndpointSlices:
// every ready address, on the port named "grpc" (or the slice's only port;
// lib/endpoint-addresses.ts, which a sharded gateway reads the same way).
import type { V1EndpointSlice } from '@kubernetes/client-node';
import { connectionOf, type KubeAccess } from '../kube/kube-access.js';
import { ListWatch } from '../../lib/list-watch.js';
import { WatchCache } from '../../lib/watch-cache.js';
import { addressesOf } from '../../lib/endpoint-addresses.js';
import type { Logger } from '../../lib/log.js';

export async function watchGatewayEndpoints(
  access: KubeAccess,
  namespace: string,
  service: string,
  onChange: (addresses: string[]) => void,
  log: Logger,
): Promise<{ stop(): Promise<void> }> {
  let last = '';
  let synced = false;
  const update = () => {
    if (!synced) return; // the initial list is decided on once it is complete
    const addresses = addressesOf(slices.list());
    const key = addresses.join(',');
    if (key === last) return;
    last = key;
    log.info({ service: `${namespace}/${service}`, addresses }, 'gateway replicas changed');
    onChange(addresses);
  };
  const slices = new WatchCache<V1EndpointSlice>(update);
  const watch = new ListWatch<V1EndpointSlice>({
    connection: connectionOf(access),
    path: `/apis/discovery.k8s.io/v1/namespaces/${encodeURIComponent(namespace)}/endpointslices`,
    labelSelector: `kubernetes.io/service-name=${service}`,
    decode: (slice) => slice,
    target: slices,
    what: `gateway replicas (${namespace}/${service})`,
    log,
    userAgent: 'oversell-agent',
  });
  await watch.start();
  synced = true;
  update();
  return { stop: async () => watch.stop() };
}
