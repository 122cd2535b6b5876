// oversell's relief in the simulator: on each node's sample, the gateway's own
// planRelief (gateway/decide/relief.ts) picks just enough unprotected pods to
// evict through the Eviction API once the working set crosses the relief line,
// within the per-node rate limit; and the node is held at its floor (no
// inflation: nothing more is placed on it) from the sample that crossed the
// line until it has been under the calm line for the policy's calm period, so
// the evicted pods' replacements are not placed straight back on it.
import { planRelief, type ReliefCandidate, type ReliefPolicy } from '../gateway/decide/relief.js';
import type { MemoryCandidate } from './kubelet-eviction.js';

/** A running pod relief may consider: what the kubelet ranks, and whether it is protected. */
export interface ReliefSubject extends MemoryCandidate {
  protected: boolean;
  /** Step it was bound at: the youngest pays first among equals. */
  boundAt: number;
}

export class NodeRelief {
  /** Per node, steps of its evictions within the last minute. */
  private readonly recent: number[][];
  /** Per node: held at its floor. */
  readonly held: Uint8Array;
  /** Per node, the first step of its current calm stretch (-1: not calm). */
  private readonly calmFrom: Float64Array;
  private readonly minuteSteps: number;
  private readonly calmSteps: number;

  constructor(
    nodes: number,
    readonly policy: ReliefPolicy,
    calmPeriodMs: number,
    private readonly stepMs: number,
  ) {
    this.recent = Array.from({ length: nodes }, () => []);
    this.held = new Uint8Array(nodes);
    this.calmFrom = new Float64Array(nodes).fill(-1);
    this.minuteSteps = Math.max(1, Math.round(60_000 / stepMs));
    this.calmSteps = Math.max(1, Math.ceil(calmPeriodMs / stepMs));
  }

  /** Whether the node's working set is past the relief line: worth building candidates for. */
  over(memory: number, capacity: number): boolean {
    return memory > this.policy.memoryLine * capacity;
  }

  /**
   * The pods to evict from the node at step t, the node's working set and
   * capacity given; holds the node. Pods using no memory yet (still starting)
   * free nothing and are not candidates.
   */
  plan<T extends ReliefSubject>(node: number, t: number, memory: number, capacity: number, pods: readonly T[]): T[] {
    if (!this.over(memory, capacity)) return [];
    this.held[node] = 1;
    this.calmFrom[node] = -1;
    const recent = this.recent[node]!.filter((s) => t - s < this.minuteSteps);
    this.recent[node] = recent;
    const byUid = new Map<string, T>();
    const candidates: ReliefCandidate[] = [];
    for (const p of pods) {
      if (!(p.usage > 0)) continue;
      const uid = String(p.order);
      byUid.set(uid, p);
      candidates.push({
        namespace: 'sim', name: uid, uid, tier: p.protected ? { tier: 'protected', because: 'protected' } : { tier: 'unprotected' },
        priority: p.priority, memoryUsageBytes: p.usage, memoryRequestBytes: p.request, startedAtMs: p.boundAt * this.stepMs,
      });
    }
    const plan = planRelief({
      memoryCapacityBytes: capacity, memoryWorkingSetBytes: memory, candidates, skip: new Set(),
      allowance: Math.max(0, this.policy.perNodePerMinute - recent.length), policy: this.policy,
    });
    for (let k = 0; k < plan.victims.length; k++) recent.push(t);
    return plan.victims.map((v) => byUid.get(v.uid)!);
  }

  /** After the step's evictions: whether the node stays held at its floor (released once calm for the calm period). */
  holds(node: number, t: number, memory: number, capacity: number): boolean {
    if (!this.held[node]) return false;
    if (memory >= this.policy.calmLine * capacity) {
      this.calmFrom[node] = -1;
      return true;
    }
    if (this.calmFrom[node]! < 0) this.calmFrom[node] = t;
    if (t - this.calmFrom[node]! + 1 >= this.calmSteps) {
      this.held[node] = 0;
      this.calmFrom[node] = -1;
      return false;
    }
    return true;
  }
}
