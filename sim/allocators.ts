// The policies compared: what each sets a node's allocatable to after a usage
// sample. oversell's is the gateway's own decision (decideForNode, with the
// window, previous grant and bound requests the webhook would pass), not a
// copy of it; Katalyst's realtime formula is the same headroom() the decision
// uses, without its window statistic, floor, cap, hysteresis or pressure.
import { decideForNode } from '../gateway/decide/node-decision.js';
import { DEFAULT_POLICY, headroom, type Allocatable, type Policy, type PreviousGrant } from '../gateway/decide/policy.js';
import type { PolicyEntry } from '../gateway/decide/select-policy.js';
import { UsageWindow, type WindowPoint } from '../gateway/decide/usage-window.js';
import { toPolicyEntry } from '../gateway/policies/policy-spec.js';
import { ScenarioError, type OversellPolicyInput, type Quantities, type Scenario } from './scenario.js';

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
}

/** Requests and modelled peaks already on a node, and a pod's own: what the oracle's fit check reads. */
export interface FitQuery {
  node: number;
  boundCpu: number;
  boundMemory: number;
  peakCpu: number;
  peakMemory: number;
  requestCpu: number;
  requestMemory: number;
  podPeakCpu: number;
  podPeakMemory: number;
}

export type PolicyKind = 'none' | 'static' | 'seaiii' | 'katalyst' | 'oracle' | 'oversell';

export interface Allocator {
  readonly name: string;
  readonly kind: PolicyKind;
  /** The node's allocatable after this sample, into out. */
  allocate(node: number, s: NodeSample, out: Quantities): void;
  /** Replaces the scheduler's requests-against-allocatable check (the oracle only). */
  fits?(q: FitQuery): boolean;
  /** Why allocatable changed, by resource, the decision's bound and direction ("cpu headroom down"): oversell only. */
  readonly changes?: Map<string, number>;
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

/**
 * The clairvoyant reference: a pod fits where its requests fit in raw allocatable, or
 * within the policy's caps while the modelled peaks of every pod there stay under the
 * policy's targets. Its allocatable is what it has placed (never below requests).
 */
export function oracleAllocator(shapes: readonly NodeShape[], policy: Policy): Allocator {
  const fitsOne = (bound: number, request: number, raw: number, ratio: number, peaks: number, podPeak: number, target: number, system: number) =>
    bound + request <= raw || (bound + request <= raw * ratio && peaks + podPeak <= raw * target - system);
  return {
    name: 'oracle',
    kind: 'oracle',
    allocate(node, s, out) {
      out.cpu = Math.max(shapes[node]!.raw.cpu, s.boundCpu);
      out.memory = Math.max(shapes[node]!.raw.memory, s.boundMemory);
    },
    fits: (q) => {
      const { raw, systemUsage } = shapes[q.node]!;
      return (
        fitsOne(q.boundCpu, q.requestCpu, raw.cpu, policy.cpu.maxRatio, q.peakCpu, q.podPeakCpu, policy.cpu.targetUtilization, systemUsage.cpu) &&
        fitsOne(q.boundMemory, q.requestMemory, raw.memory, policy.memory.maxRatio, q.peakMemory, q.podPeakMemory, policy.memory.targetUtilization, systemUsage.memory)
      );
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
  // As gateway/policies/policy-source.ts keeps it: the longest window or calm period, at most 10 minutes.
  const retainMs = Math.min(600_000, Math.max(policy.windowMs, policy.calmPeriodMs));
  const raws: Allocatable[] = shapes.map((sh) => ({ cpuMillicores: BigInt(sh.raw.cpu), memoryBytes: BigInt(sh.raw.memory) }));
  const windows = shapes.map(() => new UsageWindow());
  const previous: (PreviousGrant | undefined)[] = new Array(shapes.length).fill(undefined);
  const point: WindowPoint = { timestampMs: 0, cpuMillicores: 0, memoryBytes: 0, cpuPressure: 0, memoryPressure: 0 };
  const changes = new Map<string, number>();
  const count = (resource: 'cpu' | 'memory', before: bigint, after: bigint, bound: string) => {
    if (before === after) return;
    const key = `${resource} ${bound} ${after > before ? 'up' : 'down'}`;
    changes.set(key, (changes.get(key) ?? 0) + 1);
  };
  return {
    name: entry.name,
    kind: 'oversell',
    changes,
    allocate(node, s, out) {
      const window = windows[node]!;
      window.dropThrough(s.tMs - retainMs);
      point.timestampMs = s.tMs;
      point.cpuMillicores = s.cpu;
      point.memoryBytes = s.memory;
      point.cpuPressure = s.cpuPressure;
      point.memoryPressure = s.memoryPressure;
      window.add(point);
      const bound = { cpuMillicores: s.boundCpu, memoryBytes: s.boundMemory, newestPodAgeMs: s.newestPodAgeMs };
      const d = decideForNode({
        raw: raws[node]!,
        signed: previous[node],
        usage: { ageMs: 0, window, capacityMemoryBytes: shapes[node]!.capacity.memory, requests: { ...bound, known: true } },
        entry,
        boundRequests: bound,
      });
      const granted = { cpuMillicores: d.cpu.applied, memoryBytes: d.memory.applied };
      const before = previous[node]?.granted;
      if (before) {
        count('cpu', before.cpuMillicores, granted.cpuMillicores, d.cpu.bound);
        count('memory', before.memoryBytes, granted.memoryBytes, d.memory.bound);
      }
      previous[node] = { granted, wouldGrant: d.dryRun ? { cpuMillicores: d.cpu.granted, memoryBytes: d.memory.granted } : undefined };
      out.cpu = Number(granted.cpuMillicores);
      out.memory = Number(granted.memoryBytes);
    },
  };
}
