// Who each pod uid is, for the metrics API: agents report pods by uid and
// containers by runtime id only, PodMetrics name them. Each pod is reduced on
// arrival to its namespace, name, node, labels and the ids its status lists
// with their container names, so no pod object is kept.
import type { V1ContainerStatus, V1Pod } from '@kubernetes/client-node';

export interface DirectoryPod {
  uid: string;
  namespace: string;
  name: string;
  /** spec.nodeName: only that node's agent speaks for the pod. */
  node: string;
  labels: Record<string, string>;
  /** Runtime id (no "containerd://" prefix), container name, id, name, ...: flat, a small array per pod rather than a Map. */
  containers: string[];
}

/** "containerd://<id>" -> "<id>"; "" while the container has not started. */
const runtimeId = (containerId: string | undefined): string => {
  if (!containerId) return '';
  const at = containerId.indexOf('://');
  return at < 0 ? containerId : containerId.slice(at + 3);
};

/**
 * The pod as the directory keeps it; undefined without uid, name or node.
 * Containers, restartable init containers (sidecars) and ephemeral
 * containers all run in cgroups the agent reports, so all three count.
 */
export function directoryPod(pod: V1Pod): DirectoryPod | undefined {
  const m = pod.metadata;
  const node = pod.spec?.nodeName;
  if (!m?.uid || !m.name || !node) return undefined;
  const containers: string[] = [];
  const add = (statuses: V1ContainerStatus[] | undefined) => {
    for (const s of statuses ?? []) {
      const id = runtimeId(s.containerID);
      if (id && s.name) containers.push(id, s.name);
    }
  };
  add(pod.status?.containerStatuses);
  add(pod.status?.initContainerStatuses);
  add(pod.status?.ephemeralContainerStatuses);
  return { uid: m.uid, namespace: m.namespace ?? '', name: m.name, node, labels: m.labels ?? {}, containers };
}

export class PodDirectory {
  readonly #byUid = new Map<string, DirectoryPod>();
  /** namespace -> name -> pod: gets by name, and a namespace's pods without a scan (the HPA lists one namespace). */
  readonly #byNamespace = new Map<string, Map<string, DirectoryPod>>();
  #synced = false;

  /** False until the first complete list: until then every pod is unknown. */
  get synced(): boolean {
    return this.#synced;
  }

  get size(): number {
    return this.#byUid.size;
  }

  replaceAll(pods: DirectoryPod[]): void {
    this.#byUid.clear();
    this.#byNamespace.clear();
    for (const p of pods) this.set(p);
    this.#synced = true;
  }

  set(pod: DirectoryPod): void {
    const old = this.#byUid.get(pod.uid);
    if (old) this.#unname(old);
    this.#byUid.set(pod.uid, pod);
    let names = this.#byNamespace.get(pod.namespace);
    if (!names) this.#byNamespace.set(pod.namespace, (names = new Map()));
    names.set(pod.name, pod);
  }

  delete(uid: string): void {
    const old = this.#byUid.get(uid);
    if (!old) return;
    this.#byUid.delete(uid);
    this.#unname(old);
  }

  /** A pod deleted and created again under its name has a new uid: only the name's own entry goes. */
  #unname(pod: DirectoryPod): void {
    const names = this.#byNamespace.get(pod.namespace);
    if (names?.get(pod.name) !== pod) return;
    names.delete(pod.name);
    if (names.size === 0) this.#byNamespace.delete(pod.namespace);
  }

  byUid(uid: string): DirectoryPod | undefined {
    return this.#byUid.get(uid);
  }

  byName(namespace: string, name: string): DirectoryPod | undefined {
    return this.#byNamespace.get(namespace)?.get(name);
  }

  namespaces(): Iterable<string> {
    return this.#byNamespace.keys();
  }

  inNamespace(namespace: string): Iterable<DirectoryPod> {
    return this.#byNamespace.get(namespace)?.values() ?? [];
  }
}
