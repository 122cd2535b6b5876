// Puts our CA into the caBundle of every webhook of the MutatingWebhookConfiguration,
// so the API server trusts the gateway without anyone copying certificates by hand.
import { AdmissionregistrationV1Api, PatchStrategy, setHeaderOptions, type KubeConfig } from '@kubernetes/client-node';

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
