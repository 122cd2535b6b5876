// Three published formulas, as their projects and paper state them
// (docs/simulate.md cites each): Koordinator's batch resources, Crane's
// elastic resources, and the peak predictor of Bashir et al. (EuroSys 2021).
//
// Koordinator and Crane do not raise allocatable: they publish a second pool
// (kubernetes.io/batch-cpu, gocrane.io/cpu) that only pods asking for it draw
// on, while ordinary pods still fit against raw allocatable. In the simulator
// a Deployment's pods are the high-priority (Koordinator's Prod, Crane's
// ordinary) pods and jobs are the batch (BE, elastic) pods: jobs are the
// workload that tolerates being slowed or evicted.
import type { Allocator, NodeShape, Placement, PodObserver, PodRef } from './allocators.js';
import type { Quantities, Scenario } from './scenario.js';
import type { PodProfile } from './workload.js';

const isBatch = (p: PodProfile) => p.runSteps > 0;

/** Bound requests per node, high-priority and batch apart: a pod's fit is checked against its own pool. */
class Pools {
  readonly hpCpu: Float64Array;
  readonly hpMemory: Float64Array;
  readonly batchCpu: Float64Array;
  readonly batchMemory: Float64Array;
  /** The batch pool as last published. */
  readonly poolCpu: Float64Array;
  readonly poolMemory: Float64Array;

  constructor(readonly shapes: readonly NodeShape[]) {
    const n = shapes.length;
    this.hpCpu = new Float64Array(n);
    this.hpMemory = new Float64Array(n);
    this.batchCpu = new Float64Array(n);
    this.batchMemory = new Float64Array(n);
    this.poolCpu = new Float64Array(n);
    this.poolMemory = new Float64Array(n);
  }

  placement(): Placement {
    const add = (node: number, p: PodProfile, sign: 1 | -1) => {
      if (isBatch(p)) {
        this.batchCpu[node]! += sign * p.requestCpu;
        this.batchMemory[node]! += sign * p.requestMemory;
      } else {
        this.hpCpu[node]! += sign * p.requestCpu;
        this.hpMemory[node]! += sign * p.requestMemory;
      }
    };
    return {
      fits: (node, p) => {
        if (isBatch(p)) return this.batchCpu[node]! + p.requestCpu <= this.poolCpu[node]! && this.batchMemory[node]! + p.requestMemory <= this.poolMemory[node]!;
        const raw = this.shapes[node]!.raw;
        return this.hpCpu[node]! + p.requestCpu <= raw.cpu && this.hpMemory[node]! + p.requestMemory <= raw.memory;
      },
      bound: (node, pod: PodRef) => add(node, pod.profile, 1),
      removed: (node, pod: PodRef) => add(node, pod.profile, -1),
      belowRequests: (node) => this.batchCpu[node]! > this.poolCpu[node]! || this.batchMemory[node]! > this.poolMemory[node]!,
    };
  }

  /** Publishes a new pool unless it changed by `skip` (a share) or less and `maxAgeSteps` have not passed since the last write. */
  publish(node: number, cpu: number, memory: number, skip: number, fresh: boolean): boolean {
    const c = Math.max(0, Math.floor(cpu));
    const m = Math.max(0, Math.floor(memory));
    const moved = (before: number, after: number) => Math.abs(after - before) > skip * before;
    if (!fresh && !moved(this.poolCpu[node]!, c) && !moved(this.poolMemory[node]!, m)) return false;
    this.poolCpu[node] = c;
    this.poolMemory[node] = m;
    return true;
  }
}

/** What either pool-publishing anchor reports as allocatable: raw for the ordinary pods plus the batch pool. */
function pooled(shapes: readonly NodeShape[], pools: Pools, out: Quantities, node: number): void {
  out.cpu = shapes[node]!.raw.cpu + pools.poolCpu[node]!;
  out.memory = shapes[node]!.raw.memory + pools.poolMemory[node]!;
}

/**
 * Koordinator's batch resources: capacity x reclaim threshold - max(system usage,
 * reserved) - usage of high-priority pods, from a NodeMetric reported every 60 s,
 * written when it moved more than 10 % or 300 s after the last write.
 */
