// Running pods, node by node, in fixed slots: node i owns slots
// [i * maxPods, (i + 1) * maxPods), and what the per-step loop reads of a pod
// sits in typed arrays at its slot. A node's pods are then contiguous in
// memory: with one object per pod, scattered on the heap, cache misses were
// most of a 1000-node run.
import { DEFAULT_TIER, type PodTier } from './kubelet-eviction.js';
import type { QosClass } from '../lib/pod-qos.js';
import type { RecordedUsage } from './workload.js';

/** QoS classes by their code in NodeSlots.qos. */
export const QOS_CODES: readonly QosClass[] = ['Guaranteed', 'Burstable', 'BestEffort'];
export const GUARANTEED = 0;

export interface SlotFields {
  requestCpu: number;
  requestMemory: number;
  cpuBase: number;
  memoryBase: number;
  key: number;
  memoryPhase: number;
  runSteps: number;
  /** A public trace's pod: its recorded usage, read instead of the model's. */
  recorded?: RecordedUsage | undefined;
  /** Undefined: DEFAULT_TIER. */
  tier?: PodTier | undefined;
}

export class NodeSlots<T> {
  readonly count: Int32Array;
  readonly start: Float64Array;
  readonly runSteps: Float64Array;
  readonly requestCpu: Float64Array;
  readonly requestMemory: Float64Array;
  readonly cpuBase: Float64Array;
  readonly memoryBase: Float64Array;
  readonly key: Float64Array;
  readonly memoryPhase: Float64Array;
  /** Filled in by the per-step loop, read by eviction. */
  readonly usageMemory: Float64Array;
  readonly priority: Float64Array;
  /** Index into QOS_CODES. */
  readonly qos: Uint8Array;
  /** 1: a protected pod (sim/kubelet-eviction.ts classTier). */
  readonly protect: Uint8Array;
  readonly owner: (T | undefined)[];
  readonly recorded: (RecordedUsage | undefined)[];

  constructor(
    nodes: number,
    readonly maxPods: number,
  ) {
    const size = nodes * maxPods;
    this.count = new Int32Array(nodes);
    this.start = new Float64Array(size);
    this.runSteps = new Float64Array(size);
    this.requestCpu = new Float64Array(size);
    this.requestMemory = new Float64Array(size);
    this.cpuBase = new Float64Array(size);
    this.memoryBase = new Float64Array(size);
    this.key = new Float64Array(size);
    this.memoryPhase = new Float64Array(size);
    this.usageMemory = new Float64Array(size);
    this.priority = new Float64Array(size);
    this.qos = new Uint8Array(size);
    this.protect = new Uint8Array(size);
    this.owner = new Array<T | undefined>(size).fill(undefined);
    this.recorded = new Array<RecordedUsage | undefined>(size).fill(undefined);
  }

  full(node: number): boolean {
    return this.count[node]! >= this.maxPods;
  }

  /** Puts the pod in the node's next slot and returns the slot. The caller checks full() first. */
  add(node: number, owner: T, f: SlotFields, start: number): number {
    const j = node * this.maxPods + this.count[node]!;
    this.count[node] = this.count[node]! + 1;
    this.owner[j] = owner;
    this.start[j] = start;
    this.runSteps[j] = f.runSteps;
    this.requestCpu[j] = f.requestCpu;
    this.requestMemory[j] = f.requestMemory;
    this.cpuBase[j] = f.cpuBase;
    this.memoryBase[j] = f.memoryBase;
    this.key[j] = f.key;
    this.memoryPhase[j] = f.memoryPhase;
    this.usageMemory[j] = 0;
    this.recorded[j] = f.recorded;
    const tier = f.tier ?? DEFAULT_TIER;
    this.priority[j] = tier.priority;
    this.qos[j] = QOS_CODES.indexOf(tier.qos);
    this.protect[j] = tier.protected ? 1 : 0;
    return j;
  }

  /** Empties slot j by moving the node's last pod into it; returns that pod (its slot is now j), or undefined if j was last. */
  remove(node: number, j: number): T | undefined {
    const last = node * this.maxPods + this.count[node]! - 1;
    this.count[node] = this.count[node]! - 1;
    let moved: T | undefined;
    if (j !== last) {
      moved = this.owner[last];
      this.owner[j] = moved;
      this.start[j] = this.start[last]!;
      this.runSteps[j] = this.runSteps[last]!;
      this.requestCpu[j] = this.requestCpu[last]!;
      this.requestMemory[j] = this.requestMemory[last]!;
      this.cpuBase[j] = this.cpuBase[last]!;
      this.memoryBase[j] = this.memoryBase[last]!;
      this.key[j] = this.key[last]!;
      this.memoryPhase[j] = this.memoryPhase[last]!;
      this.usageMemory[j] = this.usageMemory[last]!;
      this.recorded[j] = this.recorded[last];
      this.priority[j] = this.priority[last]!;
      this.qos[j] = this.qos[last]!;
      this.protect[j] = this.protect[last]!;
    }
    this.owner[last] = undefined;
    this.recorded[last] = undefined;
    return moved;
  }
}
