// Take-over and give-back of the APIService v1beta1.metrics.k8s.io: oversell
// replaces metrics-server's (or any other) only when told to, keeps what it
// replaced in a ConfigMap of its own namespace, and puts that back when the
// metrics API is removed. Run as a one-shot (apiservice-handover-main.ts) by
// the Helm chart's hooks, or by hand (docs/install.md, "The metrics API").
// The ConfigMap, not an annotation on our own APIService: Helm deletes ours on
// uninstall, and what is to be given back must outlive it.
import { ApiregistrationV1Api, CoreV1Api, type KubeConfig, type V1APIService } from '@kubernetes/client-node';
import { load as loadYaml } from 'js-yaml';

export const METRICS_APISERVICE = 'v1beta1.metrics.k8s.io';
/** The saved APIService is this key of the ConfigMap, JSON (YAML too, as `kubectl create configmap --from-file` of `kubectl get -o yaml` makes it). */
export const SAVED_KEY = 'apiservice.json';
const SAVED_KEYS = [SAVED_KEY, 'apiservice.yaml'];

export interface Saved {
  namespace: string;
  name: string;
}

/** What was done, for the log line and the tests. */
export type TakeOverResult = 'created' | 'updated' | 'took-over';
export type GiveBackResult = 'given-back' | 'removed' | 'nothing-to-do' | 'left-foreign';

/** Ours: the label every oversell object carries (kustomize's labels, the chart's oversell.labels). */
export const isOurs = (a: V1APIService | undefined): boolean => a?.metadata?.labels?.['app.kubernetes.io/part-of'] === 'oversell';

const codeOf = (err: unknown): number | undefined => (err as { code?: number }).code;

async function orAbsent<T>(p: Promise<T>): Promise<T | undefined> {
  try {
    return await p;
  } catch (err) {
    if (codeOf(err) === 404) return undefined;
    throw err;
  }
}

/**
 * The APIService as it can be created again: its name, labels and annotations
 * (a Helm release that owns it still does after it is back) and its spec, with
 * nothing the API server sets (uid, resourceVersion, status, managedFields).
 */
export function restorable(a: V1APIService): V1APIService {
  const m = a.metadata ?? {};
  if (m.name !== METRICS_APISERVICE) throw new Error(`the saved APIService is named ${JSON.stringify(m.name)}, not ${METRICS_APISERVICE}: not restoring it`);
  if (!a.spec || typeof a.spec !== 'object') throw new Error(`the saved APIService ${METRICS_APISERVICE} has no spec: not restoring it`);
  return {
    apiVersion: 'apiregistration.k8s.io/v1',
    kind: 'APIService',
    metadata: { name: m.name, ...(m.labels && { labels: m.labels }), ...(m.annotations && { annotations: m.annotations }) },
    spec: a.spec,
  };
}

/** Parses the saved APIService out of the ConfigMap's data; a clear error when it is not one. */
export function parseSaved(data: Record<string, string> | undefined, where: string): V1APIService {
  const key = SAVED_KEYS.find((k) => data?.[k] !== undefined);
  if (!key || !data) throw new Error(`${where} has none of the keys ${SAVED_KEYS.join(', ')}: it does not hold a saved APIService`);
  let parsed: unknown;
  try {
    parsed = loadYaml(data[key] ?? '');
  } catch (err) {
    throw new Error(`${where} key ${key} is neither JSON nor YAML: ${(err as Error).message}`);
  }
  if (!parsed || typeof parsed !== 'object' || (parsed as V1APIService).kind !== 'APIService') throw new Error(`${where} key ${key} is not an APIService`);
  return restorable(parsed as V1APIService);
}

export class ApiServiceHandover {
  readonly #apis: ApiregistrationV1Api;
  readonly #core: CoreV1Api;
  readonly #saved: Saved;

  constructor(kubeConfig: KubeConfig, saved: Saved) {
    this.#apis = kubeConfig.makeApiClient(ApiregistrationV1Api);
    this.#core = kubeConfig.makeApiClient(CoreV1Api);
    this.#saved = saved;
  }

  get #where(): string {
    return `ConfigMap ${this.#saved.namespace}/${this.#saved.name}`;
  }

  #current(): Promise<V1APIService | undefined> {
    return orAbsent(this.#apis.readAPIService({ name: METRICS_APISERVICE }));
  }

  async #readSaved(): Promise<V1APIService | undefined> {
    const cm = await orAbsent(this.#core.readNamespacedConfigMap({ name: this.#saved.name, namespace: this.#saved.namespace }));
    return cm && parseSaved(cm.data, this.#where);
  }

  async #save(a: V1APIService): Promise<void> {
    // Delete, then create: a foreign APIService found while one is saved is
    // the newer one (metrics-server installed again) and is what to give back.
    await orAbsent(this.#core.deleteNamespacedConfigMap({ name: this.#saved.name, namespace: this.#saved.namespace }));
    await this.#core.createNamespacedConfigMap({
      namespace: this.#saved.namespace,
      body: {
        metadata: { name: this.#saved.name, namespace: this.#saved.namespace, labels: { 'app.kubernetes.io/part-of': 'oversell' } },
        data: { [SAVED_KEY]: JSON.stringify(restorable(a), null, 2) },
      },
    });
  }

  /**
   * Puts `desired` (ours) in place. A foreign APIService is replaced only
   * after it is saved; one of ours keeps its injected caBundle.
   */
  async takeOver(desired: V1APIService): Promise<TakeOverResult> {
    if (desired.metadata?.name !== METRICS_APISERVICE || !isOurs(desired)) {
      throw new Error(`the APIService to install must be ${METRICS_APISERVICE} labelled app.kubernetes.io/part-of=oversell`);
    }
    const current = await this.#current();
    if (!current) {
      await this.#apis.createAPIService({ body: desired });
      return 'created';
    }
    const foreign = !isOurs(current);
    if (foreign) await this.#save(current);
    // The caBundle is injected (by the gateway or cert-manager), never rendered: keep ours.
    const caBundle = foreign ? undefined : current.spec?.caBundle;
    const body: V1APIService = {
      ...desired,
      metadata: { ...desired.metadata, resourceVersion: current.metadata?.resourceVersion },
      spec: { ...desired.spec, ...(caBundle && !desired.spec?.caBundle && { caBundle }) } as V1APIService['spec'],
    };
    await this.#apis.replaceAPIService({ name: METRICS_APISERVICE, body });
    return foreign ? 'took-over' : 'updated';
  }

  /**
   * Puts the saved APIService back in place of ours and forgets it; with none
   * saved, removes ours. A foreign one in place (installed since) is left alone.
   */
  async giveBack(): Promise<GiveBackResult> {
    const saved = await this.#readSaved();
    const current = await this.#current();
    if (current && !isOurs(current)) return 'left-foreign';
    if (!saved) {
      if (!current) return 'nothing-to-do';
      await orAbsent(this.#apis.deleteAPIService({ name: METRICS_APISERVICE }));
      return 'removed';
    }
    if (current) {
      await this.#apis.replaceAPIService({ name: METRICS_APISERVICE, body: { ...saved, metadata: { ...saved.metadata, resourceVersion: current.metadata?.resourceVersion } } });
    } else {
      await this.#apis.createAPIService({ body: saved });
    }
    await orAbsent(this.#core.deleteNamespacedConfigMap({ name: this.#saved.name, namespace: this.#saved.namespace }));
    return 'given-back';
  }
}
