// A simulation: every policy run on the same workload and seed, and the
// figures that compare them. Pure: no clock, no files; the same scenario
// gives the same result, byte for byte.
import { DEFAULT_POLICY, type Policy } from '../gateway/decide/policy.js';
import {
  DEFAULT_OVERSELL, katalystAllocator, noneAllocator, oversellAllocator, policyEntry, seaiiiAllocator, staticAllocator,
  type Allocator, type NodeShape,
} from './allocators.js';
import { craneAllocator, koordinatorAllocator, peakPredictorAllocator } from './anchors.js';
import { runPolicy, type Demand, type RunMetrics } from './cluster.js';
import { limitAllocator } from './limit.js';
import { nodesNeeded } from './nodes-needed.js';
import { rawAllocatable, type Scenario } from './scenario.js';
import { replay, traceSeconds, type Trace } from './trace.js';
import { buildWorkload } from './workload.js';

export interface PolicyResult extends RunMetrics {
  densityVsNone: number;
  /**
   * (its pods - none's) / (the limit's - none's): the share of the physical limit's
   * gain it captures. null when the limit places no more than none: the reference
   * degenerates and there is nothing to capture.
   */
  gainCaptured: number | null;
  /** With --nodes-needed: the fewest nodes for the same workload with no pod waiting (null: more than the search's maximum). */
  nodesNeeded?: number | null;
}

export interface SimulationResult {
  scenario: Scenario;
  /** The replayed recording, if any: its nodes replace the scenario's. */
  trace?: { nodes: string[]; polls: number; seconds: number };
  demand: Demand;
  steps: number;
  /** Points of each series are this many simulated seconds apart. */
  seriesEverySeconds: number;
  /** The targets risk is measured against: the first OversellPolicy's. */
  targets: { cpu: number; memory: number };
  caps: { cpu: number; memory: number };
  policies: PolicyResult[];
  /** The physical limit's pods: the reference of gainCaptured. */
  limit: { podsPlaced: number };
  /** With --nodes-needed: the search's bounds and how many runs it took. */
  nodesNeeded?: { demand: 'scenario'; maxNodes: number; runs: number };
}

export interface Progress {
  policy: string;
  /** 0..1 over the whole simulation. */
  done: number;
}

export interface SimulateOptions {
  demand?: Demand | undefined;
  /** Also search each policy's nodes needed (under the scenario's own demand: saturating demand always leaves pods waiting). */
  nodesNeeded?: boolean | undefined;
}

/** The policy names every run has, in order; OversellPolicies follow. */
export const FIXED_POLICIES = ['none', 'static', 'seaiii', 'katalyst', 'koordinator', 'crane', 'peak-predictor', 'limit'] as const;

/** nodes-needed searches up to this many times the scenario's nodes. */
const NODES_NEEDED_FACTOR = 4;

const round = (x: number, digits: number) => Math.round(x * 10 ** digits) / 10 ** digits;

/** gainCaptured from the rounded figures the report prints: null when the limit's gain is none. */
export function gainCaptured(pods: number, none: number, limit: number): number | null {
  return limit > none ? round((pods - none) / (limit - none), 4) : null;
}

/**
 * trace: replay a recorded cluster (`oversell record`): its nodes, each with its own
 * shape, and its recorded load, under which the scenario's pods are placed.
 */