export function koordinatorAllocator(shapes: readonly NodeShape[], k: Scenario['policies']['koordinator'], reserved: Quantities, stepSeconds: number): Allocator {
  const pools = new Pools(shapes);
  const metricEvery = Math.max(1, Math.round(60 / stepSeconds));
  const writeEvery = Math.max(1, Math.round(300 / stepSeconds));
  const lastWrite = new Float64Array(shapes.length).fill(-Infinity);
  const step = new Float64Array(shapes.length);
  return {
    name: 'koordinator',
    kind: 'koordinator',
    placement: pools.placement(),
    allocate(node, s, out) {
      const t = step[node]!;
      step[node] = t + 1;
      if (t % metricEvery === 0) {
        const sh = shapes[node]!;
        const cpu = sh.capacity.cpu * k.cpuThreshold - Math.max(sh.systemUsage.cpu, reserved.cpu) - s.serviceCpu;
        const memory = sh.capacity.memory * k.memoryThreshold - Math.max(sh.systemUsage.memory, reserved.memory) - s.serviceMemory;
        if (pools.publish(node, cpu, memory, 0.1, t - lastWrite[node]! >= writeEvery)) lastWrite[node] = t;
      }
      pooled(shapes, pools, out, node);
    },
  };
}

/** The p-quantile (nearest rank) of the first `count` values; `scratch` holds at least `count` values. */
export function percentile(values: Float64Array, count: number, p: number, scratch: Float64Array): number {
  if (count === 0) return 0;
  const rank = Math.min(count, Math.max(1, Math.ceil(p * count)));
  const fromTop = count - rank + 1;
  // High percentiles of short windows are among the few largest values: keep those (a sort per pod per minute was most of a run).
  if (fromTop <= 8) {
    let kept = 0;
    for (let i = 0; i < count; i++) {
      const v = values[i]!;
      if (kept === fromTop && v <= scratch[kept - 1]!) continue;
      let j = kept < fromTop ? kept++ : kept - 1;
      while (j > 0 && scratch[j - 1]! < v) {
        scratch[j] = scratch[j - 1]!;
        j--;
      }
      scratch[j] = v;
    }
    return scratch[fromTop - 1]!;
  }
  const sorted = scratch.subarray(0, count);
  sorted.set(values.subarray(0, count));
  sorted.sort();
  return sorted[rank - 1]!;
}

