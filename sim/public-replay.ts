// A public trace (sim/traces/) as the simulator's workload. Each recorded VM
// or container is a pod with its recorded requests and usage: it arrives at
// its recorded start and leaves at its recorded end, and its usage is the
// trace's, resampled to the run's step, never the model's. The nodes are the
// trace's machines where it has them (Alibaba), each keeping what its
// containers do not explain as recorded load; Bitbrains has no hosts, so its
// VMs go onto nodes of the scenario's shape by the scheduler's own fit check.
import type { NodeShape } from './allocators.js';
import { Rng } from './random.js';
import { rawAllocatable, type DeploymentClass, type Scenario } from './scenario.js';
import type { Baseline } from './trace.js';
import { peak, type PublicPod, type PublicTraceFormat, type PublicWorkload, type Recorded, resample } from './traces/public-workload.js';
import { buildWorkload, type PodProfile, type RecordedUsage, type Workload } from './workload.js';

/** What the report says of the trace. */
export interface PublicTraceSummary {
  format: PublicTraceFormat;
  /** False: the trace does not give what its pods request, so the policies are not compared. */
  requestsKnown: boolean;
  /** The readers' notes and the replay's, one sentence each. */
  notes: string[];
  /** Recorded pods replayed (those that start within the run). */
  pods: number;
  /** The trace's machines, as the nodes; undefined when it has none (nodes of the scenario's shape). */
  machines: string[] | undefined;
  /** The trace's span, and its sampling interval. */
  seconds: number;
  sampleSeconds: number;
}

export interface PublicReplay {
  /** The scenario as run: its nodes, and one class per request shape of the trace's pods. */
  scenario: Scenario;
  workload: Workload;
  shapes: NodeShape[];
  /** What the machines did besides the trace's pods (Alibaba's batch tasks and system), staying on its machine. */
  baseline: Baseline | undefined;
  /** The first k nodes, for nodes-needed; at most maxNodes. */
  nodes(k: number): { shapes: NodeShape[]; baseline: Baseline | undefined };
  maxNodes: number;
  summary: PublicTraceSummary;
}

/** With nodes of the scenario's shape, nodes-needed searches up to this many times --nodes. */
const NODES_FACTOR = 4;

const requestKey = (p: PublicPod) => `${p.request!.cpu}/${p.request!.memory}`;

/** Run steps a recorded span covers: it arrives at the step its start falls in; it is gone from the step its end reaches. */
function span(r: Recorded, stepSeconds: number, steps: number): [number, number] {
  return [Math.floor(r.start / stepSeconds), Math.min(steps, Math.ceil(r.end / stepSeconds))];
}

/** Usage on cells of `stepsPerCell` steps: the trace's interval, or the run's step when that is coarser. */
function cells(r: Recorded, startStep: number, endStep: number, stepsPerCell: number, stepSeconds: number): Omit<RecordedUsage, 'startStep' | 'endStep'> {
  const firstCell = Math.floor(startStep / stepsPerCell);
  const count = Math.max(0, Math.floor((endStep - 1) / stepsPerCell) - firstCell + 1);
  const cellSeconds = stepsPerCell * stepSeconds;
  const u = resample(r, firstCell * cellSeconds, cellSeconds, count);
  return { cpu: u.cpu, memory: u.memory, stepsPerCell, firstCell };
}

function usageFactors(s: Scenario, steps: number): { cpu: Float64Array; memory: Float64Array } {
  const cpu = new Float64Array(steps);
  const step = s.usage.step;
  for (let t = 0; t < steps; t++) cpu[t] = s.usage.scale * (step && (t * s.tickSeconds) / 3600 >= step.atHour ? step.factor : 1);
  return { cpu, memory: Float64Array.from(cpu) };
}