export function simulate(scenario: Scenario, onProgress?: (p: Progress) => void, trace?: Trace, options: SimulateOptions = {}): SimulationResult {
  const s = trace ? { ...scenario, nodes: trace.polls[0]!.nodes.length } : scenario;
  const demand = options.demand ?? 'scenario';
  if (trace && options.nodesNeeded) throw new Error('nodes needed does not apply to a replayed trace: its nodes are the cluster');
  const workload = buildWorkload(s);
  const recorded = trace && replay(trace, workload.steps, s.tickSeconds);
  const shape: NodeShape = { raw: rawAllocatable(s), capacity: s.node.capacity, systemUsage: s.node.systemUsage };
  const shapesOf = (nodes: number): NodeShape[] => new Array(nodes).fill(shape);
  const shapes: NodeShape[] = recorded?.shapes ?? shapesOf(s.nodes);
  const entries = (s.policies.oversell.length > 0 ? s.policies.oversell : [DEFAULT_OVERSELL]).map(policyEntry);
  const first: Policy = entries[0]?.policy ?? DEFAULT_POLICY;
  const p = s.policies;
  // Each policy as a function of its nodes: nodes-needed runs it on other node counts.
  const factories: ((sh: NodeShape[]) => Allocator)[] = [
    (sh) => noneAllocator(sh),
    (sh) => staticAllocator(sh, p.static),
    (sh) => seaiiiAllocator(sh),
    (sh) => katalystAllocator(sh, p.katalyst),
    (sh) => koordinatorAllocator(sh, p.koordinator, s.node.reserved, s.tickSeconds),
    (sh) => craneAllocator(sh, p.crane, s.tickSeconds),
    (sh) => peakPredictorAllocator(sh, p.peakPredictor, s.node.evictionHardMemory, s.tickSeconds),
    (sh) => limitAllocator(sh, s, workload, sh === shapes ? recorded?.baseline : undefined),
    ...entries.map((e) => (sh: NodeShape[]) => oversellAllocator(sh, e)),
  ];
  const names = [...FIXED_POLICIES, ...entries.map((e) => e.name)];
  const clash = names.find((x, i) => names.indexOf(x) !== i);
  if (clash) throw new Error(`two policies are named ${JSON.stringify(clash)}; OversellPolicies need names other than ${FIXED_POLICIES.join(', ')}`);

  const seriesEverySteps = Math.max(1, Math.ceil(workload.steps / 288));
  const targets = { cpu: first.cpu.targetUtilization, memory: first.memory.targetUtilization };
  const runs = factories.map((make, k) => {
    const allocator = make(shapes);
    return runPolicy({
      scenario: s, workload, allocator, shapes, targets, seriesEverySteps, baseline: recorded?.baseline, demand,
      onProgress: onProgress && ((t) => onProgress({ policy: allocator.name, done: (k + t / workload.steps) / factories.length })),
    });
  });

  let needed: (number | null)[] | undefined;
  let neededRuns = 0;
  const maxNodes = NODES_NEEDED_FACTOR * s.nodes;
  if (options.nodesNeeded) {
    needed = factories.map((make, k) => {
      const search = nodesNeeded(
        (nodes) => {
          const sh = shapesOf(nodes);
          const r = runPolicy({ scenario: s, workload, allocator: make(sh), shapes: sh, targets, seriesEverySteps, demand: 'scenario', stopWhenPending: true });
          onProgress?.({ policy: `${names[k]} on ${nodes} nodes`, done: 1 });
          return r.peakPending === 0;
        },
        s.nodes,
        maxNodes,
      );
      neededRuns += search.probes.length;
      return search.nodes ?? null;
    });
  }

  const none = round(runs[0]!.podsPlaced, 1);
  const limit = round(runs.find((r) => r.kind === 'limit')!.podsPlaced, 1);
  const policies = runs.map((r, k): PolicyResult => {
    const pods = round(r.podsPlaced, 1);
    return {
      ...r,
      podsPlaced: pods,
      podsPending: round(r.podsPending, 1),
      densityVsNone: round(none > 0 ? pods / none : 0, 4),
      gainCaptured: gainCaptured(pods, none, limit),
      ...(needed && { nodesNeeded: needed[k]! }),
      cpuOverCapacityShare: round(r.cpuOverCapacityShare, 6),
      cpuSlack: round(r.cpuSlack, 4),
      memorySlack: round(r.memorySlack, 4),
      allocatableChangesPerNodeHour: round(r.allocatableChangesPerNodeHour, 3),
    };
  });
  return {
    scenario: s,
    ...(trace && recorded && { trace: { nodes: recorded.names, polls: trace.polls.length, seconds: traceSeconds(trace) } }),
    demand,
    steps: workload.steps,
    seriesEverySeconds: seriesEverySteps * s.tickSeconds,
    targets,
    caps: { cpu: first.cpu.maxRatio, memory: first.memory.maxRatio },
    policies,
    limit: { podsPlaced: limit },
    ...(needed && { nodesNeeded: { demand: 'scenario' as const, maxNodes, runs: neededRuns } }),
  };
}
