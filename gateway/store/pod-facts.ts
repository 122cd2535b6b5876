// What relief needs to know of each pod bound to a node, beyond its usage (the
// agent's report) and its requests: who it is, its priority, QoS class and
// exclusive CPUs (its tier, decide/tiers.ts) and when it started (who pays
// first, decide/relief.ts). Reduced on arrival from the bound pods watch, never
// the pod object; indexed by node, since relief asks for one node's pods.
// The store only keeps: bound-pods-watch.ts feeds it.
import type { V1Pod } from '@kubernetes/client-node';
import type { Logger } from '../../lib/log.js';
import { exclusiveCpus, qosClass, type QosClass } from '../../lib/pod-qos.js';
import { podRequests } from '../../lib/pod-requests.js';

export interface PodFacts {
  uid: string;
  node: string;
  namespace: string;
  name: string;
  priority: number;
  qos: QosClass;
  exclusiveCpus: number;
  memoryRequestBytes: number;
  /** status.startTime (or the binding) on the API server's clock, ms; 0 if unknown. */
  startedAtMs: number;
}

/** The pod as relief sees it; undefined without uid, name or node, or when its resources do not parse (it is then never a candidate). */
export function podFacts(pod: V1Pod, log: Logger): PodFacts | undefined {
  const m = pod.metadata;
  const node = pod.spec?.nodeName;
  if (!m?.uid || !m.name || !node) return undefined;
  try {
    const started = Date.parse(String(pod.status?.startTime ?? m.creationTimestamp ?? ''));
    return {
      uid: m.uid,
      node,
      namespace: m.namespace ?? 'default',
      name: m.name,
      priority: pod.spec?.priority ?? 0,
      qos: qosClass(pod),
      exclusiveCpus: exclusiveCpus(pod),
      memoryRequestBytes: Number(podRequests(pod).memoryBytes),
      startedAtMs: Number.isFinite(started) ? started : 0,
    };
  } catch (err) {
    log.warn({ pod: `${m.namespace}/${m.name}`, err: (err as Error).message }, 'a bound pod\'s resources do not parse: it is never relieved');
    return undefined;
  }
}

export class PodFactsStore {
  readonly #pods = new Map<string, PodFacts>();
  readonly #byNode = new Map<string, Map<string, PodFacts>>();

  get size(): number {
    return this.#pods.size;
  }

  /** The pods bound to `node` now. */
  on(node: string): PodFacts[] {
    return [...(this.#byNode.get(node)?.values() ?? [])];
  }

  get(uid: string): PodFacts | undefined {
    return this.#pods.get(uid);
  }

  set(p: PodFacts): void {
    this.delete(p.uid);
    this.#pods.set(p.uid, p);
    let pods = this.#byNode.get(p.node);
    if (!pods) this.#byNode.set(p.node, (pods = new Map()));
    pods.set(p.uid, p);
  }

  delete(uid: string): void {
    const old = this.#pods.get(uid);
    if (!old) return;
    this.#pods.delete(uid);
    const pods = this.#byNode.get(old.node);
    pods?.delete(uid);
    if (pods?.size === 0) this.#byNode.delete(old.node);
  }

  replaceAll(pods: Iterable<PodFacts>): void {
    this.#pods.clear();
    this.#byNode.clear();
    for (const p of pods) this.set(p);
  }
}
