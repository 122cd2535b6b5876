// The policies compared: what each sets a node's allocatable to after a usage
// sample. oversell's is the gateway's own decision (decideForNode, with the
// window, previous grant and bound requests the webhook would pass), not a
// copy of it; Katalyst's realtime formula is the same headroom() the decision
// uses, without its window statistic, floor, cap, hysteresis or pressure.
import { decideForNode, type PolicyEntryWithHarm } from '../gateway/decide/node-decision.js';
import { PoolHarmLedger } from '../gateway/decide/pool-harm.js';
import { DEFAULT_POLICY, headroom, type Allocatable, type PreviousGrant } from '../gateway/decide/policy.js';
import type { PolicyEntry } from '../gateway/decide/select-policy.js';
import type { WindowPoint } from '../lib/usage/usage-window.js';
import { learnSample, newNodeInputs, retainFor } from '../gateway/decide/node-inputs.js';
import { poolLoads } from '../gateway/decide/pool-load.js';
import { toPolicyEntry } from '../gateway/policies/policy-spec.js';
import { reliefLimits, type ReliefPolicy } from '../gateway/decide/relief.js';
import { ScenarioError, type OversellPolicyInput, type Quantities, type Scenario } from './scenario.js';
import type { PodProfile } from './workload.js';

/** What a node's agent would report, and what the API server knows is bound to it. */
export interface NodeSample {
  tMs: number;
  cpu: number;
  memory: number;
  boundCpu: number;
  boundMemory: number;
  /** How long ago the node's newest pod was bound (Infinity: none yet), as the gateway's pod watch tells it. */
  newestPodAgeMs: number;
  /** PSI some avg10, percent. */
  cpuPressure: number;
  memoryPressure: number;
  /** Usage of the node's Deployment pods alone: what Koordinator and Crane count as not reclaimable (the system's is in cpu and memory only). */
  serviceCpu: number;
  serviceMemory: number;
}

/** A pod as the cluster tracks it: what placement hooks and per-pod observers are told. */
export interface PodRef {
  /** Unique per run: a job evicted and started again is a new pod with the same profile. */
  readonly id: number;
  readonly profile: PodProfile;
  /** Step it was bound at. */
  readonly boundAt: number;
}

/**
 * A policy that decides placement itself rather than through allocatable: the
 * physical limit (which knows future usage) and the anchors whose batch pods
 * draw on a pool of their own (Koordinator, Crane). The cluster tells it every
 * binding and every pod that leaves.
 */
export interface Placement {
  /** Replaces the scheduler's requests-against-allocatable check. maxPods is still checked. */
  fits(node: number, pod: PodProfile, t: number): boolean;
  bound(node: number, pod: PodRef, t: number): void;
  /** The pod left the node at step t (finished, deleted, evicted): it uses nothing from t on. */
  removed(node: number, pod: PodRef, t: number): void;
  /** Whether what it published is below what is bound to it (a pool of its own); otherwise allocatable is compared with bound requests. */
  belowRequests?(node: number): boolean;
}

/** A policy that reads each running pod's own usage (the peak predictor's per-pod percentiles). */
export interface PodObserver {
  /** Called every this many steps with every running pod's usage. */
  readonly everySteps: number;
  pod(node: number, pod: PodRef, cpu: number, memory: number, t: number): void;
  bound(node: number, pod: PodRef): void;
  removed(node: number, pod: PodRef): void;
}

export type PolicyKind = 'none' | 'static' | 'seaiii' | 'katalyst' | 'koordinator' | 'crane' | 'peak-predictor' | 'limit' | 'oversell';

