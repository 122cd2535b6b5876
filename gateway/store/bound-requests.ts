// The requests of the pods the API server has bound to each node, as the
// gateway's own watch sees them: the one source of bound requests no agent can
// inflate. Only three numbers per pod are kept, never the pod object: the
// view must stay small at cluster scale (docs/security.md gives its cost).
// The store only keeps: bound-pods-watch.ts feeds it.

export interface NodeRequests {
  cpuMillicores: number;
  memoryBytes: number;
  /** Of those, the pods the kubelet has admitted (a container status, or running): only they may lift a grant past the cap. */
  admitted: { cpuMillicores: number; memoryBytes: number };
  podCount: number;
  /** How long ago the node's newest pod was bound (Infinity if never known): its usage may not show yet. */
  newestPodAgeMs: number;
  /** Of those, the pods being deleted (an eviction or a delete under way: deletionTimestamp set). */
  leaving: { cpuMillicores: number; memoryBytes: number };
}

interface NodeSum {
  cpuMillicores: number;
  memoryBytes: number;
  admittedCpuMillicores: number;
  admittedMemoryBytes: number;
  podCount: number;
  /** The newest binding among the pods set on the node since it last had none. */
  newestBoundMs: number;
  leavingCpuMillicores: number;
  leavingMemoryBytes: number;
}

interface PodEntry {
  node: string;
  cpuMillicores: number;
  memoryBytes: number;
  /** The kubelet has accepted the pod (lib/pod-requests.ts admittedByKubelet). */
  admitted?: boolean;
  /** When the pod was bound (API server clock), 0 if unknown. */
  boundAtMs?: number;
  /** Being deleted (deletionTimestamp set). */
  leaving?: boolean;
}

export class BoundRequests {
  readonly #pods = new Map<string, PodEntry>();
  readonly #nodes = new Map<string, NodeSum>();
  #synced = false;
  readonly #leavingListeners = new Set<(node: string) => void>();

  /** Called with the node when one of its pods starts being deleted (its room is about to free). */
  onLeaving(listener: (node: string) => void): () => void {
    this.#leavingListeners.add(listener);
    return () => this.#leavingListeners.delete(listener);
  }

  /** True once a full list has been applied: before that, no node's sum is known. */
  get synced(): boolean {
    return this.#synced;
  }

  get podCount(): number {
    return this.#pods.size;
  }

  /** The node's sum at nowMs; undefined until synced. A node with no pods has all zeros. */
  of(node: string, nowMs: number): NodeRequests | undefined {
    if (!this.#synced) return undefined;
    const sum = this.#nodes.get(node);
    if (!sum) return { cpuMillicores: 0, memoryBytes: 0, admitted: { cpuMillicores: 0, memoryBytes: 0 }, podCount: 0, newestPodAgeMs: Infinity, leaving: { cpuMillicores: 0, memoryBytes: 0 } };
    return {
      cpuMillicores: sum.cpuMillicores,
      memoryBytes: sum.memoryBytes,
      admitted: { cpuMillicores: sum.admittedCpuMillicores, memoryBytes: sum.admittedMemoryBytes },
      podCount: sum.podCount,
      newestPodAgeMs: sum.newestBoundMs > 0 ? Math.max(0, nowMs - sum.newestBoundMs) : Infinity,
      leaving: { cpuMillicores: sum.leavingCpuMillicores, memoryBytes: sum.leavingMemoryBytes },
    };
  }

  /** A pod bound (or changed); `holds` false for a finished pod, which holds nothing; `admitted` once the kubelet has accepted it; `leaving` once it is being deleted. */
  set(uid: string, node: string, cpuMillicores: number, memoryBytes: number, holds = true, boundAtMs = 0, admitted = true, leaving = false): void {
    const wasLeaving = this.#pods.get(uid)?.leaving === true;
    this.delete(uid);
    if (!holds || !node) return;
    this.#pods.set(uid, { node, cpuMillicores, memoryBytes, admitted, leaving });
    const aCpu = admitted ? cpuMillicores : 0;
    const aMem = admitted ? memoryBytes : 0;
    const lCpu = leaving ? cpuMillicores : 0;
    const lMem = leaving ? memoryBytes : 0;
    const sum = this.#nodes.get(node);
    if (sum) {
      sum.cpuMillicores += cpuMillicores;
      sum.memoryBytes += memoryBytes;
      sum.admittedCpuMillicores += aCpu;
      sum.admittedMemoryBytes += aMem;
      sum.leavingCpuMillicores += lCpu;
      sum.leavingMemoryBytes += lMem;
      sum.podCount += 1;
      if (boundAtMs > sum.newestBoundMs) sum.newestBoundMs = boundAtMs;
    } else {
      this.#nodes.set(node, { cpuMillicores, memoryBytes, admittedCpuMillicores: aCpu, admittedMemoryBytes: aMem, podCount: 1, newestBoundMs: boundAtMs, leavingCpuMillicores: lCpu, leavingMemoryBytes: lMem });
    }
    if (leaving && !wasLeaving && this.#synced) for (const listener of this.#leavingListeners) listener(node);
  }

  delete(uid: string): void {
    const old = this.#pods.get(uid);
    if (!old) return;
    this.#pods.delete(uid);
    const sum = this.#nodes.get(old.node);
    if (!sum) return;
    sum.podCount -= 1;
    if (sum.podCount === 0) {
      this.#nodes.delete(old.node);
    } else {
      sum.cpuMillicores -= old.cpuMillicores;
      sum.memoryBytes -= old.memoryBytes;
      if (old.admitted !== false) {
        sum.admittedCpuMillicores -= old.cpuMillicores;
        sum.admittedMemoryBytes -= old.memoryBytes;
      }
      if (old.leaving) {
        sum.leavingCpuMillicores -= old.cpuMillicores;
        sum.leavingMemoryBytes -= old.memoryBytes;
      }
    }
  }

  /** A fresh list replaces everything (a watch that fell too far behind re-lists). */
  replaceAll(entries: Iterable<{ uid: string } & PodEntry>): void {
    this.#pods.clear();
    this.#nodes.clear();
    for (const e of entries) this.set(e.uid, e.node, e.cpuMillicores, e.memoryBytes, true, e.boundAtMs, e.admitted ?? true, e.leaving ?? false);
    this.#synced = true;
  }
}
