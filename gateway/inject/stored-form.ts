// Is a pod's container (or volume) exactly a sidecar template's, as the API
// server stores it? Pure.
//
// A pod that already has a container of the sidecar's name is taken to carry
// the sidecar (a re-invocation, or a copy of an injected pod submitted again)
// only when that container is the template's, whole: any other difference (a
// volume of that name from another source, env from the pod author's
// ConfigMap, an extra mount or subPath, looser securityContext...) would run
// the author's program in the sidecar's place. But the pod we see went through
// the API server: decoded with the v1 defaults (imagePullPolicy,
// terminationMessagePath, a Secret volume's defaultMode, requests copied from
// limits...), written back by Go (the zero value of a plain field is left out:
// `readOnly: false` comes back as no readOnly) with quantities in canonical
// form ("1000m" comes back as "1"), and given the ServiceAccount token mount.
// So both sides are brought to that stored form and compared whole. The
// defaults are those of k8s.io/kubernetes pkg/apis/core/v1 (defaults.go and
// zz_generated.defaults.go, read at v1.36.3); an explicit value that differs
// from the default is a difference.
import { isObject } from '../../lib/json.js';
import { milliValue, parseQuantity } from '../../lib/quantity.js';

type Obj = Record<string, unknown>;

/** Where the ServiceAccount admission plugin mounts the pod's token into every container. */
export const TOKEN_MOUNT_PATH = '/var/run/secrets/kubernetes.io/serviceaccount';
const TOKEN_VOLUME_PREFIX = 'kube-api-access-';
// The volume that plugin adds (plugin/pkg/admission/serviceaccount TokenVolumeSource).
const TOKEN_VOLUME_SOURCE = {
  projected: {
    defaultMode: 420,
    sources: [
      { serviceAccountToken: { path: 'token', expirationSeconds: 3607 } },
      { configMap: { name: 'kube-root-ca.crt', items: [{ key: 'ca.crt', path: 'ca.crt' }] } },
      { downwardAPI: { items: [{ path: 'namespace', fieldRef: { apiVersion: 'v1', fieldPath: 'metadata.namespace' } }] } },
    ],
  },
};

// Plain (not pointer) fields with omitempty in the v1 types a container or a
// volume holds: Go never writes their zero value, so zero and absent are the
// same there. Pointer fields (allowPrivilegeEscalation, optional, runAsUser...)
// keep an explicit false or 0, which means something else than absent: not listed.
const ZERO_IS_ABSENT = new Set([
  'readOnly', 'stdin', 'stdinOnce', 'tty', 'workingDir', 'subPath', 'subPathExpr', 'value', 'hostIP', 'hostPort',
  'initialDelaySeconds', 'medium', 'secretName', 'host', 'name',
]);
const isZero = (v: unknown) => v === false || v === 0 || v === '';

/** Null members and zero plain fields dropped, recursively: what Go writes back. */
function clean(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(clean);
  if (!isObject(v)) return v;
  const out: Obj = {};
  for (const [k, x] of Object.entries(v)) {
    if (x === null || x === undefined || (ZERO_IS_ABSENT.has(k) && isZero(x))) continue;
    out[k] = clean(x);
  }
  return out;
}

/** Empty objects and lists dropped, recursively (after defaulting, so an emptyDir: {} is dropped on both sides alike). */
function prune(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(prune);
  if (!isObject(v)) return v;
  const out: Obj = {};
  for (const [k, x] of Object.entries(v)) {
    const p = prune(x);
    if ((Array.isArray(p) && p.length === 0) || (isObject(p) && Object.keys(p).length === 0)) continue;
    out[k] = p;
  }
  return out;
}

const objects = (v: unknown): Obj[] => (Array.isArray(v) ? v.filter(isObject) : []);
const obj = (v: unknown): Obj | undefined => (isObject(v) ? v : undefined);

/** SetDefaults_Container: Always for the tag "latest" (or none and no digest), else IfNotPresent. */
export function defaultPullPolicy(image: unknown): 'Always' | 'IfNotPresent' {
  if (typeof image !== 'string') return 'IfNotPresent';
  const at = image.indexOf('@');
  const name = at >= 0 ? image.slice(0, at) : image;
  const colon = name.indexOf(':', name.lastIndexOf('/') + 1);
  const tag = colon >= 0 ? name.slice(colon + 1) : at >= 0 ? '' : 'latest';
  return tag === 'latest' ? 'Always' : 'IfNotPresent';
}

// A quantity compares by value: the API server stores "1000m" as "1".
// Resource lists are also rounded up to milli-units (SetDefaults_ResourceList).
function quantity(v: unknown, milli: boolean): unknown {
  if (typeof v !== 'string') return v;
  try {
    const q = parseQuantity(v);
    return milli ? `${milliValue(q)}m` : `${q.nanos}n`;
  } catch {
    return v; // not a quantity: the API server refuses the pod anyway; compared as written
  }
}

