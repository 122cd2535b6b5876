// The workload every policy is run on, drawn from the seed before any policy
// runs: the daily curve, how many replicas each Deployment wants at each step,
// when jobs arrive and how long they run, and each pod's usage profile. A pod's
// profile depends only on (seed, class, ordinal), so the n-th pod of a class
// behaves the same under every policy.
import { classTier, type PodTier } from './kubelet-eviction.js';
import { noise, Rng } from './random.js';
import type { Scenario } from './scenario.js';

/** What a pod's usage at a step is computed from. */
export interface UsageSubject {
  /** requests x mean share of them used, before the daily curve, bursts and memory growth. */
  cpuBase: number;
  memoryBase: number;
  key: number;
  memoryPhase: number;
}

/** What a pod asks for and how it uses it; fixed when the pod is created. */
export interface PodProfile extends UsageSubject {
  classIndex: number;
  requestCpu: number;
  requestMemory: number;
  /** Mean usage as a share of requests, before the daily curve, bursts and memory growth. */
  cpuShare: number;
  memoryShare: number;
  /** Per-pod offsets, so pods do not burst or free memory in step. */
  key: number;
  memoryPhase: number;
  /** Steps a job runs once started; 0 for a Deployment's pod. */
  runSteps: number;
  /** A modelled peak of this pod (no policy reads it since the targets-bound oracle was dropped; the limit computes its own bound); a recorded pod's recorded peak. */
  peakCpu: number;
  peakMemory: number;
  /** A public trace's pod: its usage is the trace's (x the run's usage factors), not the model's, and it leaves at its recorded end. */
  recorded?: RecordedUsage | undefined;
  /** QoS, priority and tier; undefined: Burstable at priority 0, unprotected (a public trace's pods). */
  tier?: PodTier | undefined;
}

/** A recorded pod's usage on the run's grid, with when it arrives and leaves. */
export interface RecordedUsage {
  /** Per cell of `stepsPerCell` steps, from cell `firstCell` on: the highest usage within it (a cell never hides a peak). */
  cpu: Float64Array;
  memory: Float64Array;
  stepsPerCell: number;
  firstCell: number;
  /** The step it arrives at (is pending from), and the step it is gone at. */
  startStep: number;
  endStep: number;
}

/** The usage step's multiplier at `hour`: 1 before it, then rising linearly over rampMinutes (0: at once) to its factor. */
export function stepFactor(step: Scenario['usage']['step'], hour: number): number {
  if (!step || hour < step.atHour) return 1;
  const done = step.rampMinutes > 0 ? Math.min(1, ((hour - step.atHour) * 60) / step.rampMinutes) : 1;
  return 1 + (step.factor - 1) * done;
}

/** A recorded pod's usage at step t, before the run's usage factors. */
export function recordedAt(series: Float64Array, r: RecordedUsage, t: number): number {
  return series[Math.floor(t / r.stepsPerCell) - r.firstCell] ?? 0;
}

/** A public trace's pods, in place of the scenario's Deployments and jobs. */
export interface TracePods {
  /** One per recorded pod; its classIndex is its request shape's. */
  profiles: PodProfile[];
  /** Indices into profiles, by arrival step. */
  arrivals: Int32Array;
  /** Indices into profiles in a fixed, seeded order: what saturating demand submits copies of, cycling. */
  cycle: Int32Array;
}

export interface JobArrival {
  step: number;
  classIndex: number;
  runSteps: number;
}

export interface Workload {
  steps: number;
  stepMs: number;
  /** Per step: multipliers of every pod's usage (daily curve x scale x step). */
  cpuFactor: Float64Array;
  memoryFactor: Float64Array;
  /** Per Deployment class (index into scenario.classes), wanted replicas per step; undefined for job classes. */
  replicas: (Int32Array | undefined)[];
  /** Sorted by step. */
  jobs: JobArrival[];
  profile(classIndex: number, ordinal: number, runSteps: number): PodProfile;
  /** Steps a pod's CPU burst lasts. */
  burstSteps: number;
  memoryPeriodSteps: number;
  /** A pod bound at step t shows usage from step t + 1 + startSteps on (a recorded pod from t + 1: its recorded usage includes its start). */
  startSteps: number;
  /** A public trace's pods: then replicas and jobs are empty. */
  trace?: TracePods | undefined;
  /** The first steps are the warm-up (Scenario.warmupHours): run, not measured. steps includes them. */
  warmupSteps: number;
}

/** cos of the hour's distance from the peak: 1 at the peak, -1 twelve hours away. */
export function dailyCurve(hour: number, peakHour: number): number {
  return Math.cos((2 * Math.PI * (hour - peakHour)) / 24);
}

