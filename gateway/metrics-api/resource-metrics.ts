// The objects of metrics.k8s.io/v1beta1 as metrics-server writes them
// (kubernetes-sigs/metrics-server pkg/storage, pkg/api), built from what the
// store holds: pure functions, no I/O. A node or pod whose data is stale, or
// that no agent reports, is left out, as metrics-server leaves out what it
// has no fresh scrape of; a pod none of whose containers has a name yet (its
// status does not list the ids yet) is left out too.
import type { PodUsage__Output } from '../../proto/gen/oversell/v1/PodUsage.js';
import { formatMilli, formatQuantity } from '../../lib/quantity.js';
import type { LabelSelector } from '../../lib/label-selector.js';
import { matches } from '../decide/select-policy.js';
import { isFresh } from '../decide/decision-types.js';
import type { DirectoryPod } from '../store/pod-directory.js';

export const GROUP = 'metrics.k8s.io';
export const VERSION = 'v1beta1';
export const GROUP_VERSION = `${GROUP}/${VERSION}`;

/** What a node's newest data says, read from its store record by the caller. */
export interface NodeReading {
  name: string;
  labels: Record<string, string>;
  /** Agent clock of the newest sample. */
  timestampMs: number;
  /** What its CPU rate covers: the time between the agent's last two samples. */
  windowMs: number;
  cpuMillicores: number;
  memoryWorkingSetBytes: number;
  /** Gateway clock: how old the newest sample is. */
  ageMs: number;
}

/** A node's last pod report, read from its store record by the caller. */
export interface PodsReading {
  timestampMs: number;
  /** 0: unknown (the first report this gateway saw): its pods are left out until the next. */
  windowMs: number;
  ageMs: number;
  pods: readonly PodUsage__Output[];
}

export interface ContainerMetrics {
  name: string;
  usage: { cpu: string; memory: string };
}

export interface NodeMetrics {
  kind: 'NodeMetrics';
  apiVersion: typeof GROUP_VERSION;
  metadata: { name: string; labels?: Record<string, string>; creationTimestamp: string };
  timestamp: string;
  window: string;
  usage: { cpu: string; memory: string };
}

export interface PodMetrics {
  kind: 'PodMetrics';
  apiVersion: typeof GROUP_VERSION;
  metadata: { name: string; namespace: string; labels?: Record<string, string>; creationTimestamp: string };
  timestamp: string;
  window: string;
  containers: ContainerMetrics[];
}

/** CPU as apimachinery prints metrics-server's nanocores: "250m", "2", "0" (a list prints 100,000 of them: numbers, not BigInt, below 1000 cores). */
export function cpuQuantity(millicores: number): string {
  const m = Math.max(0, Math.round(millicores));
  if (m >= 1_000_000) return formatMilli(m);
  return m % 1000 === 0 ? String(m / 1000) : `${m}m`;
}

const BINARY = ['', 'Ki', 'Mi', 'Gi', 'Ti', 'Pi', 'Ei'];

/**
 * Memory as apimachinery prints a BinarySI quantity of bytes: "123456Ki",
 * "2Gi", and plain bytes when not a multiple of 1024 ("1500000000", never
 * "1500M": metrics-server's quantities are BinarySI).
 */
export function memoryQuantity(bytes: number): string {
  const b = Math.max(0, Math.round(bytes));
  if (b < 1024 || !Number.isSafeInteger(b)) return formatQuantity({ nanos: BigInt(b) * 1_000_000_000n, format: 'BinarySI' });
  let units = b;
  let power = 0;
  while (power < 6 && units % 1024 === 0) {
    units /= 1024;
    power += 1;
  }
  return `${units}${BINARY[power]}`;
}

/** metav1.Time: RFC 3339 in UTC, whole seconds. */
export const metaTime = (ms: number): string => `${new Date(Math.floor(ms / 1000) * 1000).toISOString().slice(0, 19)}Z`;