export interface Allocator {
  readonly name: string;
  readonly kind: PolicyKind;
  /** The node's allocatable after this sample, into out. */
  allocate(node: number, s: NodeSample, out: Quantities): void;
  readonly placement?: Placement;
  readonly observer?: PodObserver;
  /** Why allocatable changed, by resource, the decision's bound and direction ("cpu headroom down"): oversell only. */
  readonly changes?: Map<string, number>;
  /** oversell's relief (sim/relief.ts): evictions past the relief line, the node held at its floor until calm. oversell only. */
  readonly relief?: { policy: ReliefPolicy; calmPeriodMs: number };
  /** oversell's protected-room check at binding (gateway/decide/protected-room.ts): a protected pod only where protected requests fit raw allocatable. oversell only. */
  readonly protectsRoom?: boolean;
  /**
   * Pods the kernel OOM-killed or the kubelet evicted for lack of memory, as
   * the gateway's harm meter counts them: oversell weighs them against the
   * pool's memory budget (gateway/decide/pool-harm.ts). oversell only.
   */
  memoryHarm?(count: number, tMs: number): void;
  /** A node's step as the gateway's CPU harm meter weighs it: its seconds, and of them with CPU demand over capacity. oversell only. */
  cpuObserved?(tMs: number, seconds: number, overSeconds: number): void;
}

export interface NodeShape {
  raw: Quantities;
  capacity: Quantities;
  systemUsage: Quantities;
}

function setTo(out: Quantities, cpu: number, memory: number): void {
  out.cpu = cpu;
  out.memory = memory;
}

export function noneAllocator(shapes: readonly NodeShape[]): Allocator {
  return { name: 'none', kind: 'none', allocate: (node, _s, out) => setTo(out, shapes[node]!.raw.cpu, shapes[node]!.raw.memory) };
}

/** allocatable x ratio, whatever the node does. */
export function staticAllocator(shapes: readonly NodeShape[], ratio: { cpu: number; memory: number }): Allocator {
  const cpu = shapes.map((sh) => Math.floor(sh.raw.cpu * ratio.cpu));
  const memory = shapes.map((sh) => Math.floor(sh.raw.memory * ratio.memory));
  return { name: 'static', kind: 'static', allocate: (node, _s, out) => setTo(out, cpu[node]!, memory[node]!) };
}

/** Seaiii/MutatingWebhook: max(allocatable, capacity - usage), CPU in whole cores, memory in whole MiB. */
export function seaiiiAllocator(shapes: readonly NodeShape[]): Allocator {
  const MiB = 1024 * 1024;
  return {
    name: 'seaiii',
    kind: 'seaiii',
    allocate(node, s, out) {
      const shape = shapes[node]!;
      const cpu = Math.floor((shape.capacity.cpu - s.cpu) / 1000) * 1000;
      const memory = Math.floor((shape.capacity.memory - s.memory) / MiB) * MiB;
      out.cpu = Math.max(shape.raw.cpu, cpu);
      out.memory = Math.max(shape.raw.memory, memory);
    },
  };
}

/** Katalyst's realtime overcommit: R + (A*T - U)/L on the latest sample, nothing holding it up or down but zero. */
export function katalystAllocator(shapes: readonly NodeShape[], k: Scenario['policies']['katalyst']): Allocator {
  const cpuPolicy = { targetUtilization: k.cpuTarget, minLoadFactor: k.minLoadFactor };
  const memoryPolicy = { targetUtilization: k.memoryTarget, minLoadFactor: k.minLoadFactor };
  return {
    name: 'katalyst',
    kind: 'katalyst',
    allocate(node, s, out) {
      const raw = shapes[node]!.raw;
      out.cpu = Math.max(0, Math.floor(headroom(raw.cpu, s.boundCpu, s.cpu, cpuPolicy)));
      out.memory = Math.max(0, Math.floor(headroom(raw.memory, s.boundMemory, s.memory, memoryPolicy)));
    },
  };
}

/** The default policy as `oversell` runs it (the gateway's flags default, renamed). */
export const DEFAULT_OVERSELL: OversellPolicyInput = { name: 'oversell', spec: {} };

/** A scenario's OversellPolicy, through the gateway's own parser; the simulation puts every node under it. */
export function policyEntry(input: OversellPolicyInput): PolicyEntry {
  const spec = { nodeSelector: { matchLabels: { 'oversell.io/simulated': 'true' } }, ...input.spec };
  const entry = toPolicyEntry({ apiVersion: 'oversell.io/v1alpha1', kind: 'OversellPolicy', metadata: { name: input.name }, spec });
  if (!entry.policy) throw new ScenarioError(`OversellPolicy ${input.name}: ${entry.error}`);
  return entry;
}

/**
 * One OversellPolicy, decided as the webhook decides on every kubelet status
 * write: the node's usage window (kept as long as the gateway keeps it), the
 * signed previous grant (hysteresis), bound requests from the API server.
 */
