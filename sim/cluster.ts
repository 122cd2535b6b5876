// One policy's run over the workload: Deployments scale and jobs arrive (or,
// under saturating demand, pods keep coming until nothing more fits), the
// scheduler places pending pods where requests fit in allocatable, every
// node's usage is its pods' usage plus the system's, oversell relieves a node
// past its relief line, the kernel and the kubelet act when memory runs out,
// and after each sample the policy sets allocatable.
import type { Allocator, NodeSample, NodeShape, PodRef } from './allocators.js';
import { CPU_OVER_CAPACITY_CONTENTION } from '../gateway/decide/pool-harm.js';
import { kubeletEvictionOrder, kubeletMayEvict, oomKillOrder, takeUntil } from './kubelet-eviction.js';
import { GUARANTEED, NodeSlots, QOS_CODES } from './node-slots.js';
import { NodeRelief, type ReliefSubject } from './relief.js';
import { protectedRoom } from '../gateway/decide/protected-room.js';
import type { Tier } from '../gateway/decide/tiers.js';
import type { Baseline } from './trace.js';
import { noise } from './random.js';
import { podCpu, podMemory, recordedAt, withinLimits, type PodProfile, type Workload } from './workload.js';
import type { Quantities, Scenario } from './scenario.js';

export const UTILISATION_BUCKETS = 12;
const PROTECTED: Tier = { tier: 'protected', because: 'its class is protected' }; // 0-10 %, ..., 100-110 %, 110 % and over

export interface RunMetrics {
  name: string;
  kind: Allocator['kind'];
  /** Mean over the run of running pods. */
  podsPlaced: number;
  podsPending: number;
  /** The most pods waiting after any step's scheduling pass. */
  peakPending: number;
  /** 1 - usage / requests of running pods, over the run. */
  cpuSlack: number;
  memorySlack: number;
  /** Pods the kernel OOM-killed or the kubelet evicted, any tier. */
  podsHitByMemoryOverload: number;
  /** Of those, the kernel's. */
  podsOomKilled: number;
  /** Protected pods (sim/kubelet-eviction.ts classTier) evicted or OOM-killed, by anyone (relief included, which never takes one). */
  protectedPodsHit: number;
  /** Pods oversell evicted through the Eviction API (relief, sim/relief.ts); 0 for every other policy. */
  podsRelieved: number;
  /** Of those, protected pods: 0 unless relief broke its rule (counted so a test can see it). */
  protectedPodsRelieved: number;
  /** Node-seconds in which relief evicted: counted as risk. */
  reliefNodeSeconds: number;
  /** Node-seconds held at the floor after crossing the relief line, until calm. */
  heldNodeSeconds: number;
  /** Node-seconds with memory demand past capacity minus the eviction threshold, after relief: the kernel or the kubelet acted. */
  memoryOverloadNodeSeconds: number;
  cpuOverCapacityNodeSeconds: number;
  /** cpuOverCapacityNodeSeconds over all node-seconds of the run. */
  cpuOverCapacityShare: number;
  overTargetNodeSeconds: number;
  belowRequestsNodeSeconds: number;
  /** Node-seconds with any of: CPU over capacity, memory overloaded, allocatable below bound requests, a relief eviction. */
  riskNodeSeconds: number;
  allocatableChangesPerNodeHour: number;
  /** Per resource, bound and direction, allocatable changes per node-hour (OversellPolicies only: the decision says its bound). */
  changesByBound?: Record<string, number>;
  /** Running and pending pods, every `seriesEverySteps`. */
  series: { placed: number[]; pending: number[] };
  /** Node-steps by usage / capacity, in 10 % buckets. */
  utilisation: { cpu: number[]; memory: number[] };
  /**
   * A replay with recorded load: what the recording did that no policy chose,
   * and that is therefore not charged to one. Node-steps where a rise of the
   * recorded requests did not fit the node's allocatable (the rise waits until
   * it fits), and node-seconds where the recorded load alone was over capacity.
   */
  recorded?: { requestRisesNotFitting: number; overCapacityNodeSeconds: number };
}