/** metav1.Duration: Go's time.Duration.String() of whole milliseconds ("1s", "10.5s", "1m0s"). */
export function goDuration(ms: number): string {
  const whole = Math.max(0, Math.round(ms));
  if (whole === 0) return '0s';
  if (whole < 1000) return `${whole}ms`;
  const h = Math.floor(whole / 3_600_000);
  const m = Math.floor((whole % 3_600_000) / 60_000);
  const sMs = whole % 60_000;
  const seconds = `${Math.floor(sMs / 1000)}${sMs % 1000 ? `.${String(sMs % 1000).padStart(3, '0').replace(/0+$/, '')}` : ''}s`;
  if (h > 0) return `${h}h${m}m${seconds}`;
  if (m > 0) return `${m}m${seconds}`;
  return seconds;
}

/** A node's NodeMetrics, or undefined when its data is older than staleAfterMs. */
export function nodeMetrics(node: NodeReading, staleAfterMs: number, nowMs: number): NodeMetrics | undefined {
  if (!isFresh(node.ageMs, staleAfterMs) || node.timestampMs <= 0) return undefined;
  return {
    kind: 'NodeMetrics',
    apiVersion: GROUP_VERSION,
    metadata: { name: node.name, ...(Object.keys(node.labels).length > 0 && { labels: node.labels }), creationTimestamp: metaTime(nowMs) },
    timestamp: metaTime(node.timestampMs),
    window: goDuration(node.windowMs),
    usage: { cpu: cpuQuantity(node.cpuMillicores), memory: memoryQuantity(node.memoryWorkingSetBytes) },
  };
}

/** The strings every pod of one node's report shares, made once per node rather than once per pod. */
export interface PodsStamp {
  creationTimestamp: string;
  timestamp: string;
  window: string;
}

export const podsStamp = (reading: PodsReading, nowMs: number): PodsStamp => ({ creationTimestamp: metaTime(nowMs), timestamp: metaTime(reading.timestampMs), window: goDuration(reading.windowMs) });

/**
 * A pod's PodMetrics from its node's last report: one entry per container
 * the pod's status names (the sandbox, whose id no status lists, is
 * dropped), in the order of the report. Undefined when the report is stale,
 * its window unknown, or no container of it has a name yet.
 */
export function podMetrics(pod: DirectoryPod, usage: PodUsage__Output, reading: PodsReading, staleAfterMs: number, stamp: PodsStamp): PodMetrics | undefined {
  if (!isFresh(reading.ageMs, staleAfterMs) || reading.windowMs <= 0) return undefined;
  const containers: ContainerMetrics[] = [];
  for (const c of usage.containers) {
    const name = containerName(pod, c.containerId);
    if (name === undefined) continue;
    containers.push({ name, usage: { cpu: cpuQuantity(Number(c.cpuUsageMillicores)), memory: memoryQuantity(Number(c.memoryWorkingSetBytes)) } });
  }
  if (containers.length === 0) return undefined;
  return {
    kind: 'PodMetrics',
    apiVersion: GROUP_VERSION,
    metadata: { name: pod.name, namespace: pod.namespace, ...(Object.keys(pod.labels).length > 0 && { labels: pod.labels }), creationTimestamp: stamp.creationTimestamp },
    timestamp: stamp.timestamp,
    window: stamp.window,
    containers,
  };
}

function containerName(pod: DirectoryPod, id: string): string | undefined {
  const c = pod.containers;
  for (let i = 0; i < c.length; i += 2) if (c[i] === id) return c[i + 1];
  return undefined;
}

export const nodeMetricsList = (items: NodeMetrics[]) => ({ kind: 'NodeMetricsList', apiVersion: GROUP_VERSION, metadata: {}, items });
export const podMetricsList = (items: PodMetrics[]) => ({ kind: 'PodMetricsList', apiVersion: GROUP_VERSION, metadata: {}, items });

/** A field selector over metadata.name and metadata.namespace, the two every kind has. */
export interface FieldSelector {
  terms: Array<{ field: 'metadata.name' | 'metadata.namespace'; equal: boolean; value: string }>;
}

export class BadRequest extends Error {
  override name = 'BadRequest';
}

