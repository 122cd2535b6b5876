// Which sidecars a new pod gets, and the JSONPatch that adds them. Pure: the pod,
// its namespace and the templates in; patch operations, names and refusals out.
//
// Never a broken pod: the API server validates the pod after mutation and
// refuses a pod our patch made invalid, whatever the failurePolicy. So a
// template that would clash with the pod (a container or volume name already
// taken, a mount of a volume nobody declares) is refused as a whole and the pod
// goes through without it, with a warning the creator sees.
//
// Idempotent: the pod records what was injected in the annotation
// oversell.io/injected. With reinvocationPolicy IfNeeded the API server calls
// us again when a later webhook changed the pod; the templates listed there are
// not injected twice.
import { isObject, pointerEscape, type JsonPatchOp } from '../admit/admission-review.js';
import { borrowedVolumes, containerNames, type Named, type SidecarTemplate, type TemplateEntry } from './sidecar-template.js';

export const INJECT = {
  /** Namespace label (enabled, required, disabled) and pod annotation (disabled: opt out). */
  optIn: 'oversell.io/inject',
  /** Pod annotation: the templates this pod wants, comma-separated; overrides the namespace's default templates. */
  sidecars: 'oversell.io/sidecars',
  /** Pod annotation we write: the templates injected, comma-separated. */
  injected: 'oversell.io/injected',
} as const;

export type RefusalReason = 'collision' | 'unknown-template' | 'invalid-template' | 'missing-volume';

export interface Refusal {
  template: string;
  reason: RefusalReason;
  /** For the AdmissionReview warning: short, as kubectl prints it on one line. */
  warning: string;
}

export interface InjectionInput {
  /** request.object of the AdmissionReview. */
  pod: unknown;
  /** request.namespace: on CREATE the object itself may carry none. */
  namespace: string | undefined;
  templates: readonly TemplateEntry[];
  /** Namespaces never touched, whatever the webhook configuration sends (defence in depth). */
  excludedNamespaces: ReadonlySet<string>;
}

export interface InjectionPlan {
  ops: JsonPatchOp[];
  /** Templates added by this patch. */
  injected: string[];
  /** Templates the pod already carries (a re-invocation). */
  present: string[];
  refused: Refusal[];
  /** Set when the pod is not ours to touch at all, and why. */
  skipped?: string;
}

/** "a, b,,a" -> ["a", "b"]: order kept, blanks and repeats dropped. */
export function nameList(v: unknown): string[] {
  if (typeof v !== 'string') return [];
  return [...new Set(v.split(',').map((s) => s.trim()).filter(Boolean))];
}

const quoted = (s: string) => JSON.stringify(s.length > 40 ? `${s.slice(0, 40)}...` : s);

const namesOf = (v: unknown): string[] =>
  Array.isArray(v) ? v.map((x: unknown) => (isObject(x) && typeof x.name === 'string' ? x.name : '')).filter(Boolean) : [];

/** The template's containers with its downward API variables, unless a container already sets one of that name. */
function withDownwardEnv(containers: Named[], env: Record<string, string>): Named[] {
  const entries = Object.entries(env);
  if (entries.length === 0) return containers;
  return containers.map((c) => {
    const own = Array.isArray(c.env) ? (c.env as unknown[]) : [];
    const taken = new Set(namesOf(own));
    const added = entries.filter(([name]) => !taken.has(name)).map(([name, fieldPath]) => ({ name, valueFrom: { fieldRef: { fieldPath } } }));
    return { ...c, env: [...own, ...added] };
  });
}

/** Why this template cannot go into a pod that already has these names; undefined when it can. */
function clash(t: SidecarTemplate, containers: ReadonlySet<string>, volumes: ReadonlySet<string>): Omit<Refusal, 'template' | 'warning'> & { why: string } | undefined {
  const c = containerNames(t).find((n) => containers.has(n));
  if (c) return { reason: 'collision', why: `container name ${quoted(c)} is already in the pod` };
  const v = t.volumes.find((x) => volumes.has(x.name));
  if (v) return { reason: 'collision', why: `volume name ${quoted(v.name)} is already in the pod` };
  const missing = borrowedVolumes(t).find((n) => !volumes.has(n));
  if (missing) return { reason: 'missing-volume', why: `it mounts volume ${quoted(missing)}, which neither the pod nor the template declares` };
  return undefined;
}