export function oversellAllocator(shapes: readonly NodeShape[], entry: PolicyEntry): Allocator {
  const policy = entry.policy ?? DEFAULT_POLICY;
  // The window and history as the gateway's store learns them (decide/node-inputs.ts), with the pool's policy.
  const rules = { retainMs: retainFor([policy]), startupGraceMs: policy.startupGraceMs };
  const raws: Allocatable[] = shapes.map((sh) => ({ cpuMillicores: BigInt(sh.raw.cpu), memoryBytes: BigInt(sh.raw.memory) }));
  const inputs = shapes.map(() => newNodeInputs());
  const previous: (PreviousGrant | undefined)[] = new Array(shapes.length).fill(undefined);
  const point: WindowPoint = { timestampMs: 0, cpuMillicores: 0, memoryBytes: 0, cpuPressure: 0, memoryPressure: 0 };
  const changes = new Map<string, number>();
  let poolAt = -1;
  /** The pool's entry with its typical peak of this step: made once a step, not once a node. */
  let stepEntry: PolicyEntryWithHarm = entry;
  // The simulated cluster is one pool: harm on any node weighs against its budget, as on a pool's nodes.
  const harm = new PoolHarmLedger();
  const count = (resource: 'cpu' | 'memory', before: bigint, after: bigint, bound: string) => {
    if (before === after) return;
    const key = `${resource} ${bound} ${after > before ? 'up' : 'down'}`;
    changes.set(key, (changes.get(key) ?? 0) + 1);
  };
  return {
    name: entry.name,
    kind: 'oversell',
    changes,
    ...(policy.relief.enabled && { relief: { policy: reliefLimits(policy), calmPeriodMs: policy.calmPeriodMs } }),
    protectsRoom: true,
    memoryHarm: (n, tMs) => harm.record(entry.name, n, tMs),
    cpuObserved: (tMs, seconds, over) => harm.recordCpu(entry.name, tMs, seconds, over),
    allocate(node, s, out) {
      const { window } = inputs[node]!;
      point.timestampMs = s.tMs;
      point.cpuMillicores = s.cpu;
      point.memoryBytes = s.memory;
      point.cpuPressure = s.cpuPressure;
      point.memoryPressure = s.memoryPressure;
      const bound = { cpuMillicores: s.boundCpu, memoryBytes: s.boundMemory, newestPodAgeMs: s.newestPodAgeMs };
      learnSample(inputs[node]!, point, { requests: { cpu: s.boundCpu, memory: s.boundMemory }, raw: shapes[node]!.raw, newestPodAgeMs: s.newestPodAgeMs }, rules);
      const history = inputs[node]!.history;
      const spent = harm.of(entry.name, s.tMs);
      // The pool's typical peak once a step, from every node's history as the step's first decision finds it, as the gateway's keeper computes it every 10 s.
      if (poolAt !== s.tMs) {
        poolAt = s.tMs;
        const poolLoad = poolLoads(inputs.map((i) => ({ policy, history: i.history }))).get(policy.name);
        stepEntry = poolLoad ? { ...entry, poolLoad } : entry;
      }
      const d = decideForNode({
        raw: raws[node]!,
        signed: previous[node],
        usage: { ageMs: 0, window, capacityMemoryBytes: shapes[node]!.capacity.memory, requests: { ...bound, known: true }, history },
        entry: spent.memoryOverloads > 0 || spent.cpuOverSeconds > 0 ? { ...stepEntry, harm: spent } : stepEntry,
        boundRequests: bound,
      });
      const granted = { cpuMillicores: d.cpu.applied, memoryBytes: d.memory.applied };
      const before = previous[node]?.granted;
      if (before) {
        count('cpu', before.cpuMillicores, granted.cpuMillicores, d.cpu.decidedBy);
        count('memory', before.memoryBytes, granted.memoryBytes, d.memory.decidedBy);
      }
      previous[node] = { granted, wouldGrant: d.dryRun ? { cpuMillicores: d.cpu.granted, memoryBytes: d.memory.granted } : undefined };
      out.cpu = Number(granted.cpuMillicores);
      out.memory = Number(granted.memoryBytes);
    },
  };
}
