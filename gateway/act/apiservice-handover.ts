// Take-over and give-back of the APIService v1beta1.metrics.k8s.io: oversell
// replaces metrics-server's (or any other) only when told to, keeps what it
// replaced in a ConfigMap of its own namespace, and puts that back when the
// metrics API is removed. Run as a one-shot (apiservice-handover-main.ts) by
// the Helm chart's hooks, or by hand (docs/install.md, "The metrics API").
// The ConfigMap, not an annotation on our own APIService, holds what was
// replaced: anything that must outlive a release lives in its namespace. But a
// ConfigMap is writable by anyone with ConfigMap rights there, so it proves
// nothing: the take-over also writes the saved object's digest onto oversell's
// APIService (cluster-scoped; whoever may write it could point metrics.k8s.io
// anywhere already), and the give-back restores only a ConfigMap whose content
// has that digest (docs/security.md, invariant 26).
import { createHash } from 'node:crypto';
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
export type GiveBackResult = 'given-back' | 'removed' | 'nothing-to-do' | 'left-foreign' | 'refused-unproven';

/** On oversell's APIService: the sha256 of the APIService its take-over saved (canonical JSON of `restorable`). */
export const REPLACED_DIGEST = 'oversell.io/replaced-apiservice-sha256';

/** JSON with object keys sorted, so that the digest does not depend on how the ConfigMap spelled the object (JSON or YAML, key order). */
function canonicalJson(v: unknown): string {
  if (Array.isArray(v)) return `[${v.map(canonicalJson).join(',')}]`;
  if (v && typeof v === 'object') {
    return `{${Object.keys(v)
      .sort()
      .filter((k) => (v as Record<string, unknown>)[k] !== undefined)
      .map((k) => `${JSON.stringify(k)}:${canonicalJson((v as Record<string, unknown>)[k])}`)
      .join(',')}}`;
  }
  return JSON.stringify(v);
}

/** The digest the take-over records for a saved APIService, and the give-back checks. */
export const savedDigest = (a: V1APIService): string => createHash('sha256').update(canonicalJson(restorable(a))).digest('hex');

/** What give-back tells the operator when it refuses (logged by the one-shot). */
export interface GiveBackOutcome {
  result: GiveBackResult;
  /** Why nothing was restored, and what to do, when result is 'refused-unproven'. */
  detail?: string;
}

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
    // The record that proves the saved object at give-back: taken from the
    // object replaced now, or carried over from ours (a later upgrade).
    const digest = foreign ? savedDigest(current) : current.metadata?.annotations?.[REPLACED_DIGEST];
    // The caBundle is injected (by the gateway or cert-manager), never rendered: keep ours.
    const caBundle = foreign ? undefined : current.spec?.caBundle;
    const annotations = { ...desired.metadata?.annotations, ...(digest && { [REPLACED_DIGEST]: digest }) };
    const body: V1APIService = {
      ...desired,
      metadata: { ...desired.metadata, ...(Object.keys(annotations).length > 0 && { annotations }), resourceVersion: current.metadata?.resourceVersion },
      spec: { ...desired.spec, ...(caBundle && !desired.spec?.caBundle && { caBundle }) } as V1APIService['spec'],
    };
    await this.#apis.replaceAPIService({ name: METRICS_APISERVICE, body });
    return foreign ? 'took-over' : 'updated';
  }

  /**
   * Puts the saved APIService back in place of ours and forgets it; with none
   * saved, removes ours. A foreign one in place (installed since) is left
   * alone. The saved one is restored only when ours carries the digest its
   * take-over recorded for exactly that object: a ConfigMap planted or edited
   * by anyone else, or one found when ours is gone (no record left), is
   * refused, ours is removed all the same, and the ConfigMap stays for the
   * operator to read.
   */
  async giveBack(): Promise<GiveBackOutcome> {
    const saved = await this.#readSaved();
    const current = await this.#current();
    if (current && !isOurs(current)) return { result: 'left-foreign' };
    if (!saved) {
      if (!current) return { result: 'nothing-to-do' };
      await orAbsent(this.#apis.deleteAPIService({ name: METRICS_APISERVICE }));
      return { result: 'removed' };
    }
    const recorded = current?.metadata?.annotations?.[REPLACED_DIGEST];
    const digest = savedDigest(saved);
    if (!current || recorded !== digest) {
      if (current) await orAbsent(this.#apis.deleteAPIService({ name: METRICS_APISERVICE }));
      const target = saved.spec?.service ? `the Service ${saved.spec.service.namespace}/${saved.spec.service.name}` : 'the API server itself';
      const why = !current
        ? `oversell's APIService ${METRICS_APISERVICE} is gone, and with it the record of what its take-over saved`
        : recorded === undefined
          ? `oversell's APIService ${METRICS_APISERVICE} records no take-over (the metrics API was installed where none was, or taken over by hand)`
          : `its content (sha256 ${digest}) is not what oversell's take-over saved (sha256 ${recorded})`;
      return {
        result: 'refused-unproven',
        detail:
          `${this.#where} was not restored: ${why}. It would point metrics.k8s.io at ${target}${saved.spec?.insecureSkipTLSVerify ? ' without TLS verification' : ''}. ` +
          `${current ? "oversell's APIService was removed; " : ''}the ConfigMap is kept. If it is metrics-server's and you trust it, ` +
          `restore it yourself (kubectl get configmap -n ${this.#saved.namespace} ${this.#saved.name} -o jsonpath='{.data.apiservice\\.json}' | kubectl create -f -), ` +
          'or install metrics-server again.',
      };
    }
    await this.#apis.replaceAPIService({ name: METRICS_APISERVICE, body: { ...saved, metadata: { ...saved.metadata, resourceVersion: current.metadata?.resourceVersion } } });
    await orAbsent(this.#core.deleteNamespacedConfigMap({ name: this.#saved.name, namespace: this.#saved.namespace }));
    return { result: 'given-back' };
  }
}