export function planInjection(input: InjectionInput): InjectionPlan {
  const plan: InjectionPlan = { ops: [], injected: [], present: [], refused: [] };
  const skip = (why: string): InjectionPlan => ({ ...plan, skipped: why });
  const { pod } = input;
  if (!isObject(pod)) return skip('the object is not a pod');
  const metadata = isObject(pod.metadata) ? pod.metadata : undefined;
  const namespace = input.namespace || (typeof metadata?.namespace === 'string' ? metadata.namespace : '');
  if (!namespace) return skip('no namespace: cannot tell whether it is excluded');
  if (input.excludedNamespaces.has(namespace)) return skip(`namespace ${namespace} is never injected`);
  const annotations = metadata && isObject(metadata.annotations) ? metadata.annotations : undefined;
  if (annotations?.[INJECT.optIn] === 'disabled') return skip(`the pod opted out (${INJECT.optIn}: disabled)`);
  const { spec } = pod;
  if (!isObject(spec)) return skip('the pod has no spec');

  const requested = typeof annotations?.[INJECT.sidecars] === 'string'
    ? nameList(annotations[INJECT.sidecars])
    : input.templates.filter((t) => t.default).map((t) => t.name);
  const already = nameList(annotations?.[INJECT.injected]);
  const byName = new Map(input.templates.map((t) => [t.name, t]));
  const containers = new Set([...namesOf(spec.containers), ...namesOf(spec.initContainers), ...namesOf(spec.ephemeralContainers)]);
  const volumes = new Set(namesOf(spec.volumes));
  const add = { containers: [] as Named[], initContainers: [] as Named[], volumes: [] as Named[] };
  const refuse = (template: string, reason: RefusalReason, why: string) =>
    plan.refused.push({ template, reason, warning: `oversell: sidecar ${quoted(template)} not injected: ${why}` });

  for (const name of requested) {
    if (already.includes(name)) {
      plan.present.push(name);
      continue;
    }
    const entry = byName.get(name);
    if (!entry) {
      refuse(name, 'unknown-template', 'no such sidecar template');
      continue;
    }
    if (!entry.template) {
      // The API server may cut warnings past 256 characters: the full error is in the gateway log.
      const error = entry.error ?? 'unknown error';
      refuse(name, 'invalid-template', `the template is invalid (${error.length > 120 ? `${error.slice(0, 120)}...; see the gateway log` : error})`);
      continue;
    }
    const t = entry.template;
    const problem = clash(t, containers, volumes);
    if (problem) {
      refuse(name, problem.reason, problem.why);
      continue;
    }
    for (const n of containerNames(t)) containers.add(n);
    for (const v of t.volumes) volumes.add(v.name);
    add.containers.push(...withDownwardEnv(t.containers, t.downwardEnv));
    add.initContainers.push(...withDownwardEnv(t.initContainers, t.downwardEnv));
    add.volumes.push(...t.volumes);
    plan.injected.push(name);
  }
  if (plan.injected.length === 0) return plan;

  const ops = plan.ops;
  // A list the pod lacks (or holds as null) is added whole; "/-" appends to one it has.
  const append = (path: string, existing: unknown, items: Named[]) => {
    if (items.length === 0) return;
    if (Array.isArray(existing)) for (const item of items) ops.push({ op: 'add', path: `${path}/-`, value: item });
    else ops.push({ op: 'add', path, value: items });
  };
  if (Array.isArray(spec.initContainers)) {
    add.initContainers.forEach((c, i) => ops.push({ op: 'add', path: `/spec/initContainers/${i}`, value: c }));
  } else {
    append('/spec/initContainers', spec.initContainers, add.initContainers);
  }
  append('/spec/containers', spec.containers, add.containers);
  append('/spec/volumes', spec.volumes, add.volumes);

  const record = [...already, ...plan.injected].join(',');
  if (!metadata) ops.push({ op: 'add', path: '/metadata', value: { annotations: { [INJECT.injected]: record } } });
  else if (!annotations) ops.push({ op: 'add', path: '/metadata/annotations', value: { [INJECT.injected]: record } });
  else ops.push({ op: 'add', path: `/metadata/annotations/${pointerEscape(INJECT.injected)}`, value: record });
  return plan;
}
