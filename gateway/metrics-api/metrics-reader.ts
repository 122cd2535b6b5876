// What metrics.k8s.io answers, read from the store and the pod directory:
// kept apart from the routes (metrics-api-plugin.ts) so that, when the gateway
// shards, the other replicas read the nodes this one holds the same way
// (gateway/shard/peer-plugin.ts).
import { parseLabelSelector, type LabelSelector } from '../../lib/label-selector.js';
import type { NodeRecord, NodeStore } from '../store/node-store.js';
import { COLUMN } from '../../lib/usage/usage-window.js';
import { summaryFor, type SummaryPlan } from '../../lib/usage/summary-plan.js';
import type { DirectoryPod, PodDirectory } from '../store/pod-directory.js';
import {
  fieldsMatch, labelsMatch, nodeMetrics, parseFieldSelector, podMetrics, podsStamp,
  type FieldSelector, type NodeMetrics, type NodeReading, type PodMetrics, type PodsReading, type PodsStamp,
} from './resource-metrics.js';

/** When a node has a single sample, what its CPU rate covers: the agent's 1 s sampling interval. */
const SAMPLE_INTERVAL_MS = 1000;

/**
 * A node's figures: with its agent's summary by `cpuPlan` (the mean over the
 * send interval, metrics-plan.ts), that mean and the time it covers; else
 * the newest sample's 1 s rate, over the time since the sample before it.
 */
export function nodeReading(r: NodeRecord, nowMs: number, cpuPlan?: SummaryPlan): NodeReading {
  const w = r.window;
  const n = w.length;
  const mean = cpuPlan && summaryFor(r.summaries, cpuPlan, w.newestMs());
  return {
    name: r.name,
    labels: r.labels,
    timestampMs: r.value('timestampMs'),
    ...(mean && mean.spanMs > 0
      ? { windowMs: mean.spanMs, cpuMillicores: mean.cpuMillicores }
      : { windowMs: n >= 2 ? w.get(n - 1, COLUMN.timestampMs) - w.get(n - 2, COLUMN.timestampMs) : SAMPLE_INTERVAL_MS, cpuMillicores: r.value('cpuUsageMillicores') }),
    // The kubelet's figure where the agent sends it (cgroup v1: the root memory cgroup's), so kubectl top agrees with the kubelet.
    memoryWorkingSetBytes: r.value('rootCgroupMemoryWorkingSetBytes') || r.value('memoryWorkingSetBytes'),
    ageMs: Math.max(0, nowMs - r.receivedAtMs),
  };
}

export const podsReading = (r: NodeRecord, nowMs: number): PodsReading => ({
  timestampMs: r.podsAtMs,
  windowMs: r.podsWindowMs,
  ageMs: Math.max(0, nowMs - r.podsReceivedAtMs),
  pods: r.pods,
});

/**
 * The main thread answers the webhook too: a list of 100,000 pods is about 2 s
 * of CPU (docs/benchmarks.md), so lists are built and written in slices with
 * a turn of the event loop between them, and a review waits one slice, not
 * the whole list.
 */
export const SLICE = 1000;
export const yieldTurn = (): Promise<void> => new Promise<void>((resolve) => setImmediate(resolve));

/** One get or list of metrics.k8s.io, as its URL says it. */
export interface MetricsQuery {
  resource: 'nodes' | 'pods';
  namespace?: string;
  name?: string;
  labelSelector?: string;
  fieldSelector?: string;
}

export interface MetricsReaderOptions {
  store: Pick<NodeStore, 'get' | 'list'>;
  directory: PodDirectory;
  /** The staleness limit of the policy governing a node with these labels. */
  staleAfterMs: (labels: Record<string, string>) => number;
  /** The plan agents summarize node CPU by for this API (metrics-plan.ts); none: the newest sample's rate. */
  cpuPlan?: SummaryPlan;
}

export class MetricsReader {
  constructor(private readonly o: MetricsReaderOptions) {}

  /** What `q` finds, in the answer's order (a get: the object or nothing). Throws BadRequest or SelectorError for a bad selector. */
  async query(q: MetricsQuery, nowMs: number): Promise<Array<NodeMetrics | PodMetrics>> {
    if (q.name !== undefined) {
      const found = q.resource === 'nodes' ? this.getNode(q.name, nowMs) : this.getPod(q.namespace ?? '', q.name, nowMs);
      return found ? [found] : [];
    }
    const labels = parseLabelSelector(q.labelSelector ?? '');
    const fields = parseFieldSelector(q.fieldSelector ?? '');
    return q.resource === 'nodes' ? this.listNodes(labels, fields, nowMs) : this.listPods(q.namespace, labels, fields, nowMs);
  }

