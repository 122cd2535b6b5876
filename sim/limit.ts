// The physical limit: a clairvoyant policy that knows every pod's whole future
// usage (the workload model computes it) and places a pod on a node only if,
// for every step of the pod's stay, the node's true summed usage (system,
// recorded load and every pod placed there) stays at or below capacity for CPU
// and at or below capacity minus the eviction threshold for memory. No targets,
// no caps, no requests: what the nodes could physically hold in the scheduler's
// order. Every other policy's gain is measured against it.
//
// How long a pod stays: a job until it ends (its run time is part of the
// workload); a Deployment's pod until the end of the run. That is exact under
// --demand saturating, where Deployments never scale down. Under the scenario's
// daily curve a pod deleted earlier hands its reserved future back when it
// goes (removed()), so what is reserved never falls below what is really used:
// the limit never overloads a node. A public trace's pod (profile.recorded)
// uses its recorded usage and stays until its recorded end, both known. It can refuse a pod for a clash after the
// pod's real deletion, which it cannot know, because which pod a ReplicaSet
// deletes depends on which pods are running: there it is a safe placement in
// the scheduler's order, not a proof that nothing could place more.
import type { Allocator, NodeShape, Placement, PodRef } from './allocators.js';
import type { Scenario } from './scenario.js';
import type { Baseline } from './trace.js';
import { podCpu, podMemory, recordedAt, withinLimits, type PodProfile, type Workload } from './workload.js';

/** Steps per block of the max-tree: the tree holds one value per block, the block is scanned. */
const BLOCK = 16;

/** A node's reserved usage of one resource at every step of the run, with a max-tree over blocks to find where a pod would not fit. */
export class ReservedUsage {
  readonly values: Float64Array;
  readonly #tree: Float64Array;
  readonly #leaves: number;

  constructor(readonly steps: number) {
    this.values = new Float64Array(steps);
    let leaves = 1;
    while (leaves * BLOCK < steps) leaves *= 2;
    this.#leaves = leaves;
    this.#tree = new Float64Array(2 * leaves).fill(-Infinity);
    this.refresh(0, steps);
  }

