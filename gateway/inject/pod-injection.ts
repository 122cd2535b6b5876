// Which sidecars a new pod gets, and the JSONPatch that adds them. Pure: the pod,
// its namespace and the templates in; patch operations, names and refusals out.
//
// Never a broken pod: the API server validates the pod after mutation and
// refuses a pod our patch made invalid, whatever the failurePolicy. So a
// template that would clash with the pod (a container or volume name already
// taken, a mount of a volume nobody declares) is refused as a whole and the pod
// goes through without it, with a warning the creator sees.
//
// Idempotent: with reinvocationPolicy IfNeeded the API server calls us again
// when a later webhook changed the pod. A template the pod already carries is
// not injected twice: every container, init container and volume of the
// template is in the pod under its name and is exactly the template's, as the
// API server stores it (stored-form.ts); a look-alike of the same name is a
// collision. The annotation oversell.io/injected only reports what was
// injected: the pod's creator can write it, so it never decides anything.
//
// Required namespaces (the /mutate/pods/required webhook entry): the pod
// cannot opt out. Its oversell.io/inject annotation is ignored, its
// oversell.io/sidecars annotation may add templates but not drop the
// namespace's defaults, and a default template that cannot be added refuses
// the pod instead of letting it run without.
import { isObject, pointerEscape, type JsonPatchOp } from '../../lib/json.js';
import { allowedIn, borrowedVolumes, containerNames, type Named, type SidecarTemplate, type TemplateEntry } from './sidecar-template.js';
import { containerDifference, volumeDifference, type PodContext } from './stored-form.js';

export const INJECT = {
  /** Namespace label (enabled, required, disabled) and pod annotation (disabled: opt out). */
  optIn: 'oversell.io/inject',
  /** Pod annotation: the templates this pod wants, comma-separated; overrides the namespace's default templates. */
  sidecars: 'oversell.io/sidecars',
  /** Pod annotation we write: the templates the pod carries, comma-separated (a report, never trusted). */
  injected: 'oversell.io/injected',
} as const;

export type RefusalReason = 'collision' | 'unknown-template' | 'invalid-template' | 'missing-volume' | 'namespace-not-allowed';

export interface Refusal {
  template: string;
  reason: RefusalReason;
  /** For the AdmissionReview warning: short, as kubectl prints it on one line. */
  warning: string;
  /** A default template of a required namespace: the pod must not run without it. */
  required: boolean;
}