  listNodes(labels: LabelSelector | undefined, fields: FieldSelector | undefined, nowMs: number): NodeMetrics[] {
    const items: NodeMetrics[] = [];
    for (const r of this.o.store.list()) {
      if (!r.hasSample || !fieldsMatch(fields, r.name, '') || !labelsMatch(labels, r.labels)) continue;
      const m = nodeMetrics(nodeReading(r, nowMs, this.o.cpuPlan), this.o.staleAfterMs(r.labels), nowMs);
      if (m) items.push(m);
    }
    return items.sort((x, y) => (x.metadata.name < y.metadata.name ? -1 : x.metadata.name > y.metadata.name ? 1 : 0));
  }

  /**
   * A pod's metrics from its own node's report only: an agent speaks for the
   * pods bound to its node, no other. stamps: the strings a node's pods share,
   * made once per node and request.
   */
  #podOf(pod: DirectoryPod, nowMs: number, stamps?: Map<NodeRecord, PodsStamp>): PodMetrics | undefined {
    const r = this.o.store.get(pod.node);
    if (!r?.hasSample) return undefined;
    const usage = r.pods.find((p) => p.uid === pod.uid);
    if (!usage) return undefined;
    const reading = podsReading(r, nowMs);
    let stamp = stamps?.get(r);
    if (!stamp) {
      stamp = podsStamp(reading, nowMs);
      stamps?.set(r, stamp);
    }
    return podMetrics(pod, usage, reading, this.o.staleAfterMs(r.labels), stamp);
  }

  /**
   * In the order the answer has (namespace, then name), from the directory's
   * namespace index: a namespace (what the HPA asks) costs its own pods, and
   * no sort of the whole list holds the thread.
   */
  async listPods(namespace: string | undefined, labels: LabelSelector | undefined, fields: FieldSelector | undefined, nowMs: number): Promise<PodMetrics[]> {
    const items: PodMetrics[] = [];
    const stamps = new Map<NodeRecord, PodsStamp>();
    const namespaces = namespace !== undefined ? [namespace] : [...this.o.directory.namespaces()].sort();
    let seen = 0;
    for (const ns of namespaces) {
      const pods = [...this.o.directory.inNamespace(ns)].sort((x, y) => (x.name < y.name ? -1 : x.name > y.name ? 1 : 0));
      for (const pod of pods) {
        if (++seen % SLICE === 0) await yieldTurn();
        if (!fieldsMatch(fields, pod.name, pod.namespace) || !labelsMatch(labels, pod.labels)) continue;
        const m = this.#podOf(pod, nowMs, stamps);
        if (m) items.push(m);
      }
    }
    return items;
  }

  getNode(name: string, nowMs: number): NodeMetrics | undefined {
    const r = this.o.store.get(name);
    return r?.hasSample ? nodeMetrics(nodeReading(r, nowMs, this.o.cpuPlan), this.o.staleAfterMs(r.labels), nowMs) : undefined;
  }

  getPod(namespace: string, name: string, nowMs: number): PodMetrics | undefined {
    const pod = this.o.directory.byName(namespace, name);
    return pod && this.#podOf(pod, nowMs);
  }
}

/**
 * One item per object, in the order the API answers (namespace, then name),
 * each the newest of the lists' (the first list wins ties): a sharded
 * replica's own answer and the other replicas'.
 */
export function mergeMetrics<T extends NodeMetrics | PodMetrics>(lists: readonly T[][]): T[] {
  const best = new Map<string, { item: T; at: number; namespace: string }>();
  for (const list of lists) {
    for (const item of list) {
      const namespace = 'namespace' in item.metadata ? item.metadata.namespace : '';
      const key = `${namespace}\u0000${item.metadata.name}`;
      const at = Date.parse(item.timestamp);
      const held = best.get(key);
      if (!held || at > held.at) best.set(key, { item, at, namespace });
    }
  }
  const order = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);
  return [...best.values()].sort((x, y) => order(x.namespace, y.namespace) || order(x.item.metadata.name, y.item.metadata.name)).map((b) => b.item);
}
