// Self-managed certificates: puts our CA into the caBundle of the APIService
// v1beta1.metrics.k8s.io, so the API server's aggregator trusts the gateway's
// metrics API as the webhook does (gateway/tls/ca-bundle.ts), without anyone
// copying certificates. A replace with the read resourceVersion: a change made
// meanwhile fails it, and the next round retries. The policy
// oversell-gateway-apiservice-cabundle-only refuses any other change.
import { ApiregistrationV1Api, type KubeConfig } from '@kubernetes/client-node';
import { METRICS_APISERVICE } from './apiservice-handover.js';

/** True when the caBundle was changed, false when it was right already. Refuses an APIService that is not ours. */
export async function injectApiServiceCaBundle(kubeConfig: KubeConfig, caPem: string, name = METRICS_APISERVICE): Promise<boolean> {
  const api = kubeConfig.makeApiClient(ApiregistrationV1Api);
  const current = await api.readAPIService({ name });
  const bundle = Buffer.from(caPem).toString('base64');
  if (current.spec?.caBundle === bundle) return false;
  if (current.metadata?.labels?.['app.kubernetes.io/part-of'] !== 'oversell') {
    // metrics-server's (not taken over): our CA there would break it.
    throw new Error(`the APIService ${name} is not oversell's (no label app.kubernetes.io/part-of=oversell): not injecting our CA; see docs/install.md, "The metrics API"`);
  }
  await api.replaceAPIService({ name, body: { ...current, spec: { ...current.spec, caBundle: bundle } as typeof current.spec } });
  return true;
}
