// Puts our CA into the caBundle of every webhook of the MutatingWebhookConfiguration,
// so the API server trusts the gateway without anyone copying certificates by hand.
import { AdmissionregistrationV1Api, CoreV1Api, PatchStrategy, setHeaderOptions, type KubeConfig } from '@kubernetes/client-node';

/** Returns how many webhooks needed the new bundle (0: already right). */
export async function injectCaBundle(kubeConfig: KubeConfig, configurationName: string, caPem: string): Promise<number> {
  const api = kubeConfig.makeApiClient(AdmissionregistrationV1Api);
  const config = await api.readMutatingWebhookConfiguration({ name: configurationName });
  const bundle = Buffer.from(caPem).toString('base64');
  const ops = (config.webhooks ?? [])
    .map((w, i) => ({ w, i }))
    .filter(({ w }) => w.clientConfig.caBundle !== bundle)
    .map(({ i }) => ({ op: 'add', path: `/webhooks/${i}/clientConfig/caBundle`, value: bundle }));
  if (ops.length === 0) return 0;
  // The test op fails the patch if the list changed under us; the next round retries.
  const guarded = [{ op: 'test', path: '/metadata/resourceVersion', value: config.metadata?.resourceVersion }, ...ops];
  await api.patchMutatingWebhookConfiguration({ name: configurationName, body: guarded }, setHeaderOptions('Content-Type', PatchStrategy.JsonPatch));
  return ops.length;
}

/**
 * Publishes the CA (no key) in a ConfigMap that agent pods mount to trust the
 * gateway's gRPC certificate. Agents never mount the TLS Secret: every kubelet
 * running an agent could then read the serving key (and, self-managed, the CA key).
 * Returns true when the ConfigMap was created or changed.
 */
export async function publishCaConfigMap(kubeConfig: KubeConfig, namespace: string, name: string, caPem: string): Promise<boolean> {
  const api = kubeConfig.makeApiClient(CoreV1Api);
  const body = { metadata: { name, namespace, labels: { 'app.kubernetes.io/part-of': 'oversell' } }, data: { 'ca.crt': caPem } };
  try {
    const current = await api.readNamespacedConfigMap({ name, namespace });
    if (current.data?.['ca.crt'] === caPem) return false;
    await api.replaceNamespacedConfigMap({ name, namespace, body: { ...body, metadata: { ...body.metadata, resourceVersion: current.metadata?.resourceVersion } } });
    return true;
  } catch (err) {
    if ((err as { code?: number }).code !== 404) throw err;
    await api.createNamespacedConfigMap({ namespace, body });
    return true;
  }
}
