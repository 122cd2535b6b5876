// What relief and the harm count need to know of each pod bound to a node,
// beyond its usage (the agent's report) and its requests: who it is, its
// priority, QoS class and exclusive CPUs (its tier, decide/tiers.ts), when it
// started (who pays first, decide/relief.ts), and the harm its status shows
// (evicted by the kubelet, containers OOM-killed). Reduced on arrival from the
// bound pods watch, never the pod object; indexed by node, since relief asks
// for one node's pods. The store only keeps, and says when a pod's status
// shows new harm: bound-pods-watch.ts feeds it.
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
  cpuRequestMillicores: number;
  memoryRequestBytes: number;
  /** status.startTime (or the binding) on the API server's clock, ms; 0 if unknown. */
  startedAtMs: number;
  /** Succeeded or Failed: holds nothing, never a relief candidate. */
  finished: boolean;
  /** Failed with reason Evicted: the kubelet evicted it (node pressure). */
  evicted: boolean;
  /** One entry per OOM kill its status shows (a container terminated OOMKilled, now or last): container name and when. */
  oomKills: string[];
  /**
   * Of those, the kills of containers with no memory limit: the kernel killed
   * them for the node's (or the pod's) lack of memory, not for their own
   * limit. What counts against a pool's risk budget.
   */
  oomKillsWithoutLimit: string[];
}

/** The kernel's OOM kills of the pod's containers its status shows, each once: container and finish time; only those of containers without a memory limit when `withoutLimit`. */
function oomKillsOf(pod: V1Pod, withoutLimit = false): string[] {
  const out: string[] = [];
  const limited = new Set([...(pod.spec?.initContainers ?? []), ...(pod.spec?.containers ?? [])].filter((c) => c.resources?.limits?.memory !== undefined).map((c) => c.name));
  for (const c of [...(pod.status?.initContainerStatuses ?? []), ...(pod.status?.containerStatuses ?? [])]) {
    if (withoutLimit && limited.has(c.name)) continue;
    for (const t of [c.state?.terminated, c.lastState?.terminated]) {
      if (t?.reason === 'OOMKilled') out.push(`${c.name}@${String(t.finishedAt ?? t.containerID ?? '')}`);
    }
  }
  return [...new Set(out)];
}

/** The pod as relief sees it; undefined without uid, name or node, or when its resources do not parse (it is then never a candidate). */
export function podFacts(pod: V1Pod, log: Logger): PodFacts | undefined {
  const m = pod.metadata;
  const node = pod.spec?.nodeName;
  if (!m?.uid || !m.name || !node) return undefined;
  try {
    const requests = podRequests(pod);
    const started = Date.parse(String(pod.status?.startTime ?? m.creationTimestamp ?? ''));
    return {
      uid: m.uid,
      node,
      namespace: m.namespace ?? 'default',
      name: m.name,
      priority: pod.spec?.priority ?? 0,
      qos: qosClass(pod),
      exclusiveCpus: exclusiveCpus(pod),
      cpuRequestMillicores: Number(requests.cpuMillicores),
      memoryRequestBytes: Number(requests.memoryBytes),
      startedAtMs: Number.isFinite(started) ? started : 0,
      finished: pod.status?.phase === 'Succeeded' || pod.status?.phase === 'Failed',
      evicted: pod.status?.phase === 'Failed' && pod.status?.reason === 'Evicted',
      oomKills: oomKillsOf(pod),
      oomKillsWithoutLimit: oomKillsOf(pod, true),
    };
  } catch (err) {
    log.warn({ pod: `${m.namespace}/${m.name}`, err: (err as Error).message }, 'a bound pod\'s resources do not parse: it is never relieved');
    return undefined;
  }
}

/**
 * Harm a pod's status showed since the store last saw it: the kubelet evicted
 * it, or the kernel OOM-killed containers. `overload`: how many of them came
 * from a lack of memory on the node (every kubelet eviction; OOM kills of
 * containers without a memory limit), not from a container's own limit.
 */
export type Harm = { by: 'kubelet-eviction' | 'oom-kill'; count: number; overload: number };

export class PodFactsStore {
  readonly #pods = new Map<string, PodFacts>();
  readonly #byNode = new Map<string, Map<string, PodFacts>>();
  readonly #harmListeners: ((pod: PodFacts, harm: Harm) => void)[] = [];
  #synced = false;

  /** Whether the pods have been listed once: until then, a node's pods are not known. */
  get synced(): boolean {
    return this.#synced;
  }

  /** Told of harm seen as it happens: a change of a pod already known (a pod first listed carries no news). */
  onHarm(listener: (pod: PodFacts, harm: Harm) => void): void {
    this.#harmListeners.push(listener);
  }

  get size(): number {
    return this.#pods.size;
  }

  /** The pods bound to `node` that still hold resources (not finished). */
  on(node: string): PodFacts[] {
    return [...(this.#byNode.get(node)?.values() ?? [])].filter((p) => !p.finished);
  }

  get(uid: string): PodFacts | undefined {
    return this.#pods.get(uid);
  }

  set(p: PodFacts): void {
    const old = this.#pods.get(p.uid);
    if (old) this.#harmSince(old, p);
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

  #harmSince(old: PodFacts, now: PodFacts): void {
    const harms: Harm[] = [];
    if (now.evicted && !old.evicted) harms.push({ by: 'kubelet-eviction', count: 1, overload: 1 });
    const oom = now.oomKills.filter((k) => !old.oomKills.includes(k)).length;
    const overload = now.oomKillsWithoutLimit.filter((k) => !old.oomKillsWithoutLimit.includes(k)).length;
    if (oom > 0) harms.push({ by: 'oom-kill', count: oom, overload });
    for (const h of harms) for (const l of this.#harmListeners) l(now, h);
  }

  replaceAll(pods: Iterable<PodFacts>): void {
    this.#pods.clear();
    this.#byNode.clear();
    for (const p of pods) this.set(p);
    this.#synced = true;
  }
}
