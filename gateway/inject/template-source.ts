// Where sidecar templates come from: ConfigMaps labelled
// oversell.io/sidecar-template=true in the gateway's namespace (watched,
// applied without restart), a file for local runs, or none.
import { readFileSync } from 'node:fs';
import type { KubeConfig, V1ConfigMap } from '@kubernetes/client-node';
import { kubeConfigConnection } from '../../lib/kube-connection.js';
import { BACKOFF, ListWatch } from '../../lib/list-watch.js';
import type { Logger } from '../../lib/log.js';
import { WatchCache } from '../../lib/watch-cache.js';
import { TEMPLATE_LABEL, templateFromConfigMap, templatesFromFile, type TemplateEntry } from './sidecar-template.js';

export interface TemplateSource {
  readonly kind: 'configmap' | 'file' | 'none';
  /** All declared templates, valid or not, by name. */
  templates(): readonly TemplateEntry[];
  onChange(listener: () => void): void;
  stop(): Promise<void>;
}

function fixed(kind: TemplateSource['kind'], entries: TemplateEntry[]): TemplateSource {
  return { kind, templates: () => entries, onChange: () => {}, stop: async () => {} };
}

export const noTemplates = (): TemplateSource => fixed('none', []);

/** Read once at start: a YAML mapping of template name to template. Throws when the file cannot be read or parsed. */
export function fileTemplateSource(file: string, log: Logger): TemplateSource {
  const entries = templatesFromFile(readFileSync(file, 'utf8'), file);
  logInvalid(entries, log);
  return fixed('file', entries);
}

function logInvalid(entries: readonly TemplateEntry[], log: Logger): void {
  for (const e of entries) if (e.error) log.warn({ template: e.name, error: e.error }, 'sidecar template is invalid: pods asking for it get a warning and no sidecar');
}

export async function configMapTemplateSource(kubeConfig: KubeConfig, namespace: string, log: Logger): Promise<TemplateSource> {
  let entries: TemplateEntry[] = [];
  let started = false;
  const listeners: Array<() => void> = [];
  const configMaps = new WatchCache<V1ConfigMap>(() => {
    // The first list is applied below, once start() has it all.
    if (started) rebuild();
  });
  const rebuild = () => {
    entries = configMaps.list().map(templateFromConfigMap).sort((a, b) => a.name.localeCompare(b.name));
    logInvalid(entries, log);
    for (const l of listeners) l();
  };
  const watch = new ListWatch<V1ConfigMap>({
    connection: kubeConfigConnection(kubeConfig),
    path: `/api/v1/namespaces/${encodeURIComponent(namespace)}/configmaps`,
    labelSelector: `${TEMPLATE_LABEL}=true`,
    decode: (cm) => cm,
    target: configMaps,
    what: 'sidecar templates',
    log,
    backoff: BACKOFF.replicas,
  });
  try {
    await watch.start();
  } catch (err) {
    throw new Error(`cannot list ConfigMaps in ${namespace} (${(err as Error).message}); may the gateway list and watch them (deploy/base/rbac.yaml)? --sidecars none turns injection off`);
  }
  started = true;
  rebuild();
  log.info({ namespace, templates: entries.map((e) => e.name) }, 'watching sidecar templates');
  return {
    kind: 'configmap',
    templates: () => entries,
    onChange: (l) => listeners.push(l),
    stop: async () => watch.stop(),
  };
}