function resourceList(r: Obj | undefined): void {
  if (!r) return;
  for (const key of ['limits', 'requests']) {
    const list = obj(r[key]);
    if (list) for (const k of Object.keys(list)) list[k] = quantity(list[k], true);
  }
}

function httpGet(action: unknown): void {
  const h = obj(action);
  if (!h) return;
  h.path ||= '/';
  h.scheme ||= 'HTTP';
}

function fieldRef(holder: Obj | undefined): void {
  const ref = obj(holder?.fieldRef);
  if (ref) ref.apiVersion ||= 'v1';
  const res = obj(holder?.resourceFieldRef);
  if (res && res.divisor !== undefined) res.divisor = quantity(res.divisor, false);
}

function defaultContainer(c: Obj, hostNetwork: boolean): void {
  c.imagePullPolicy ||= defaultPullPolicy(c.image);
  c.terminationMessagePath ||= '/dev/termination-log';
  c.terminationMessagePolicy ||= 'File';
  for (const p of objects(c.ports)) {
    p.protocol ||= 'TCP';
    if (hostNetwork && !p.hostPort) p.hostPort = p.containerPort;
  }
  for (const e of objects(c.env)) {
    const from = obj(e.valueFrom);
    fieldRef(from);
    const fileKeyRef = obj(from?.fileKeyRef);
    if (fileKeyRef) fileKeyRef.optional ??= false;
  }
  const resources = obj(c.resources);
  const limits = obj(resources?.limits);
  // SetDefaults_Pod: a limit without a request is also the request.
  if (resources && limits) {
    const requests = obj(resources.requests) ?? {};
    for (const [k, v] of Object.entries(limits)) if (!(k in requests)) requests[k] = v;
    resources.requests = requests;
  }
  resourceList(resources);
  for (const key of ['livenessProbe', 'readinessProbe', 'startupProbe']) {
    const probe = obj(c[key]);
    if (!probe) continue;
    probe.timeoutSeconds ||= 1;
    probe.periodSeconds ||= 10;
    probe.successThreshold ||= 1;
    probe.failureThreshold ||= 3;
    httpGet(probe.httpGet);
    const grpc = obj(probe.grpc);
    if (grpc) grpc.service ??= '';
  }
  const lifecycle = obj(c.lifecycle);
  for (const key of ['postStart', 'preStop']) httpGet(obj(lifecycle?.[key])?.httpGet);
  // NotRequired is what an absent resize policy means; some versions write it out.
  if (Array.isArray(c.resizePolicy)) c.resizePolicy = objects(c.resizePolicy).filter((p) => p.restartPolicy !== 'NotRequired');
}

function defaultVolume(v: Obj): void {
  // SetDefaults_Volume: a volume without a source is an emptyDir.
  if (Object.keys(v).every((k) => k === 'name')) v.emptyDir = {};
  const hostPath = obj(v.hostPath);
  if (hostPath) hostPath.type ??= '';
  for (const key of ['secret', 'configMap', 'downwardAPI', 'projected']) {
    const source = obj(v[key]);
    if (source) source.defaultMode ??= 420;
  }
  for (const item of objects(obj(v.downwardAPI)?.items)) fieldRef(item);
  for (const s of objects(obj(v.projected)?.sources)) {
    for (const item of objects(obj(s.downwardAPI)?.items)) fieldRef(item);
    const token = obj(s.serviceAccountToken);
    if (token) token.expirationSeconds ??= 3600;
  }
  const emptyDir = obj(v.emptyDir);
  if (emptyDir && emptyDir.sizeLimit !== undefined) emptyDir.sizeLimit = quantity(emptyDir.sizeLimit, false);
  const iscsi = obj(v.iscsi);
  if (iscsi) iscsi.iscsiInterface ||= 'default';
  const rbd = obj(v.rbd);
  if (rbd) {
    rbd.pool ||= 'rbd';
    rbd.user ||= 'admin';
    rbd.keyring ||= '/etc/ceph/keyring';
  }
  const azureDisk = obj(v.azureDisk);
  if (azureDisk) {
    azureDisk.cachingMode ??= 'ReadWrite';
    azureDisk.fsType ??= 'ext4';
    azureDisk.readOnly ??= false;
    azureDisk.kind ??= 'Shared';
  }
  const scaleIO = obj(v.scaleIO);
  if (scaleIO) {
    scaleIO.storageMode ||= 'ThinProvisioned';
    scaleIO.fsType ||= 'xfs';
  }
  const claim = obj(obj(obj(v.ephemeral)?.volumeClaimTemplate)?.spec);
  if (claim) {
    claim.volumeMode ??= 'Filesystem';
    resourceList(obj(claim.resources));
  }
  const image = obj(v.image);
  if (image) image.pullPolicy ||= defaultPullPolicy(image.reference);
}

