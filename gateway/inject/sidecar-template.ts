// Sidecar templates: what operators declare (a ConfigMap's `sidecar.yaml`, or a
// file for local runs) read into a checked template. Pure: no I/O here.
//
// The checks are the ones that keep an injection from breaking a pod: the API
// server validates the patched pod, and a pod made invalid by our patch is
// refused outright, failurePolicy or not. So names, images and mounts are
// checked here, once, and a template that fails is never injected; everything
// else in a container (resources, probes, securityContext...) is passed through
// for the API server to judge.
import yaml from 'js-yaml';
import { isObject } from '../../lib/json.js';

/** A container or volume as the pod spec holds it: a JSON object with a name. */
export type Named = Record<string, unknown> & { name: string };

export interface SidecarTemplate {
  name: string;
  /** Injected into pods of opted-in namespaces that name no sidecars themselves. */
  default: boolean;
  containers: Named[];
  /** Put before the pod's own init containers (a native sidecar must start before them). */
  initContainers: Named[];
  volumes: Named[];
  /** Environment variable name -> downward API fieldPath, added to every container of the template. */
  downwardEnv: Record<string, string>;
  /** Names of the only namespaces whose pods may get this template; undefined: every namespace. */
  namespaces: string[] | undefined;
}

/** A declared template: checked, or the reason it cannot be used. */
export interface TemplateEntry {
  name: string;
  /** Read even from an invalid template, so a broken default template still shows up as a warning on the pods it misses. */
  default: boolean;
  /** Read even from an invalid template, so a broken template limited to some namespaces still only concerns those. */
  namespaces?: string[] | undefined;
  template?: SidecarTemplate;
  error?: string;
}

/** May pods of this namespace get the template at all? */
export const allowedIn = (entry: Pick<TemplateEntry, 'namespaces'>, namespace: string): boolean =>
  entry.namespaces === undefined || entry.namespaces.includes(namespace);

const DNS_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
const ENV_NAME = /^[-._a-zA-Z][-._a-zA-Z0-9]*$/;
const KEYS = new Set(['default', 'namespaces', 'containers', 'initContainers', 'volumes', 'downwardEnv']);
// What the downward API accepts as an env fieldRef for a pod.
const FIELD_PATHS = new Set(['metadata.name', 'metadata.namespace', 'metadata.uid', 'spec.nodeName', 'spec.serviceAccountName', 'status.hostIP', 'status.hostIPs', 'status.podIP', 'status.podIPs']);
const FIELD_PATH_KEYED = /^metadata\.(labels|annotations)\['[^'\s]+'\]$/;

class TemplateError extends Error {}

const fail = (message: string): never => {
  throw new TemplateError(message);
};

function dnsLabel(v: unknown, where: string): string {
  if (typeof v !== 'string' || v.length > 63 || !DNS_LABEL.test(v)) {
    fail(`${where} must be a DNS label (lower-case letters, digits and "-", at most 63), got ${JSON.stringify(v)}`);
  }
  return v as string;
}

function list(v: unknown, where: string): Record<string, unknown>[] {
  if (v === undefined || v === null) return [];
  if (!Array.isArray(v)) return fail(`${where} must be a list`);
  return v.map((x, i) => (isObject(x) ? x : fail(`${where}[${i}] must be an object`)));
}

function container(c: Record<string, unknown>, where: string): Named {
  const name = dnsLabel(c.name, `${where}.name`);
  if (typeof c.image !== 'string' || c.image.trim() === '') fail(`${where} (${name}) needs an image`);
  list(c.env, `${where}.env`).forEach((e, i) => {
    if (typeof e.name !== 'string' || !ENV_NAME.test(e.name)) fail(`${where}.env[${i}] needs a valid name`);
  });
  list(c.volumeMounts, `${where}.volumeMounts`).forEach((m, i) => {
    if (typeof m.name !== 'string' || typeof m.mountPath !== 'string' || !m.mountPath.startsWith('/')) {
      fail(`${where}.volumeMounts[${i}] needs a name and an absolute mountPath`);
    }
  });
  return { ...c, name };
}

function downwardEnv(v: unknown): Record<string, string> {
  if (v === undefined || v === null) return {};
  if (!isObject(v)) return fail('downwardEnv must map environment variable names to fieldPaths');
  const out: Record<string, string> = {};
  for (const [name, path] of Object.entries(v)) {
    if (!ENV_NAME.test(name)) fail(`downwardEnv: ${JSON.stringify(name)} is not a valid environment variable name`);
    if (typeof path !== 'string' || !(FIELD_PATHS.has(path) || FIELD_PATH_KEYED.test(path))) {
      fail(`downwardEnv.${name}: ${JSON.stringify(path)} is not a pod fieldPath the downward API offers (${[...FIELD_PATHS].join(', ')}, metadata.labels['<key>'], metadata.annotations['<key>'])`);
    }
    out[name] = path as string;
  }
  return out;
}