  /** Recomputes the tree after values[from, to) changed. */
  refresh(from: number, to: number): void {
    if (to <= from) return;
    const tree = this.#tree;
    const b0 = Math.floor(from / BLOCK);
    const b1 = Math.floor((to - 1) / BLOCK);
    for (let b = b0; b <= b1; b++) {
      let m = -Infinity;
      const end = Math.min(this.steps, (b + 1) * BLOCK);
      for (let t = b * BLOCK; t < end; t++) if (this.values[t]! > m) m = this.values[t]!;
      tree[this.#leaves + b] = m;
    }
    for (let l = (this.#leaves + b0) >> 1, r = (this.#leaves + b1) >> 1; l >= 1; l >>= 1, r >>= 1) {
      for (let i = l; i <= r; i++) tree[i] = Math.max(tree[2 * i]!, tree[2 * i + 1]!);
    }
  }

  /** Is there a step t in [from, to) with values[t] + pod(t) > limit? podMax is at least pod(t) at every step. */
  exceeds(from: number, to: number, limit: number, podMax: number, pod: (t: number) => number): boolean {
    return from < to && this.#visit(1, 0, this.#leaves * BLOCK, from, to, limit, podMax, pod);
  }

  #visit(node: number, lo: number, hi: number, from: number, to: number, limit: number, podMax: number, pod: (t: number) => number): boolean {
    const tree = this.#tree;
    if (hi <= from || lo >= to || tree[node]! + podMax <= limit) return false;
    if (node >= this.#leaves) {
      const end = Math.min(hi, to);
      for (let t = Math.max(lo, from); t < end; t++) if (this.values[t]! + pod(t) > limit) return true;
      return false;
    }
    const mid = (lo + hi) / 2;
    // The fuller half first: that is where a clash is likeliest.
    const left = 2 * node;
    if (tree[left]! >= tree[left + 1]!) {
      return this.#visit(left, lo, mid, from, to, limit, podMax, pod) || this.#visit(left + 1, mid, hi, from, to, limit, podMax, pod);
    }
    return this.#visit(left + 1, mid, hi, from, to, limit, podMax, pod) || this.#visit(left, lo, mid, from, to, limit, podMax, pod);
  }
}

export function limitAllocator(shapes: readonly NodeShape[], s: Scenario, w: Workload, baseline?: Baseline): Allocator {
  const n = shapes.length;
  const steps = w.steps;
  const { bursts, memoryGrowth } = s.usage;
  // One unit under the line: the cluster sums the same numbers in another order.
  const cpuLimit = shapes.map((sh) => sh.capacity.cpu - 1);
  const memoryLimit = shapes.map((sh) => sh.capacity.memory - s.node.evictionHardMemory - 1);
  const cpu: ReservedUsage[] = [];
  const memory: ReservedUsage[] = [];
  for (let i = 0; i < n; i++) {
    const c = new ReservedUsage(steps);
    const m = new ReservedUsage(steps);
    for (let t = 0; t < steps; t++) {
      c.values[t] = shapes[i]!.systemUsage.cpu + (baseline ? baseline.cpu[t * n + i]! : 0);
      m.values[t] = shapes[i]!.systemUsage.memory + (baseline ? baseline.memory[t * n + i]! : 0);
    }
    c.refresh(0, steps);
    m.refresh(0, steps);
    cpu.push(c);
    memory.push(m);
  }
  let maxCpuFactor = 0;
  let maxMemoryFactor = 0;
  for (let t = 0; t < steps; t++) {
    maxCpuFactor = Math.max(maxCpuFactor, w.cpuFactor[t]!);
    maxMemoryFactor = Math.max(maxMemoryFactor, w.memoryFactor[t]!);
  }
  const cpuCeiling = maxCpuFactor * (bursts.share > 0 ? bursts.factor : 1);
  const memoryCeiling = maxMemoryFactor * (1 + memoryGrowth.swing);

  // The candidate pod's usage, computed at a step only when a check reaches it, and kept while the same pod is checked node after node.
  const cpuAt = new Float64Array(steps);
  const memoryAt = new Float64Array(steps);
  const cpuStamp = new Int32Array(steps);
  const memoryStamp = new Int32Array(steps);
  let stamp = 0;
  let current: PodProfile | undefined;
  let currentStart = -1;
  const use = (p: PodProfile, boundAt: number) => {
    if (p === current && boundAt === currentStart) return;
    current = p;
    currentStart = boundAt;
    stamp += 1;
  };
  const podCpuAt = (t: number): number => {
    if (cpuStamp[t] !== stamp) {
      const p = current!;
      const r = p.recorded;
      cpuAt[t] = r ? recordedAt(r.cpu, r, t) * w.cpuFactor[t]! : withinLimits(podCpu(w, p.cpuBase, p.key, p.memoryPhase, t, bursts.factor, bursts.share), p.requestCpu, p.tier?.qos === 'Guaranteed');
      cpuStamp[t] = stamp;
    }
    return cpuAt[t]!;
  };
  const podMemoryAt = (t: number): number => {
    if (memoryStamp[t] !== stamp) {
      const p = current!;
      const r = p.recorded;
      memoryAt[t] = r ? recordedAt(r.memory, r, t) * w.memoryFactor[t]! : withinLimits(podMemory(w, p.memoryBase, p.memoryPhase, t, t - currentStart, memoryGrowth.swing), p.requestMemory, p.tier?.qos === 'Guaranteed');
      memoryStamp[t] = stamp;
    }
    return memoryAt[t]!;
  };
  /** The steps a pod bound at t uses anything: after it has started, until its job ends (the cluster's own rule). */
  const stay = (p: PodProfile, t: number): [number, number] => {
    if (p.recorded) return [t + 1, Math.min(steps, p.recorded.endStep)];
    return [t + w.startSteps + 1, p.runSteps > 0 ? Math.min(steps, t + p.runSteps) : steps];
  };

  const change = (node: number, pod: PodRef, from: number, sign: 1 | -1) => {
    const p = pod.profile;
    use(p, pod.boundAt);
    const [start, end] = stay(p, pod.boundAt);
    const lo = Math.max(from, start);
    const c = cpu[node]!;
    const m = memory[node]!;
    for (let t = lo; t < end; t++) {
      c.values[t] = c.values[t]! + sign * podCpuAt(t);
      m.values[t] = m.values[t]! + sign * podMemoryAt(t);
    }
    c.refresh(lo, end);
    m.refresh(lo, end);
  };

  const placement: Placement = {
    fits(node, p, t) {
      use(p, t);
      const [start, end] = stay(p, t);
      return (
        !memory[node]!.exceeds(start, end, memoryLimit[node]!, p.recorded ? p.peakMemory * maxMemoryFactor : p.memoryBase * memoryCeiling, podMemoryAt) &&
        !cpu[node]!.exceeds(start, end, cpuLimit[node]!, p.recorded ? p.peakCpu * maxCpuFactor : p.cpuBase * cpuCeiling, podCpuAt)
      );
    },
    bound: (node, pod) => change(node, pod, 0, 1),
    removed: (node, pod, t) => change(node, pod, t, -1),
  };
  return {
    name: 'limit',
    kind: 'limit',
    placement,
    // What it would write for the kubelet to admit what it placed: never below bound requests.
    allocate(node, sample, out) {
      out.cpu = Math.max(shapes[node]!.raw.cpu, sample.boundCpu);
      out.memory = Math.max(shapes[node]!.raw.memory, sample.boundMemory);
    },
  };
}