/**
 * Where pods come from. `scenario`: the Deployments' daily curve and the jobs'
 * arrivals. `saturating`: pending pods never run out: after each scheduling pass
 * pods of the scenario's classes keep coming, in the scenario's mix, until one of
 * each class has found no node; a Deployment's pod then stays to the end of the
 * run and a job runs its drawn time.
 */
export type Demand = 'scenario' | 'saturating';

export interface RunOptions {
  scenario: Scenario;
  workload: Workload;
  allocator: Allocator;
  /** Each node's raw allocatable, capacity and system usage. */
  shapes: readonly NodeShape[];
  /** Usage above these shares of raw allocatable counts as over target. */
  targets: Quantities;
  seriesEverySteps: number;
  /** Recorded load that stays on its node (a replayed trace): usage and bound requests on top of the simulated pods'. */
  baseline?: Baseline | undefined;
  demand?: Demand | undefined;
  /** End the run at the first step a pod is left waiting (a nodes-needed probe: it only asks whether any does). */
  stopWhenPending?: boolean | undefined;
  onProgress?: ((doneSteps: number) => void) | undefined;
}

const PENDING = 0;
const RUNNING = 1;
const GONE = 2;

class Pod implements PodRef {
  node = -1;
  state = PENDING;
  /** Its slot in NodeSlots while running. */
  slot = -1;
  boundAt = -1;
  constructor(
    readonly id: number,
    readonly profile: PodProfile,
  ) {}
}

/** How much of the saturating mix each class is: its pods per node at the scenario's average (replicas, or arrivals x run time). */
export function classWeights(s: Scenario): number[] {
  return s.classes.map((c) => (c.kind === 'deployment' ? (c.replicasPerNode.min + c.replicasPerNode.max) / 2 : (c.arrivalsPerNodeHour * c.durationMinutes) / 60));
}