// Namespace names, not a label selector: an AdmissionReview carries the pod's
// namespace name but not the namespace's labels, so names are what the
// gateway can check without reading Namespaces (and without RBAC to do so).
function namespaces(v: unknown): string[] | undefined {
  if (v === undefined || v === null) return undefined;
  if (!Array.isArray(v) || v.length === 0) return fail('namespaces must be a non-empty list of namespace names (leave it out for every namespace)');
  return (v as unknown[]).map((n, i) => dnsLabel(n, `namespaces[${i}]`));
}

function unique(names: string[], what: string): void {
  const seen = new Set<string>();
  for (const n of names) {
    if (seen.has(n)) fail(`${what} name ${JSON.stringify(n)} appears twice`);
    seen.add(n);
  }
}

function check(name: string, spec: unknown): SidecarTemplate {
  dnsLabel(name, 'template name');
  if (!isObject(spec)) return fail('the template must be an object with containers, initContainers, volumes, downwardEnv, default');
  const unknown = Object.keys(spec).filter((k) => !KEYS.has(k));
  if (unknown.length > 0) fail(`unknown field(s) ${unknown.join(', ')}; a template has ${[...KEYS].join(', ')}`);
  if (spec.default !== undefined && typeof spec.default !== 'boolean') fail('default must be true or false');
  const containers = list(spec.containers, 'containers').map((c, i) => container(c, `containers[${i}]`));
  const initContainers = list(spec.initContainers, 'initContainers').map((c, i) => container(c, `initContainers[${i}]`));
  if (containers.length + initContainers.length === 0) fail('a template needs at least one container or init container');
  // The API server wants names unique across containers and init containers together.
  unique([...containers, ...initContainers].map((c) => c.name), 'container');
  const volumes = list(spec.volumes, 'volumes').map((v, i) => ({ ...v, name: dnsLabel(v.name, `volumes[${i}].name`) }));
  unique(volumes.map((v) => v.name), 'volume');
  return { name, default: spec.default === true, containers, initContainers, volumes, downwardEnv: downwardEnv(spec.downwardEnv), namespaces: namespaces(spec.namespaces) };
}

/** The namespaces field of a template that may be invalid otherwise; a malformed list limits it to no namespace at all. */
function lenientNamespaces(spec: unknown): string[] | undefined {
  if (!isObject(spec) || spec.namespaces === undefined || spec.namespaces === null) return undefined;
  return Array.isArray(spec.namespaces) ? spec.namespaces.filter((n): n is string => typeof n === 'string') : [];
}

/** Never throws: an unusable template comes back with its error. */
export function parseTemplate(name: string, spec: unknown): TemplateEntry {
  const isDefault = isObject(spec) && spec.default === true;
  try {
    const template = check(name, spec);
    return { name, default: template.default, namespaces: template.namespaces, template };
  } catch (err) {
    if (err instanceof TemplateError) return { name, default: isDefault, namespaces: lenientNamespaces(spec), error: err.message };
    throw err;
  }
}

/** Container names a template adds to a pod (containers and init containers share one name space). */
export const containerNames = (t: SidecarTemplate): string[] => [...t.initContainers, ...t.containers].map((c) => c.name);

/** Volume names a template's containers mount that the template does not declare: they must come from the pod. */
export function borrowedVolumes(t: SidecarTemplate): string[] {
  const own = new Set(t.volumes.map((v) => v.name));
  const mounted = [...t.initContainers, ...t.containers].flatMap((c) =>
    Array.isArray(c.volumeMounts) ? c.volumeMounts.map((m: unknown) => (isObject(m) && typeof m.name === 'string' ? m.name : '')) : [],
  );
  return [...new Set(mounted.filter((n) => n && !own.has(n)))];
}

/** The ConfigMap key that holds a template, in YAML or JSON. */
export const TEMPLATE_KEY = 'sidecar.yaml';
/** Only ConfigMaps with this label are read as templates. */
export const TEMPLATE_LABEL = 'oversell.io/sidecar-template';

/** A ConfigMap of the gateway's namespace: the template's name is the ConfigMap's. */
export function templateFromConfigMap(cm: { metadata?: { name?: string }; data?: Record<string, string> }): TemplateEntry {
  const name = cm.metadata?.name ?? '';
  const text = cm.data?.[TEMPLATE_KEY];
  if (text === undefined) return { name, default: false, error: `the ConfigMap has no data key ${TEMPLATE_KEY}` };
  let spec: unknown;
  try {
    spec = yaml.load(text);
  } catch (err) {
    return { name, default: false, error: `${TEMPLATE_KEY} is not YAML: ${(err as Error).message.split('\n')[0]}` };
  }
  return parseTemplate(name, spec);
}

/** A file for runs without a cluster: a YAML mapping of template name to template. */
export function templatesFromFile(text: string, file: string): TemplateEntry[] {
  let doc: unknown;
  try {
    doc = yaml.load(text);
  } catch (err) {
    throw new Error(`${file} is not YAML: ${(err as Error).message.split('\n')[0]}`);
  }
  if (doc === undefined || doc === null) return [];
  if (!isObject(doc)) throw new Error(`${file} must map template names to templates`);
  return Object.entries(doc).map(([name, spec]) => parseTemplate(name, spec));
}