export interface InjectionInput {
  /** request.object of the AdmissionReview. */
  pod: unknown;
  /** request.namespace: on CREATE the object itself may carry none. */
  namespace: string | undefined;
  templates: readonly TemplateEntry[];
  /** Namespaces never touched, whatever the webhook configuration sends (defence in depth). */
  excludedNamespaces: ReadonlySet<string>;
  /** The namespace requires its sidecars: no opt-out, and a default template that cannot be added refuses the pod. */
  required?: boolean;
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
  /** Set when the pod must be refused (required namespace, a default template not added), and why. */
  denied?: string;
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

/** A container or volume of the template that the pod has under the same name but not as the template has it. */
interface LookAlike {
  what: 'container' | 'volume';
  name: string;
  difference: string;
}

/** Why this template cannot go into a pod that already has these names; undefined when it can. */
function clash(t: SidecarTemplate, containers: ReadonlySet<string>, volumes: ReadonlySet<string>, lookAlike: LookAlike | undefined): { reason: RefusalReason; why: string } | undefined {
  // A look-alike is named with what differs: the pod's author (or whoever added
  // the other webhook that changed it) needs to know what to fix.
  if (lookAlike) return { reason: 'collision', why: `${lookAlike.what} name ${quoted(lookAlike.name)} is already in the pod, and it is not the template's (${lookAlike.difference})` };
  const c = containerNames(t).find((n) => containers.has(n));
  if (c) return { reason: 'collision', why: `container name ${quoted(c)} is already in the pod` };
  const v = t.volumes.find((x) => volumes.has(x.name));
  if (v) return { reason: 'collision', why: `volume name ${quoted(v.name)} is already in the pod` };
  const missing = borrowedVolumes(t).find((n) => !volumes.has(n));
  if (missing) return { reason: 'missing-volume', why: `it mounts volume ${quoted(missing)}, which neither the pod nor the template declares` };
  return undefined;
}

const byName = (v: unknown): Map<string, Record<string, unknown>> =>
  new Map(Array.isArray(v) ? v.filter(isObject).filter((x) => typeof x.name === 'string').map((x) => [x.name as string, x]) : []);

/**
 * Does the pod carry the template already (injected before, or a copy of an
 * injected pod)? Every container, init container and volume of the template
 * must be in the pod, each exactly the template's. The first one present
 * under its name but different is the look-alike.
 */
function carried(t: SidecarTemplate, spec: Record<string, unknown>): { carried: boolean; lookAlike?: LookAlike } {
  const volumes = byName(spec.volumes);
  const pod: PodContext = { volumes, hostNetwork: spec.hostNetwork === true };
  const containers = byName(spec.containers);
  const initContainers = byName(spec.initContainers);
  let all = true;
  let lookAlike: LookAlike | undefined;
  const compare = (what: LookAlike['what'], name: string, got: unknown, difference: () => string | undefined) => {
    if (got === undefined) {
      all = false;
      return;
    }
    const d = difference();
    if (d === undefined) return;
    all = false;
    lookAlike ??= { what, name, difference: d };
  };
  for (const c of withDownwardEnv(t.initContainers, t.downwardEnv)) compare('container', c.name, initContainers.get(c.name), () => containerDifference(initContainers.get(c.name), c, pod));
  for (const c of withDownwardEnv(t.containers, t.downwardEnv)) compare('container', c.name, containers.get(c.name), () => containerDifference(containers.get(c.name), c, pod));
  for (const v of t.volumes) compare('volume', v.name, volumes.get(v.name), () => volumeDifference(volumes.get(v.name), v));
  return lookAlike ? { carried: false, lookAlike } : { carried: all };
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
  const required = input.required === true;
  if (!required && annotations?.[INJECT.optIn] === 'disabled') return skip(`the pod opted out (${INJECT.optIn}: disabled)`);
  const { spec } = pod;
  if (!isObject(spec)) {
    return required ? { ...plan, denied: `oversell: namespace ${namespace} requires its sidecars, and the object has no pod spec to add them to` } : skip('the pod has no spec');
  }

  // A template limited to other namespaces is no default here.
  const defaults = input.templates.filter((t) => t.default && allowedIn(t, namespace)).map((t) => t.name);
  const named = typeof annotations?.[INJECT.sidecars] === 'string' ? nameList(annotations[INJECT.sidecars]) : undefined;
  // Required: the pod may add templates, never drop the defaults.
  const requested = required ? [...new Set([...defaults, ...(named ?? [])])] : named ?? defaults;
  const mustHave = new Set(required ? defaults : []);
  const templateByName = new Map(input.templates.map((t) => [t.name, t]));
  const containers = new Set([...namesOf(spec.containers), ...namesOf(spec.initContainers), ...namesOf(spec.ephemeralContainers)]);
  const volumes = new Set(namesOf(spec.volumes));
  const add = { containers: [] as Named[], initContainers: [] as Named[], volumes: [] as Named[] };
  const refuse = (template: string, reason: RefusalReason, why: string) =>
    plan.refused.push({ template, reason, warning: `oversell: sidecar ${quoted(template)} not injected: ${why}`, required: mustHave.has(template) });

  for (const name of requested) {
    const entry = templateByName.get(name);
    if (!entry) {
      refuse(name, 'unknown-template', 'no such sidecar template');
      continue;
    }
    if (!allowedIn(entry, namespace)) {
      refuse(name, 'namespace-not-allowed', `the template is limited to other namespaces than ${quoted(namespace)}`);
      continue;
    }
    const found = entry.template ? carried(entry.template, spec) : undefined;
    if (found?.carried) {
      plan.present.push(name);
      continue;
    }
    if (!entry.template) {
      // The API server may cut warnings past 256 characters: the full error is in the gateway log.
      const error = entry.error ?? 'unknown error';
      refuse(name, 'invalid-template', `the template is invalid (${error.length > 120 ? `${error.slice(0, 120)}...; see the gateway log` : error})`);
      continue;
    }
    const t = entry.template;
    const problem = clash(t, containers, volumes, found?.lookAlike);
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
  const missing = plan.refused.filter((r) => r.required);
  if (missing.length > 0) {
    plan.denied = `oversell: namespace ${namespace} requires its sidecars and ${missing.map((r) => quoted(r.template)).join(', ')} could not be added (${missing
      .map((r) => r.warning.replace(/^oversell: /, ''))
      .join('; ')}); fix the pod or the template`;
    // Nothing goes in: the pod is refused (and the injection metric must not count it).
    return { ...plan, ops: [], injected: [] };
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

  const record = [...plan.present, ...plan.injected].join(',');
  if (!metadata) ops.push({ op: 'add', path: '/metadata', value: { annotations: { [INJECT.injected]: record } } });
  else if (!annotations) ops.push({ op: 'add', path: '/metadata/annotations', value: { [INJECT.injected]: record } });
  else ops.push({ op: 'add', path: `/metadata/annotations/${pointerEscape(INJECT.injected)}`, value: record });
  return plan;
}