export function buildWorkload(s: Scenario): Workload {
  const stepMs = s.tickSeconds * 1000;
  const warmupSteps = Math.round((s.warmupHours * 3_600_000) / stepMs);
  const steps = warmupSteps + Math.max(1, Math.round((s.hours * 3_600_000) / stepMs));
  const u = s.usage;
  const cpuFactor = new Float64Array(steps);
  const memoryFactor = new Float64Array(steps);
  const curve = new Float64Array(steps);
  // Bursts add share x (factor - 1) to the mean; dividing it out keeps the mean slack at what the scenario says.
  const burstMean = 1 + u.bursts.share * (u.bursts.factor - 1);
  let maxScale = 0;
  for (let t = 0; t < steps; t++) {
    // The warm-up is the day before: hours before 0.
    const hour = ((t - warmupSteps) * stepMs) / 3_600_000;
    const d = dailyCurve(hour, u.diurnal.peakHour);
    curve[t] = d;
    const scale = u.scale * stepFactor(u.step, hour);
    if (scale > maxScale) maxScale = scale;
    cpuFactor[t] = ((1 + u.diurnal.cpuSwing * d) * scale) / burstMean;
    memoryFactor[t] = (1 + u.diurnal.memorySwing * d) * scale;
  }

  const replicas = s.classes.map((c) => {
    if (c.kind !== 'deployment') return undefined;
    const r = new Int32Array(steps);
    const { min, max } = c.replicasPerNode;
    for (let t = 0; t < steps; t++) r[t] = Math.round(s.nodes * (min + ((max - min) * (1 + curve[t]!)) / 2));
    return r;
  });

  const root = new Rng(s.seed);
  const jobs: JobArrival[] = [];
  s.classes.forEach((c, classIndex) => {
    if (c.kind !== 'job' || c.arrivalsPerNodeHour <= 0) return;
    const rng = root.fork(1000 + classIndex);
    const meanGapSteps = 3_600_000 / stepMs / (c.arrivalsPerNodeHour * s.nodes);
    for (let at = rng.exponential(meanGapSteps); at < steps; at += rng.exponential(meanGapSteps)) {
      jobs.push({ step: Math.floor(at), classIndex, runSteps: Math.max(1, Math.round((rng.exponential(c.durationMinutes) * 60_000) / stepMs)) });
    }
  });
  jobs.sort((a, b) => a.step - b.step || a.classIndex - b.classIndex);

  const burstSteps = Math.max(1, Math.round((u.bursts.seconds * 1000) / stepMs));
  const memoryPeriodSteps = Math.max(1, Math.round((u.memoryGrowth.periodHours * 3_600_000) / stepMs));
  // A modelled peak: the daily peak, the largest scale, the top of memory growth, and a burst if bursts reach p95.
  const cpuPeak = ((1 + u.diurnal.cpuSwing) * maxScale * (u.bursts.share > 0.05 ? u.bursts.factor : 1)) / burstMean;
  const memoryPeak = (1 + u.diurnal.memorySwing) * maxScale * (1 + u.memoryGrowth.swing);
  const tiers = s.classes.map(classTier);
  const profile = (classIndex: number, ordinal: number, runSteps: number): PodProfile => {
    const c = s.classes[classIndex]!;
    const key = Math.floor(noise(s.seed, classIndex + 1, ordinal) * 2 ** 31);
    const rng = new Rng(key);
    const cpuShare = rng.beta(1 - u.cpuSlack, u.concentration);
    const memoryShare = rng.beta(1 - u.memorySlack, u.concentration);
    return {
      classIndex, requestCpu: c.requests.cpu, requestMemory: c.requests.memory, cpuShare, memoryShare, key,
      cpuBase: c.requests.cpu * cpuShare, memoryBase: c.requests.memory * memoryShare,
      memoryPhase: Math.floor(rng.next() * memoryPeriodSteps), runSteps,
      peakCpu: c.requests.cpu * cpuShare * cpuPeak, peakMemory: c.requests.memory * memoryShare * memoryPeak,
      tier: tiers[classIndex],
    };
  };
  const startSteps = Math.round((u.startSeconds * 1000) / stepMs);
  return { steps, stepMs, cpuFactor, memoryFactor, replicas, jobs, profile, burstSteps, memoryPeriodSteps, startSteps, warmupSteps };
}

/** A pod's CPU use (millicores) at step t (arguments from its profile: UsageSubject). */
export function podCpu(w: Workload, cpuBase: number, key: number, phase: number, t: number, burstFactor: number, burstShare: number): number {
  const bursting = burstShare > 0 && noise(key, Math.floor((t + phase) / w.burstSteps)) < burstShare;
  return cpuBase * w.cpuFactor[t]! * (bursting ? burstFactor : 1);
}

/** A pod's memory use (bytes) at step t, `age` steps after it started: it climbs over a period, then is freed. */
export function podMemory(w: Workload, memoryBase: number, phase: number, t: number, age: number, growthSwing: number): number {
  const at = ((age + phase) % w.memoryPeriodSteps) / w.memoryPeriodSteps;
  return memoryBase * w.memoryFactor[t]! * (1 + growthSwing * (2 * at - 1));
}

/**
 * A Guaranteed pod's limits are its requests: its CPU is throttled there by its
 * CFS quota and its memory held there by its own cgroup (what the pod itself
 * asked for, not harm of the node's), so its usage is at most its requests.
 */
export function withinLimits(used: number, request: number, guaranteed: boolean): number {
  return guaranteed && used > request ? request : used;
}
