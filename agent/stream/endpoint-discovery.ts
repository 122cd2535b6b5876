// The gateway replicas behind a (headless) Service, from its EndpointSlices:
// every ready address, on the port named "grpc" (or the slice's only port).
import { DiscoveryV1Api, makeInformer, type KubeConfig, type V1EndpointSlice } from '@kubernetes/client-node';
import type { Logger } from '../../lib/log.js';

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

export async function watchGatewayEndpoints(
  kubeConfig: KubeConfig,
  namespace: string,
  service: string,
  onChange: (addresses: string[]) => void,
  log: Logger,
): Promise<{ stop(): Promise<void> }> {
  const api = kubeConfig.makeApiClient(DiscoveryV1Api);
  const labelSelector = `kubernetes.io/service-name=${service}`;
  const informer = makeInformer<V1EndpointSlice>(
    kubeConfig,
    `/apis/discovery.k8s.io/v1/namespaces/${namespace}/endpointslices`,
    () => api.listNamespacedEndpointSlice({ namespace, labelSelector }),
    labelSelector,
  );
  let last = '';
  let synced = false;
  const update = () => {
    if (!synced) return; // the initial list arrives object by object: decide once it is complete
    const addresses = addressesOf(informer.list());
    const key = addresses.join(',');
    if (key === last) return;
    last = key;
    log.info({ service: `${namespace}/${service}`, addresses }, 'gateway replicas changed');
    onChange(addresses);
  };
  for (const verb of ['add', 'update', 'delete'] as const) informer.on(verb, update);
  informer.on('error', (err) => {
    log.warn({ err: String(err) }, 'EndpointSlice watch failed; keeping the current replicas, retrying in 5 s');
    setTimeout(() => informer.start().catch(() => {}), 5000).unref();
  });
  await informer.start();
  synced = true;
  update();
  return { stop: () => informer.stop() };
}