/**
 * Parses ?fieldSelector= as the API server does for a kind without field
 * label conversions (runtime.DefaultMetaV1FieldSelectorConversion): any other
 * field is a 400 with the API server's message.
 */
export function parseFieldSelector(text: string): FieldSelector | undefined {
  if (text.trim() === '') return undefined;
  const terms: FieldSelector['terms'] = [];
  for (const raw of text.split(',')) {
    const term = raw.trim();
    const m = /^([^=!\s]+)\s*(==|=|!=)\s*(.*)$/.exec(term);
    if (!m) throw new BadRequest(`invalid selector: '${text}'; can't understand '${term}'`);
    const field = m[1] ?? '';
    if (field !== 'metadata.name' && field !== 'metadata.namespace') {
      throw new BadRequest(`"${field}" is not a known field selector: only "metadata.name", "metadata.namespace"`);
    }
    terms.push({ field, equal: m[2] !== '!=', value: m[3] ?? '' });
  }
  return { terms };
}

/** Nodes have no namespace: metadata.namespace is "" for them, as in the API server. */
export function fieldsMatch(selector: FieldSelector | undefined, name: string, namespace: string): boolean {
  if (!selector) return true;
  for (const t of selector.terms) {
    const v = t.field === 'metadata.name' ? name : namespace;
    if ((v === t.value) !== t.equal) return false;
  }
  return true;
}

/** An absent selector selects everything (select-policy's matches() selects nothing with an empty one). */
export const labelsMatch = (selector: LabelSelector | undefined, labels: Record<string, string>): boolean => !selector || matches(selector, labels);

export type Resource = 'nodes' | 'pods';

/** metav1.Status, as the API server answers a refusal. */
export interface Status {
  kind: 'Status';
  apiVersion: 'v1';
  metadata: Record<string, never>;
  status: 'Failure';
  message: string;
  reason: string;
  details?: { name?: string; group: string; kind: string };
  code: number;
}

export function status(code: number, reason: string, message: string, details?: Status['details']): Status {
  return { kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Failure', message, reason, ...(details && { details }), code };
}

/** Named as metrics-server names a missing one: "ns/name" for pods. */
export function notFound(resource: Resource, name: string): Status {
  return status(404, 'NotFound', `${resource}.${GROUP} "${name}" not found`, { name, group: GROUP, kind: resource });
}

/** The API server's wording for an authorizer's deny (k8s.io/apiserver responsewriters.Forbidden). */
export function forbidden(user: string, verb: string, resource: Resource, namespace: string | undefined, name: string | undefined, reason: string): Status {
  const scope = namespace ? `in the namespace "${namespace}"` : 'at the cluster scope';
  const what = name ? `${resource}.${GROUP} "${name}"` : `${resource}.${GROUP}`;
  const why = reason ? `: ${reason}` : '';
  return status(403, 'Forbidden', `${what} is forbidden: User "${user}" cannot ${verb} resource "${resource}" in API group "${GROUP}" ${scope}${why}`, {
    ...(name && { name }),
    group: GROUP,
    kind: resource,
  });
}

// Discovery, as the aggregator and kubectl read it. Only get and list: the API has no watch here.
const VERSIONS = [{ groupVersion: GROUP_VERSION, version: VERSION }];
export const API_GROUP = { kind: 'APIGroup', apiVersion: 'v1', name: GROUP, versions: VERSIONS, preferredVersion: VERSIONS[0] };
export const API_GROUP_LIST = { kind: 'APIGroupList', apiVersion: 'v1', groups: [{ name: GROUP, versions: VERSIONS, preferredVersion: VERSIONS[0] }] };
export const API_RESOURCE_LIST = {
  kind: 'APIResourceList',
  apiVersion: 'v1',
  groupVersion: GROUP_VERSION,
  resources: [
    { name: 'nodes', singularName: '', namespaced: false, kind: 'NodeMetrics', verbs: ['get', 'list'] },
    { name: 'pods', singularName: '', namespaced: true, kind: 'PodMetrics', verbs: ['get', 'list'] },
  ],
};
