// A simulation: every policy run on the same workload and seed, and the
// figures that compare them. Pure: no clock, no files; the same scenario
// gives the same result, byte for byte.
import { DEFAULT_POLICY, type Policy } from '../gateway/decide/policy.js';
import {
  DEFAULT_OVERSELL, katalystAllocator, noneAllocator, oracleAllocator, oversellAllocator, policyEntry, seaiiiAllocator, staticAllocator,
  type Allocator, type NodeShape,
} from './allocators.js';
import { runPolicy, type RunMetrics } from './cluster.js';
import { rawAllocatable, type Scenario } from './scenario.js';
import { replay, traceSeconds, type Trace } from './trace.js';
import { buildWorkload } from './workload.js';

export interface PolicyResult extends RunMetrics {
  densityVsNone: number;
  densityVsOracle: number;
}

export interface SimulationResult {
  scenario: Scenario;
  /** The replayed recording, if any: its nodes replace the scenario's. */
  trace?: { nodes: string[]; polls: number; seconds: number };
  steps: number;
  /** Points of each series are this many simulated seconds apart. */
  seriesEverySeconds: number;
  /** The targets risk is measured against: the first OversellPolicy's. */
  targets: { cpu: number; memory: number };
  caps: { cpu: number; memory: number };
  policies: PolicyResult[];
}

export interface Progress {
  policy: string;
  /** 0..1 over the whole simulation. */
  done: number;
}

const round = (x: number, digits: number) => Math.round(x * 10 ** digits) / 10 ** digits;

/**
 * trace: replay a recorded cluster (`oversell record`): its nodes, each with its own
 * shape, and its recorded load, under which the scenario's pods are placed.
 */
export function simulate(scenario: Scenario, onProgress?: (p: Progress) => void, trace?: Trace): SimulationResult {
  const s = trace ? { ...scenario, nodes: trace.polls[0]!.nodes.length } : scenario;
  const workload = buildWorkload(s);
  const recorded = trace && replay(trace, workload.steps, s.tickSeconds);
  const shape: NodeShape = { raw: rawAllocatable(s), capacity: s.node.capacity, systemUsage: s.node.systemUsage };
  const shapes: NodeShape[] = recorded?.shapes ?? new Array(s.nodes).fill(shape);
  const entries = (s.policies.oversell.length > 0 ? s.policies.oversell : [DEFAULT_OVERSELL]).map(policyEntry);
  const first: Policy = entries[0]?.policy ?? DEFAULT_POLICY;
  const allocators: Allocator[] = [
    noneAllocator(shapes),
    staticAllocator(shapes, s.policies.static),
    seaiiiAllocator(shapes),
    katalystAllocator(shapes, s.policies.katalyst),
    oracleAllocator(shapes, first),
    ...entries.map((e) => oversellAllocator(shapes, e)),
  ];
  const names = allocators.map((a) => a.name);
  const clash = names.find((x, i) => names.indexOf(x) !== i);
  if (clash) throw new Error(`two policies are named ${JSON.stringify(clash)}; OversellPolicies need names other than none, static, seaiii, katalyst and oracle`);

  const seriesEverySteps = Math.max(1, Math.ceil(workload.steps / 288));
  const targets = { cpu: first.cpu.targetUtilization, memory: first.memory.targetUtilization };
  const runs = allocators.map((allocator, k) =>
    runPolicy({
      scenario: s, workload, allocator, shapes, targets, seriesEverySteps, baseline: recorded?.baseline,
      onProgress: onProgress && ((t) => onProgress({ policy: allocator.name, done: (k + t / workload.steps) / allocators.length })),
    }),
  );
  const none = runs[0]!.podsPlaced;
  const oracle = runs.find((r) => r.kind === 'oracle')!.podsPlaced;
  const policies = runs.map((r) => ({
    ...r,
    podsPlaced: round(r.podsPlaced, 1),
    podsPending: round(r.podsPending, 1),
    densityVsNone: round(none > 0 ? r.podsPlaced / none : 0, 4),
    densityVsOracle: round(oracle > 0 ? r.podsPlaced / oracle : 0, 4),
    cpuSlack: round(r.cpuSlack, 4),
    memorySlack: round(r.memorySlack, 4),
    allocatableChangesPerNodeHour: round(r.allocatableChangesPerNodeHour, 3),
  }));
  return {
    scenario: s,
    ...(trace && recorded && { trace: { nodes: recorded.names, polls: trace.polls.length, seconds: traceSeconds(trace) } }),
    steps: workload.steps,
    seriesEverySeconds: seriesEverySteps * s.tickSeconds,
    targets,
    caps: { cpu: first.cpu.maxRatio, memory: first.memory.maxRatio },
    policies,
  };
}