/** Fisher-Yates from the scenario's seed: the same order every run. */
function seededOrder(indices: number[], seed: number): Int32Array {
  const rng = new Rng(seed).fork(31);
  const a = Int32Array.from(indices);
  for (let i = a.length - 1; i > 0; i--) {
    const j = Math.floor(rng.next() * (i + 1));
    const x = a[i]!;
    a[i] = a[j]!;
    a[j] = x;
  }
  return a;
}

/** The first k nodes of a baseline indexed step * n + node. */
function sliceBaseline(b: Baseline, n: number, k: number, steps: number): Baseline {
  const cut = (a: Float64Array) => {
    const out = new Float64Array(steps * k);
    for (let t = 0; t < steps; t++) out.set(a.subarray(t * n, t * n + k), t * k);
    return out;
  };
  return { cpu: cut(b.cpu), memory: cut(b.memory), requestCpu: cut(b.requestCpu), requestMemory: cut(b.requestMemory), peakCpu: b.peakCpu.slice(0, k), peakMemory: b.peakMemory.slice(0, k) };
}

/**
 * The trace as the run's workload, on the scenario's step, seed, node shape
 * (Bitbrains) and hours. Pods that start after the run ends are left out.
 */
export function publicReplay(pw: PublicWorkload, base: Scenario): PublicReplay {
  const stepSeconds = base.tickSeconds;
  const steps = Math.max(1, Math.round((base.hours * 3600) / stepSeconds));
  const stepsPerCell = Math.max(1, Math.floor(pw.sampleSeconds / stepSeconds));
  const notes = [...pw.notes];

  // Pods whose request the trace gives, within the run; a pod without one cannot be placed by requests.
  const inRun = pw.pods.filter((p) => p.request !== undefined && span(p, stepSeconds, steps)[0] < steps);
  const later = pw.pods.filter((p) => p.request !== undefined).length - inRun.length;
  if (later > 0) notes.push(`${later} pods start after the run's ${base.hours} hours: left out.`);
  const shapes = [...new Map(inRun.map((p) => [requestKey(p), p.request!])).values()].sort((a, b) => a.cpu - b.cpu || a.memory - b.memory);
  const shapeIndex = new Map(shapes.map((r, i) => [`${r.cpu}/${r.memory}`, i]));
  const classes: DeploymentClass[] = shapes.map((r) => ({ name: `trace ${r.cpu}m ${r.memory}B`, kind: 'deployment', requests: { cpu: r.cpu, memory: r.memory }, replicasPerNode: { min: 0, max: 0 } }));

  const machines = pw.machines;
  const nodeCount = machines ? machines.length : base.nodes;
  const s: Scenario = { ...base, nodes: nodeCount, classes };
  const factors = usageFactors(s, steps);
  const profiles: PodProfile[] = inRun.map((p) => {
    const [startStep, endStep] = span(p, stepSeconds, steps);
    const top = peak(p);
    return {
      classIndex: shapeIndex.get(requestKey(p))!, requestCpu: p.request!.cpu, requestMemory: p.request!.memory,
      cpuShare: 0, memoryShare: 0, key: 0, cpuBase: 0, memoryBase: 0, memoryPhase: 0, runSteps: 0,
      peakCpu: top.cpu, peakMemory: top.memory,
      recorded: { ...cells(p, startStep, endStep, stepsPerCell, stepSeconds), startStep, endStep },
    };
  });
  const order = profiles.map((_, i) => i);
  const arrivals = Int32Array.from([...order].sort((a, b) => profiles[a]!.recorded!.startStep - profiles[b]!.recorded!.startStep || a - b));
  const workload: Workload = {
    // A trace is its own timeline: no warm-up day before it.
    ...buildWorkload({ ...s, warmupHours: 0, classes: [] }),
    cpuFactor: factors.cpu, memoryFactor: factors.memory, replicas: classes.map(() => undefined), jobs: [],
    trace: { profiles, arrivals, cycle: seededOrder(order, s.seed) },
  };

  let nodeShapes: NodeShape[];
  let baseline: Baseline | undefined;
  let maxNodes: number;
  if (machines) {
    const n = machines.length;
    nodeShapes = machines.map((m) => ({
      capacity: m.capacity,
      raw: { cpu: Math.max(0, m.capacity.cpu - s.node.reserved.cpu), memory: Math.max(0, m.capacity.memory - s.node.reserved.memory - s.node.evictionHardMemory) },
      // The machine's recorded usage includes its system's.
      systemUsage: { cpu: 0, memory: 0 },
    }));
    const b: Baseline = {
      cpu: new Float64Array(steps * n), memory: new Float64Array(steps * n), requestCpu: new Float64Array(steps * n), requestMemory: new Float64Array(steps * n),
      peakCpu: new Float64Array(n), peakMemory: new Float64Array(n),
    };
    const index = new Map(machines.map((m, i) => [m.id, i]));
    machines.forEach((m, i) => {
      const u = cells(m, 0, steps, stepsPerCell, stepSeconds);
      for (let t = 0; t < steps; t++) {
        const c = Math.floor(t / stepsPerCell);
        b.cpu[t * n + i] = u.cpu[c]!;
        b.memory[t * n + i] = u.memory[c]!;
      }
    });
    // What the machine's own containers used is theirs, wherever the scheduler now puts them.
    for (const [k, p] of inRun.entries()) {
      const i = p.machine === undefined ? undefined : index.get(p.machine);
      if (i === undefined) continue;
      const r = profiles[k]!.recorded!;
      const u = cells(p, 0, steps, stepsPerCell, stepSeconds);
      for (let t = r.startStep; t < r.endStep; t++) {
        const c = Math.floor(t / stepsPerCell);
        b.cpu[t * n + i] = b.cpu[t * n + i]! - u.cpu[c]!;
        b.memory[t * n + i] = b.memory[t * n + i]! - u.memory[c]!;
      }
    }
    let clamped = 0;
    for (let j = 0; j < b.cpu.length; j++) {
      if (b.cpu[j]! < 0 || b.memory[j]! < 0) clamped += 1;
      b.cpu[j] = Math.max(0, b.cpu[j]!);
      b.memory[j] = Math.max(0, b.memory[j]!);
      const i = j % n;
      if (b.cpu[j]! > b.peakCpu[i]!) b.peakCpu[i] = b.cpu[j]!;
      if (b.memory[j]! > b.peakMemory[i]!) b.peakMemory[i] = b.memory[j]!;
    }
    notes.push(
      pw.requestsKnown
        ? 'The nodes are the trace\'s machines (capacity from machine_meta, allocatable = capacity minus the scenario\'s reserved and eviction threshold); what a machine used beyond its own containers (batch tasks, system) stays on it as recorded load; the containers are placed by each policy, wherever they ran.'
        : 'The nodes are the trace\'s machines with their recorded usage as load; there are no pods to place.',
    );
    if (clamped > 0) notes.push(`${clamped} machine-steps where the machine's containers used more than the machine: its recorded load there is taken as 0.`);
    baseline = b;
    maxNodes = n;
  } else {
    const shape: NodeShape = { raw: rawAllocatable(s), capacity: s.node.capacity, systemUsage: s.node.systemUsage };
    nodeShapes = new Array<NodeShape>(nodeCount).fill(shape);
    baseline = undefined;
    maxNodes = NODES_FACTOR * nodeCount;
  }
  const shapesOf = nodeShapes;
  const nodes = (k: number) => {
    if (machines) return { shapes: shapesOf.slice(0, k), baseline: baseline && sliceBaseline(baseline, nodeCount, k, steps) };
    return { shapes: new Array<NodeShape>(k).fill(shapesOf[0]!), baseline: undefined };
  };
  return {
    scenario: s, workload, shapes: nodeShapes, baseline, nodes, maxNodes,
    summary: { format: pw.format, requestsKnown: pw.requestsKnown, notes, pods: profiles.length, machines: machines?.map((m) => m.id), seconds: pw.durationSeconds, sampleSeconds: pw.sampleSeconds },
  };
}