export function runPolicy(o: RunOptions): RunMetrics {
  const { scenario: s, workload: w, allocator, shapes } = o;
  // The node count is the shapes': nodes-needed runs the same workload on fewer or more nodes.
  const n = shapes.length;
  const stepSeconds = s.tickSeconds;
  const saturating = o.demand === 'saturating';
  const placement = allocator.placement;
  const observer = allocator.observer;
  const bursts = s.usage.bursts;
  const growthSwing = s.usage.memoryGrowth.swing;

  const allocCpu = new Float64Array(n);
  const allocMemory = new Float64Array(n);
  const boundCpu = new Float64Array(n);
  const boundMemory = new Float64Array(n);
  /** Requests of each node's protected pods: with protectsRoom, a protected pod binds only where they fit raw allocatable. */
  const protectedCpu = new Float64Array(n);
  const protectedMemory = new Float64Array(n);
  const protectsRoom = allocator.protectsRoom === true;
  /** Step of each node's newest binding. */
  const boundAt = new Float64Array(n).fill(-Infinity);
  const slots = new NodeSlots<Pod>(n, s.node.maxPods);
  // Before the first sample every node has what the kubelet computed.
  shapes.forEach((sh, i) => {
    allocCpu[i] = sh.raw.cpu;
    allocMemory[i] = sh.raw.memory;
  });

  const classes = s.classes;
  const alive: Pod[][] = classes.map(() => []);
  const ordinal = new Int32Array(classes.length);
  /** Pods of each Deployment not gone: what the ReplicaSet counts. */
  const aliveCount = new Int32Array(classes.length);
  /** Pods of each class not gone, running or pending: what the saturating mix balances. */
  const liveCount = new Int32Array(classes.length);
  const weights = classWeights(s);
  let pending: Pod[] = [];
  let running = 0;
  let nextId = 0;

  const fresh = () => ({
    placedSum: 0, pendingSum: 0, peakPending: 0, usageCpu: 0, requestCpu: 0, usageMemory: 0, requestMemory: 0,
    hits: 0, oomKilled: 0, protectedHits: 0, relieved: 0, protectedRelieved: 0, reliefSeconds: 0, held: 0, memoryOverload: 0, cpuOver: 0, overTarget: 0, below: 0, risk: 0, changes: 0, risesNotFitting: 0, recordedOver: 0,
  });
  let m = fresh();
  const series = { placed: [] as number[], pending: [] as number[] };
  const utilisation = { cpu: new Array<number>(UTILISATION_BUCKETS).fill(0), memory: new Array<number>(UTILISATION_BUCKETS).fill(0) };
  // The warm-up day runs like any other, and then what it measured is dropped.
  const warm = w.warmupSteps;
  const bucket = (share: number) => Math.min(UTILISATION_BUCKETS - 1, Math.max(0, Math.floor(share * 10)));

  const create = (classIndex: number, runSteps: number): Pod => {
    const k = ordinal[classIndex]!;
    ordinal[classIndex] = k + 1;
    const pod = new Pod(nextId++, w.profile(classIndex, k, runSteps));
    liveCount[classIndex] = liveCount[classIndex]! + 1;
    if (classes[classIndex]!.kind === 'deployment') {
      alive[classIndex]!.push(pod);
      aliveCount[classIndex] = aliveCount[classIndex]! + 1;
    }
    return pod;
  };

  const bind = (pod: Pod, node: number, t: number) => {
    const p = pod.profile;
    pod.node = node;
    pod.state = RUNNING;
    pod.slot = slots.add(node, pod, p, t);
    pod.boundAt = t;
    boundAt[node] = t;
    boundCpu[node]! += p.requestCpu;
    boundMemory[node]! += p.requestMemory;
    if (p.tier?.protected) {
      protectedCpu[node]! += p.requestCpu;
      protectedMemory[node]! += p.requestMemory;
    }
    running += 1;
    placement?.bound(node, pod, t);
    observer?.bound(node, pod);
  };

  /** The pod is gone at step t: deleted, finished or evicted. */
  const remove = (pod: Pod, t: number) => {
    const c = pod.profile.classIndex;
    if (pod.state !== GONE && !pod.profile.recorded) {
      liveCount[c] = liveCount[c]! - 1;
      if (pod.profile.runSteps === 0) aliveCount[c] = aliveCount[c]! - 1;
    }
    if (pod.state === RUNNING) {
      const moved = slots.remove(pod.node, pod.slot);
      if (moved) moved.slot = pod.slot;
      const p = pod.profile;
      boundCpu[pod.node]! -= p.requestCpu;
      boundMemory[pod.node]! -= p.requestMemory;
      if (p.tier?.protected) {
        protectedCpu[pod.node]! -= p.requestCpu;
        protectedMemory[pod.node]! -= p.requestMemory;
      }
      running -= 1;
      placement?.removed(pod.node, pod, t);
      observer?.removed(pod.node, pod);
    }
    pod.state = GONE;
  };

  /** A ReplicaSet scaling down deletes unscheduled pods first, then the newest. */
  const scaleDown = (list: Pod[], count: number, t: number) => {
    for (const state of [PENDING, RUNNING]) {
      for (let i = list.length - 1; i >= 0 && count > 0; i--) {
        if (list[i]!.state !== state) continue;
        remove(list[i]!, t);
        count -= 1;
      }
    }
  };

  /** An evicted or OOM-killed pod: a Deployment's replacement comes with the next scaling pass (or the saturating mix); a job starts over; a recorded pod waits to run again until its recorded end. */
  const requeue = (pod: Pod, t: number) => {
    remove(pod, t);
    const rec = pod.profile.recorded;
    if (rec) {
      if (t + 1 < rec.endStep) pending.push(new Pod(nextId++, pod.profile));
    } else if (pod.profile.runSteps > 0) {
      pending.push(new Pod(nextId++, pod.profile));
      liveCount[pod.profile.classIndex] = liveCount[pod.profile.classIndex]! + 1;
    }
  };
  const relief = allocator.relief && new NodeRelief(n, allocator.relief.policy, allocator.relief.calmPeriodMs, w.stepMs);
  /** The kubelet's eviction manager evicts at most one pod per housekeeping interval (10 s). */
  const kubeletPerStep = Math.max(1, Math.round(stepSeconds / 10));
  /** The node's running pods as the kubelet, the kernel and relief see them (only built when memory is short). */
  const candidates = (node: number): (ReliefSubject & { pod: Pod })[] => {
    const first = node * slots.maxPods;
    return Array.from({ length: slots.count[node]! }, (_, k) => {
      const j = first + k;
      const pod = slots.owner[j]!;
      return {
        pod, order: k, usage: slots.usageMemory[j]!, request: slots.requestMemory[j]!, priority: slots.priority[j]!, qos: QOS_CODES[slots.qos[j]!]!,
        protected: slots.protect[j] === 1, boundAt: pod.boundAt,
      };
    });
  };

  const sample: NodeSample = {
    tMs: 0, cpu: 0, memory: 0, boundCpu: 0, boundMemory: 0, newestPodAgeMs: Infinity, cpuPressure: 0, memoryPressure: 0, serviceCpu: 0, serviceMemory: 0,
  };
  const out: Quantities = { cpu: 0, memory: 0 };
  const failed = new Int32Array(classes.length).fill(-1);
  const toFind = feasibleNodesToFind(n);
  let nextStart = 0;
  let nextJob = 0;

  const base = o.baseline;
  /** The recorded requests counted on each node so far: a rise is counted once it fits. */
  const recordedCpu = new Float64Array(n);
  const recordedMemory = new Float64Array(n);
  const tracePods = w.trace;
  let nextArrival = 0;
  let cursor = 0;

  /**
   * The scheduler's pass for one pod: the least allocated node where it fits
   * (requests against allocatable, or the policy's own check), as the default
   * scheduler's fit check and LeastAllocated score do. A policy with its own
   * check is scored on bound requests against raw allocatable, so it spreads
   * pods as the others do.
   */
  const roomFor = (i: number, p: PodProfile): boolean =>
    protectedRoom({
      node: '', raw: { cpuMillicores: shapes[i]!.raw.cpu, memoryBytes: shapes[i]!.raw.memory },
      protectedBound: { cpuMillicores: protectedCpu[i]!, memoryBytes: protectedMemory[i]! },
      pod: { cpuMillicores: p.requestCpu, memoryBytes: p.requestMemory }, tier: PROTECTED,
    }).allowed;

  const place = (pod: Pod, t: number): boolean => {
    const p = pod.profile;
    let best = -1;
    let bestScore = -Infinity;
    let found = 0;
    let scanned = 0;
    for (; scanned < n && found < toFind; scanned++) {
      const i = (nextStart + scanned) % n;
      if (slots.full(i)) continue; // the kubelet's maxPods
      // The binding check refuses the node; the scheduler tries the next (its retries are not modelled: the pod lands at once where it fits).
      if (protectsRoom && p.tier?.protected && !roomFor(i, p)) continue;
      let score: number;
      if (placement) {
        if (!placement.fits(i, p, t)) continue;
        const raw = shapes[i]!.raw;
        score = (raw.cpu - boundCpu[i]! - p.requestCpu) / Math.max(1, raw.cpu) + (raw.memory - boundMemory[i]! - p.requestMemory) / Math.max(1, raw.memory);
      } else {
        const freeCpu = allocCpu[i]! - boundCpu[i]! - p.requestCpu;
        const freeMemory = allocMemory[i]! - boundMemory[i]! - p.requestMemory;
        if (freeCpu < 0 || freeMemory < 0) continue;
        score = freeCpu / Math.max(1, allocCpu[i]!) + freeMemory / Math.max(1, allocMemory[i]!);
      }
      found += 1;
      if (score > bestScore) {
        bestScore = score;
        best = i;
      }
    }
    nextStart = (nextStart + scanned) % n;
    if (best < 0) {
      failed[p.classIndex] = t;
      return false;
    }
    bind(pod, best, t);
    return true;
  };

  /** Under saturating demand, how long a job runs: drawn from its class's mean, by its ordinal, the same under every policy. */
  const saturatingRunSteps = (classIndex: number): number => {
    const c = classes[classIndex]!;
    if (c.kind !== 'job') return 0;
    const u = noise(s.seed, 5000 + classIndex, ordinal[classIndex]!);
    return Math.max(1, Math.round((-Math.log(1 - u) * c.durationMinutes * 60_000) / w.stepMs));
  };

  /** Saturating demand: the class furthest below its share of the mix that has not yet failed this step, or -1. */
  const nextClass = (t: number): number => {
    let best = -1;
    let bestShare = Infinity;
    for (let c = 0; c < classes.length; c++) {
      if (!(weights[c]! > 0) || failed[c] === t) continue;
      const share = liveCount[c]! / weights[c]!;
      if (share < bestShare) {
        bestShare = share;
        best = c;
      }
    }
    return best;
  };

  /**
   * Saturating demand on a public trace: the next of the trace's pods, in its
   * seeded cycle, that is running at this step (a copy uses the original's
   * recorded usage and leaves when it does) and whose request shape has not
   * yet failed this step; or -1.
   */
  const nextCopy = (t: number): number => {
    const cycle = tracePods!.cycle;
    for (let k = 0; k < cycle.length; k++) {
      const i = cycle[cursor]!;
      cursor = (cursor + 1) % cycle.length;
      const p = tracePods!.profiles[i]!;
      if (p.recorded!.startStep <= t && t + 1 < p.recorded!.endStep && failed[p.classIndex] !== t) return i;
    }
    return -1;
  };

  let steps = 0;

  for (let t = 0; t < w.steps; t++) {
    if (t === warm && t > 0) {
      m = fresh();
      utilisation.cpu.fill(0);
      utilisation.memory.fill(0);
      allocator.changes?.clear();
    }
    steps = Math.max(1, t + 1 - warm);
    // Recorded pods come and go as the trace says: bound requests follow it, as the
    // recording starts, and then a fall at once and a rise once it fits what the node
    // allocates: a recorded pod that would not fit here is a fact of the recording.
    if (base) {
      for (let i = 0, j = t * n; i < n; i++, j++) {
        const upCpu = base.requestCpu[j]! - recordedCpu[i]!;
        const upMemory = base.requestMemory[j]! - recordedMemory[i]!;
        const fits = t === 0 || (boundCpu[i]! + Math.max(0, upCpu) <= allocCpu[i]! && boundMemory[i]! + Math.max(0, upMemory) <= allocMemory[i]!);
        if (!fits && (upCpu > 0 || upMemory > 0)) m.risesNotFitting += 1;
        const dCpu = fits || upCpu < 0 ? upCpu : 0;
        const dMemory = fits || upMemory < 0 ? upMemory : 0;
        recordedCpu[i] = recordedCpu[i]! + dCpu;
        recordedMemory[i] = recordedMemory[i]! + dMemory;
        boundCpu[i] = boundCpu[i]! + dCpu;
        boundMemory[i] = boundMemory[i]! + dMemory;
      }
    }
    // Deployments follow the daily curve; gone pods leave their class's list here.
    for (let c = 0; c < classes.length && !saturating; c++) {
      const want = w.replicas[c];
      if (!want) continue;
      let list = alive[c]!;
      // Gone pods stay in the list until they are most of it: filtering every step was a tenth of the run.
      if (list.length > 2 * aliveCount[c]! + 64) alive[c] = list = list.filter((p) => p.state !== GONE);
      const diff = want[t]! - aliveCount[c]!;
      if (diff > 0) for (let k = 0; k < diff; k++) pending.push(create(c, 0));
      else if (diff < 0) scaleDown(list, -diff, t);
    }
    while (!saturating && nextJob < w.jobs.length && w.jobs[nextJob]!.step <= t) {
      const j = w.jobs[nextJob++]!;
      pending.push(create(j.classIndex, j.runSteps));
    }
    // A public trace's pods arrive at their recorded start.
    while (tracePods && nextArrival < tracePods.arrivals.length && tracePods.profiles[tracePods.arrivals[nextArrival]!]!.recorded!.startStep <= t) {
      pending.push(new Pod(nextId++, tracePods.profiles[tracePods.arrivals[nextArrival++]!]!));
    }
    const observing = observer !== undefined && t % observer.everySteps === 0;

    for (let i = 0; i < n; i++) {
      const shape = shapes[i]!;
      const memoryLimit = shape.capacity.memory - s.node.evictionHardMemory;
      let cpu = shape.systemUsage.cpu;
      let memory = shape.systemUsage.memory;
      let reqCpu = 0;
      let reqMemory = 0;
      let serviceCpu = 0;
      let serviceMemory = 0;
      let recordedOverCpu = false;
      let recordedOverMemory = false;
      if (base) {
        const j = t * n + i;
        cpu += base.cpu[j]!;
        memory += base.memory[j]!;
        reqCpu += recordedCpu[i]!;
        reqMemory += recordedMemory[i]!;
        recordedOverCpu = cpu > shape.capacity.cpu;
        recordedOverMemory = memory > memoryLimit;
        if (recordedOverCpu || recordedOverMemory) m.recordedOver += stepSeconds;
      }
      const first = i * slots.maxPods;
      // Backwards: a finished job's slot takes the last pod, which was already counted.
      for (let j = first + slots.count[i]! - 1; j >= first; j--) {
        const age = t - slots.start[j]!;
        const runSteps = slots.runSteps[j]!;
        const rec = slots.recorded[j];
        if (rec !== undefined ? t >= rec.endStep : runSteps > 0 && age >= runSteps) {
          remove(slots.owner[j]!, t); // the job is done, or the recorded pod ended
          continue;
        }
        reqCpu += slots.requestCpu[j]!;
        reqMemory += slots.requestMemory[j]!;
        // Still starting: bound (its requests count), using nothing yet. A recorded pod's usage includes its start.
        if (rec === undefined && age <= w.startSteps) {
          slots.usageMemory[j] = 0;
          continue;
        }
        const phase = slots.memoryPhase[j]!;
        const guaranteed = slots.qos[j] === GUARANTEED;
        const usedMemory = rec ? recordedAt(rec.memory, rec, t) * w.memoryFactor[t]! : withinLimits(podMemory(w, slots.memoryBase[j]!, phase, t, age, growthSwing), slots.requestMemory[j]!, guaranteed);
        slots.usageMemory[j] = usedMemory;
        const usedCpu = rec ? recordedAt(rec.cpu, rec, t) * w.cpuFactor[t]! : withinLimits(podCpu(w, slots.cpuBase[j]!, slots.key[j]!, phase, t, bursts.factor, bursts.share), slots.requestCpu[j]!, guaranteed);
        cpu += usedCpu;
        memory += usedMemory;
        if (runSteps === 0) {
          serviceCpu += usedCpu;
          serviceMemory += usedMemory;
        }
        if (observing) observer.pod(i, slots.owner[j]!, usedCpu, usedMemory, t);
      }
      m.usageCpu += cpu - shape.systemUsage.cpu;
      m.usageMemory += memory - shape.systemUsage.memory;
      m.requestCpu += reqCpu;
      m.requestMemory += reqMemory;
      utilisation.cpu[bucket(cpu / shape.capacity.cpu)]! += 1;
      utilisation.memory[bucket(memory / shape.capacity.memory)]! += 1;
      // Recorded load alone over the line is the recording's, not the policy's doing.
      if (cpu > shape.capacity.cpu && !recordedOverCpu) m.cpuOver += stepSeconds;
      if (cpu > o.targets.cpu * shape.raw.cpu || memory > o.targets.memory * shape.raw.memory) m.overTarget += stepSeconds;

      // What the agent reports, as it was before the kubelet acts: usage, CPU
      // contention as agent/sample/cpu-contention.ts measures it (the share of
      // CPUs with a task waiting: demand past capacity over capacity), memory PSI.
      sample.tMs = t * w.stepMs;
      sample.cpu = cpu;
      sample.memory = memory;
      sample.cpuPressure = cpu > shape.capacity.cpu ? Math.min(100, (100 * (cpu - shape.capacity.cpu)) / shape.capacity.cpu) : 0;
      sample.memoryPressure = memory > memoryLimit ? 50 : 0;

      // Who pays, in the order they act: the kernel at once when demand passes
      // capacity; oversell's relief on the sample past its line; the kubelet at
      // its next housekeeping when the working set is past its threshold.
      const capacityMemory = shape.capacity.memory;
      let overloaded = false;
      const hit = (victims: readonly { pod: Pod; protected: boolean }[], oom: boolean) => {
        if (victims.length > 0 && !recordedOverMemory) o.allocator.memoryHarm?.(victims.length, sample.tMs);
        for (const v of victims) {
          if (!recordedOverMemory) {
            m.hits += 1;
            if (oom) m.oomKilled += 1;
            if (v.protected) m.protectedHits += 1;
          }
          requeue(v.pod, t);
        }
      };
      if (memory > capacityMemory) {
        overloaded = true;
        const killed = takeUntil(candidates(i).sort(oomKillOrder(capacityMemory)), memory, capacityMemory);
        memory = killed.memory;
        hit(killed.victims, true);
      }
      let relievedHere = false;
      if (relief?.over(memory, capacityMemory)) {
        for (const v of relief.plan(i, t, memory, capacityMemory, candidates(i))) {
          relievedHere = true;
          m.relieved += 1;
          if (v.protected) {
            m.protectedRelieved += 1;
            m.protectedHits += 1;
          }
          memory -= v.usage;
          requeue(v.pod, t);
        }
      }
      if (memory > memoryLimit) {
        overloaded = true;
        const evicted = takeUntil(candidates(i).filter(kubeletMayEvict).sort(kubeletEvictionOrder), memory, memoryLimit, kubeletPerStep);
        memory = evicted.memory;
        hit(evicted.victims, false);
      }
      if (overloaded && !recordedOverMemory) m.memoryOverload += stepSeconds;
      if (relievedHere) m.reliefSeconds += stepSeconds;
      const held = relief ? relief.holds(i, t, memory, capacityMemory) : false;
      if (held) m.held += stepSeconds;

      sample.boundCpu = boundCpu[i]!;
      sample.boundMemory = boundMemory[i]!;
      sample.newestPodAgeMs = (t - boundAt[i]!) * w.stepMs;
      // As the gateway's CPU harm meter weighs it: the contention line past CPU_OVER_CAPACITY_CONTENTION is time over capacity.
      allocator.cpuObserved?.(sample.tMs, stepSeconds, sample.cpuPressure >= CPU_OVER_CAPACITY_CONTENTION && !recordedOverCpu ? stepSeconds : 0);
      sample.serviceCpu = serviceCpu;
      sample.serviceMemory = serviceMemory;
      allocator.allocate(i, sample, out);
      // Held after relief: no inflation past the floor (raw, or what is bound), so nothing more lands on the node until it is calm.
      if (held) {
        out.cpu = Math.min(out.cpu, Math.max(shape.raw.cpu, boundCpu[i]!));
        out.memory = Math.min(out.memory, Math.max(shape.raw.memory, boundMemory[i]!));
      }
      if (t > 0 && (out.cpu !== allocCpu[i] || out.memory !== allocMemory[i])) m.changes += 1;
      allocCpu[i] = out.cpu;
      allocMemory[i] = out.memory;
      // Recorded requests beyond raw allocatable are the recording's: the policy answers for its own pods on top of the rest.
      const below = placement?.belowRequests
        ? placement.belowRequests(i)
        : out.cpu < boundCpu[i]! - Math.max(0, recordedCpu[i]! - shape.raw.cpu) || out.memory < boundMemory[i]! - Math.max(0, recordedMemory[i]! - shape.raw.memory);
      if (below) m.below += stepSeconds;
      if (below || sample.cpuPressure > 0 || sample.memoryPressure > 0 || relievedHere) m.risk += stepSeconds;
    }

    // The scheduler: FIFO, each pod to the least allocated node it fits; once a class
    // does not fit anywhere this step, its other pods (same requests) are not tried.
    const still: Pod[] = [];
    for (const pod of pending) {
      if (pod.state === GONE) continue;
      // A recorded pod still waiting when its recorded end comes never runs.
      if (pod.profile.recorded && t + 1 >= pod.profile.recorded.endStep) {
        remove(pod, t);
        continue;
      }
      if (failed[pod.profile.classIndex] === t || !place(pod, t)) still.push(pod);
    }
    // Saturating demand: more pods, in the scenario's mix, until each class has one that found no node.
    if (saturating && tracePods) {
      for (let k = nextCopy(t); k >= 0; k = nextCopy(t)) {
        const pod = new Pod(nextId++, tracePods.profiles[k]!);
        if (!place(pod, t)) still.push(pod);
      }
    }
    for (let c = saturating && !tracePods ? nextClass(t) : -1; c >= 0; c = nextClass(t)) {
      const pod = create(c, saturatingRunSteps(c));
      if (!place(pod, t)) still.push(pod);
    }
    pending = still;

    m.placedSum += running;
    m.pendingSum += pending.length;
    m.peakPending = Math.max(m.peakPending, pending.length);
    if (t >= warm && (t - warm) % o.seriesEverySteps === 0) {
      series.placed.push(running);
      series.pending.push(pending.length);
    }
    o.onProgress?.(t);
    if (o.stopWhenPending && pending.length > 0 && t >= warm) break; // the day measured, not the day before
  }

  return {
    name: allocator.name,
    kind: allocator.kind,
    podsPlaced: m.placedSum / steps,
    podsPending: m.pendingSum / steps,
    peakPending: m.peakPending,
    cpuSlack: m.requestCpu > 0 ? 1 - m.usageCpu / m.requestCpu : 0,
    memorySlack: m.requestMemory > 0 ? 1 - m.usageMemory / m.requestMemory : 0,
    podsHitByMemoryOverload: m.hits,
    podsOomKilled: m.oomKilled,
    protectedPodsHit: m.protectedHits,
    podsRelieved: m.relieved,
    protectedPodsRelieved: m.protectedRelieved,
    reliefNodeSeconds: m.reliefSeconds,
    heldNodeSeconds: m.held,
    memoryOverloadNodeSeconds: m.memoryOverload,
    cpuOverCapacityNodeSeconds: m.cpuOver,
    cpuOverCapacityShare: m.cpuOver / (n * steps * stepSeconds),
    overTargetNodeSeconds: m.overTarget,
    belowRequestsNodeSeconds: m.below,
    riskNodeSeconds: m.risk,
    allocatableChangesPerNodeHour: m.changes / n / ((steps * stepSeconds) / 3600),
    ...(allocator.changes && {
      changesByBound: Object.fromEntries(
        [...allocator.changes.entries()].sort((a, b) => b[1] - a[1] || (a[0] < b[0] ? -1 : 1)).map(([k, v]) => [k, Math.round((1000 * v) / n / ((steps * stepSeconds) / 3600)) / 1000]),
      ),
    }),
    series,
    utilisation,
    ...(base && { recorded: { requestRisesNotFitting: m.risesNotFitting, overCapacityNodeSeconds: m.recordedOver } }),
  };
}

/**
 * How many feasible nodes the scheduler scores before it picks one
 * (kube-scheduler's numFeasibleNodesToFind with the adaptive
 * percentageOfNodesToScore): every node up to 100, then 50 % less 1 % per
 * 125 nodes, at least 5 % and 100 nodes. The search resumes where the last one
 * stopped. Without it, placing a pod cost a scan of the whole cluster.
 */
export function feasibleNodesToFind(nodes: number): number {
  if (nodes < 100) return nodes;
  const percent = Math.max(5, 50 - Math.floor(nodes / 125));
  return Math.max(100, Math.floor((nodes * percent) / 100));
}