/** A fixed number of the newest values. */
class Ring {
  readonly values: Float64Array;
  count = 0;
  #next = 0;
  constructor(size: number) {
    this.values = new Float64Array(size);
  }
  /** Adds v; returns the value it pushed out, or undefined. */
  push(v: number): number | undefined {
    const out = this.count === this.values.length ? this.values[this.#next] : undefined;
    this.values[this.#next] = v;
    this.#next = (this.#next + 1) % this.values.length;
    if (this.count < this.values.length) this.count += 1;
    return out;
  }
}

/**
 * Crane's elastic resources: allocatable x (1 - reserve) - max(usage that cannot be
 * reclaimed, forecast), refreshed every 20 s, changes of 10 % or less skipped.
 * Crane forecasts the next hour from 3 days of history; here the forecast is the
 * given percentile of the last hour, sampled once a minute: a stand-in.
 */
export function craneAllocator(shapes: readonly NodeShape[], c: Scenario['policies']['crane'], stepSeconds: number): Allocator {
  const pools = new Pools(shapes);
  const refreshEvery = Math.max(1, Math.round(20 / stepSeconds));
  const sampleEvery = Math.max(1, Math.round(60 / stepSeconds));
  const cpuHistory = shapes.map(() => new Ring(c.forecastWindowMinutes));
  const memoryHistory = shapes.map(() => new Ring(c.forecastWindowMinutes));
  const forecastCpu = new Float64Array(shapes.length);
  const forecastMemory = new Float64Array(shapes.length);
  const scratch = new Float64Array(c.forecastWindowMinutes);
  const step = new Float64Array(shapes.length);
  return {
    name: 'crane',
    kind: 'crane',
    placement: pools.placement(),
    allocate(node, s, out) {
      const t = step[node]!;
      step[node] = t + 1;
      const sh = shapes[node]!;
      // What cannot be reclaimed: the node's usage but the elastic pods' own (crane-agent's nodeCpuCannotBeReclaimed).
      const cpu = s.serviceCpu + sh.systemUsage.cpu;
      const memory = s.serviceMemory + sh.systemUsage.memory;
      if (t % sampleEvery === 0) {
        cpuHistory[node]!.push(cpu);
        memoryHistory[node]!.push(memory);
        forecastCpu[node] = percentile(cpuHistory[node]!.values, cpuHistory[node]!.count, c.forecastPercentile, scratch);
        forecastMemory[node] = percentile(memoryHistory[node]!.values, memoryHistory[node]!.count, c.forecastPercentile, scratch);
      }
      if (t % refreshEvery === 0) {
        pools.publish(
          node,
          sh.raw.cpu * (1 - c.cpuReserve) - Math.max(cpu, forecastCpu[node]!),
          sh.raw.memory * (1 - c.memoryReserve) - Math.max(memory, forecastMemory[node]!),
          0.1,
          t === 0,
        );
      }
      pooled(shapes, pools, out, node);
    },
  };
}

interface PodHistory {
  node: number;
  cpu: Ring;
  memory: Ring;
  /** The pod's percentile, or its requests until its usage has been seen. */
  cpuEstimate: number;
  memoryEstimate: number;
}

/**
 * The peak predictor of Bashir et al., "Take it to the limit" (EuroSys 2021): a
 * node's predicted peak is the larger of N-sigma (mean + N x sd of the node's
 * summed usage over a trailing window) and the sum of each pod's usage
 * percentile over a trailing window (a pod counts at its requests until its
 * usage has been seen). New pods fit while their requests fit in capacity -
 * predicted peak: allocatable = bound requests + capacity - predicted peak
 * (memory: capacity minus the eviction threshold). Nothing keeps it at raw or
 * at bound requests.
 */
export function peakPredictorAllocator(shapes: readonly NodeShape[], p: Scenario['policies']['peakPredictor'], evictionHardMemory: number, stepSeconds: number): Allocator {
  const n = shapes.length;
  const sampleEvery = Math.max(1, Math.round(60 / stepSeconds));
  const windowSteps = Math.max(1, Math.round((p.windowMinutes * 60) / stepSeconds));
  const pods = new Map<number, PodHistory>();
  const podsCpu = new Float64Array(n);
  const podsMemory = new Float64Array(n);
  // Node usage over the window, with running sums around a fixed reference so the squares keep their precision.
  const nodeCpu = shapes.map(() => new Ring(windowSteps));
  const nodeMemory = shapes.map(() => new Ring(windowSteps));
  const sums = { cpu: new Float64Array(n), cpu2: new Float64Array(n), memory: new Float64Array(n), memory2: new Float64Array(n) };
  const refCpu = shapes.map((sh) => sh.capacity.cpu / 2);
  const refMemory = shapes.map((sh) => sh.capacity.memory / 2);
  const scratch = new Float64Array(p.windowMinutes);
  const setEstimate = (h: PodHistory, cpu: number, memory: number) => {
    podsCpu[h.node]! += cpu - h.cpuEstimate;
    podsMemory[h.node]! += memory - h.memoryEstimate;
    h.cpuEstimate = cpu;
    h.memoryEstimate = memory;
  };
  const observer: PodObserver = {
    everySteps: sampleEvery,
    bound(node, pod) {
      const h: PodHistory = { node, cpu: new Ring(p.windowMinutes), memory: new Ring(p.windowMinutes), cpuEstimate: 0, memoryEstimate: 0 };
      pods.set(pod.id, h);
      setEstimate(h, pod.profile.requestCpu, pod.profile.requestMemory);
    },
    removed(_node, pod) {
      const h = pods.get(pod.id);
      if (!h) return;
      setEstimate(h, 0, 0);
      pods.delete(pod.id);
    },
    pod(_node, pod, cpu, memory) {
      const h = pods.get(pod.id)!;
      h.cpu.push(cpu);
      h.memory.push(memory);
      setEstimate(h, percentile(h.cpu.values, h.cpu.count, p.percentile, scratch), percentile(h.memory.values, h.memory.count, p.percentile, scratch));
    },
  };
  const nSigma = (ring: Ring, sum: number, sum2: number, ref: number) => {
    const mean = sum / ring.count;
    return ref + mean + p.n * Math.sqrt(Math.max(0, sum2 / ring.count - mean * mean));
  };
  return {
    name: 'peak-predictor',
    kind: 'peak-predictor',
    observer,
    allocate(node, s, out) {
      const sh = shapes[node]!;
      const c = s.cpu - refCpu[node]!;
      const m = s.memory - refMemory[node]!;
      const oldC = nodeCpu[node]!.push(c);
      const oldM = nodeMemory[node]!.push(m);
      sums.cpu[node]! += c - (oldC ?? 0);
      sums.cpu2[node]! += c * c - (oldC ?? 0) ** 2;
      sums.memory[node]! += m - (oldM ?? 0);
      sums.memory2[node]! += m * m - (oldM ?? 0) ** 2;
      const peakCpu = Math.max(nSigma(nodeCpu[node]!, sums.cpu[node]!, sums.cpu2[node]!, refCpu[node]!), sh.systemUsage.cpu + podsCpu[node]!);
      const peakMemory = Math.max(nSigma(nodeMemory[node]!, sums.memory[node]!, sums.memory2[node]!, refMemory[node]!), sh.systemUsage.memory + podsMemory[node]!);
      out.cpu = Math.max(0, Math.floor(s.boundCpu + sh.capacity.cpu - peakCpu));
      out.memory = Math.max(0, Math.floor(s.boundMemory + sh.capacity.memory - evictionHardMemory - peakMemory));
    },
  };
}
