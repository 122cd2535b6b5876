// The gateway replicas an EndpointSlice lists, as agents dial them: every
// ready address on the port named "grpc" (or the slice's only port), as
// "ip:port" ("[ip]:port" for IPv6). Agents stream to these; a sharded gateway
// hashes node names over the same strings (lib/rendezvous.ts), so both sides
// agree on a node's owners. Both follow the slices with watchServiceAddresses.
import type { V1EndpointSlice } from '@kubernetes/client-node';
import type { BackoffOptions } from './backoff.js';
import { ListWatch, type KubeConnection, type Watching } from './list-watch.js';
import type { Logger } from './log.js';
import { WatchCache } from './watch-cache.js';

export function addressesOf(slices: readonly V1EndpointSlice[]): string[] {
  const out = new Set<string>();
  for (const slice of slices) {
    const port = slice.ports?.find((p) => p.name === 'grpc') ?? (slice.ports?.length === 1 ? slice.ports[0] : undefined);
    if (!port?.port) continue;
    for (const ep of slice.endpoints ?? []) {
      if (ep.conditions?.ready === false) continue;
      for (const a of ep.addresses ?? []) out.add(a.includes(':') ? `[${a}]:${port.port}` : `${a}:${port.port}`);
    }
  }
  return [...out].sort();
}

/**
 * Follows a Service's EndpointSlices: `onChange` hears the slices once the
 * first list is complete, then whenever the addresses they list change.
 * Resolves once the first list is in.
 */
export async function watchServiceAddresses(o: {
  connection: KubeConnection;
  namespace: string;
  service: string;
  /** What the watch is for, in its logs. */
  what: string;
  onChange: (addresses: string[], slices: readonly V1EndpointSlice[]) => void;
  log: Logger;
  backoff?: BackoffOptions;
  userAgent?: string;
}): Promise<Watching> {
  let last = '';
  let synced = false;
  const update = () => {
    if (!synced) return; // the initial list is decided on once it is complete
    const list = slices.list();
    const addresses = addressesOf(list);
    const key = addresses.join(',');
    if (key === last) return;
    last = key;
    o.onChange(addresses, list);
  };
  const slices = new WatchCache<V1EndpointSlice>(update);
  const watch = new ListWatch<V1EndpointSlice>({
    connection: o.connection,
    path: `/apis/discovery.k8s.io/v1/namespaces/${encodeURIComponent(o.namespace)}/endpointslices`,
    labelSelector: `kubernetes.io/service-name=${o.service}`,
    decode: (slice) => slice,
    target: slices,
    what: o.what,
    log: o.log,
    ...(o.backoff && { backoff: o.backoff }),
    ...(o.userAgent && { userAgent: o.userAgent }),
  });
  await watch.start();
  synced = true;
  update();
  return { stop: async () => watch.stop() };
}