/** A container as the API server stores it, for comparison only. */
function storedContainer(c: unknown, hostNetwork: boolean): Obj {
  const out = clean(structuredClone(c)) as Obj;
  defaultContainer(out, hostNetwork);
  return prune(out) as Obj;
}

/** A volume as the API server stores it, for comparison only. */
function storedVolume(v: unknown): Obj {
  const out = clean(structuredClone(v)) as Obj;
  defaultVolume(out);
  return prune(out) as Obj;
}

/** JSON with sorted keys: equal text, equal value. */
function canonical(v: unknown): string {
  if (Array.isArray(v)) return `[${v.map(canonical).join(',')}]`;
  if (isObject(v)) return `{${Object.keys(v).sort().map((k) => `${JSON.stringify(k)}:${canonical(v[k])}`).join(',')}}`;
  return JSON.stringify(v) ?? 'null';
}

// The fields a message names first when several differ: what runs, then what it reads.
const FIRST = ['image', 'command', 'args', 'env', 'envFrom', 'volumeMounts', 'securityContext', 'resources', 'restartPolicy'];
const rank = (k: string) => (FIRST.includes(k) ? FIRST.indexOf(k) : FIRST.length);

/** The first field where two stored objects differ; undefined when they are equal. */
function firstDifference(got: Obj, want: Obj): string | undefined {
  const keys = [...new Set([...Object.keys(got), ...Object.keys(want)])].sort((a, b) => rank(a) - rank(b) || a.localeCompare(b));
  return keys.find((k) => canonical(got[k]) !== canonical(want[k]));
}

/** Is this pod volume the ServiceAccount admission plugin's token volume, as it makes it? */
function isTokenVolume(v: Obj | undefined): boolean {
  if (!v || typeof v.name !== 'string' || !v.name.startsWith(TOKEN_VOLUME_PREFIX)) return false;
  return canonical(storedVolume(v)) === canonical(storedVolume({ name: v.name, ...TOKEN_VOLUME_SOURCE }));
}

export interface PodContext {
  /** The pod's volumes by name: a token mount must name the plugin's own token volume. */
  volumes: ReadonlyMap<string, Obj>;
  /** spec.hostNetwork: container ports then default their hostPort. */
  hostNetwork: boolean;
}

/**
 * How the pod's container is not the template's container (as injected,
 * downward env included): the first field that differs; undefined when it is.
 * Tolerated beyond the API server's defaults: the ServiceAccount token mount
 * (when the template mounts nothing at that path), and imagePullPolicy Always
 * where the template leaves it to the default (what the AlwaysPullImages
 * admission plugin sets; never weaker than the default).
 */
export function containerDifference(podContainer: unknown, template: Obj, pod: PodContext): string | undefined {
  if (!isObject(podContainer)) return 'the container';
  const want = storedContainer(template, pod.hostNetwork);
  const got = storedContainer(podContainer, pod.hostNetwork);
  const templateMountsTokenPath = objects(want.volumeMounts).some((m) => m.mountPath === TOKEN_MOUNT_PATH);
  if (!templateMountsTokenPath && Array.isArray(got.volumeMounts)) {
    const mounts = objects(got.volumeMounts).filter(
      (m) => !(m.mountPath === TOKEN_MOUNT_PATH && m.readOnly === true && Object.keys(m).length === 3 && isTokenVolume(pod.volumes.get(String(m.name)))),
    );
    if (mounts.length > 0) got.volumeMounts = mounts;
    else delete got.volumeMounts;
  }
  if (!template.imagePullPolicy && got.imagePullPolicy === 'Always') want.imagePullPolicy = 'Always';
  const field = firstDifference(got, want);
  return field === undefined ? undefined : `${field} differs`;
}

const SOURCE_FIELDS_EXCLUDED = new Set(['name']);

/** How the pod's volume differs from the template's: its source type, or the first differing field; undefined when equal. */
export function volumeDifference(podVolume: unknown, template: Obj): string | undefined {
  if (!isObject(podVolume)) return 'the volume';
  const got = storedVolume(podVolume);
  const want = storedVolume(template);
  const source = (v: Obj) => Object.keys(v).filter((k) => !SOURCE_FIELDS_EXCLUDED.has(k)).sort().join('+') || 'emptyDir';
  if (source(got) !== source(want)) return `source: ${source(got)}, not ${source(want)}`;
  const field = firstDifference(got, want);
  return field === undefined ? undefined : `${field} differs`;
}
