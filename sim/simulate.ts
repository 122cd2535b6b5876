// A simulation: every policy run on the same workload and seed, and the
// figures that compare them. Pure: no clock, no files; the same scenario
// gives the same result, byte for byte.
import { DEFAULT_POLICY, type Policy, type RiskBudget } from '../gateway/decide/policy.js';
import {
  DEFAULT_OVERSELL, katalystAllocator, noneAllocator, oversellAllocator, policyEntry, seaiiiAllocator, staticAllocator,
  type Allocator, type NodeShape,
} from './allocators.js';
import { craneAllocator, koordinatorAllocator, peakPredictorAllocator } from './anchors.js';
import { runPolicy, type Demand, type RunMetrics } from './cluster.js';
import { limitAllocator } from './limit.js';
import { nodesNeeded } from './nodes-needed.js';
import type { PublicReplay, PublicTraceSummary } from './public-replay.js';
import { rawAllocatable, type Scenario } from './scenario.js';
import { replay, traceSeconds, type Baseline, type Trace } from './trace.js';
import { buildWorkload } from './workload.js';

export interface PolicyResult extends RunMetrics {
  /** Its pods over none's; null when requests are unknown (a public trace without them) or none places nothing: no density to compare. */
  densityVsNone: number | null;
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
  /**
   * The replayed recording, if any: `oversell record`'s (its nodes replace the
   * scenario's), or a public trace's (its pods replace the scenario's classes).
   */
  trace?: { nodes: string[]; polls: number; seconds: number } | PublicTraceSummary;
  demand: Demand;
  steps: number;
  /** Points of each series are this many simulated seconds apart. */
  seriesEverySeconds: number;
  /** The targets risk is measured against: the first OversellPolicy's. */
  targets: { cpu: number; memory: number };
  caps: { cpu: number; memory: number };
  /** The first OversellPolicy's risk budget per resource (undefined where it is off). */
  budget: { cpu: RiskBudget | undefined; memory: RiskBudget | undefined };
  policies: PolicyResult[];
  /** The physical limit's pods: the reference of gainCaptured (0 when `only` left the limit out). */
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
  /** A public trace as the workload (sim/public-replay.ts): its scenario, pods and nodes replace the given scenario's. */
  publicTrace?: PublicReplay | undefined;
  /**
   * Run only the policies of these names (a sweep runs one point at a time).
   * densityVsNone needs none among them, gainCaptured none and the limit; each
   * is null otherwise, and the caller that ran those once compares with them itself.
   */
  only?: readonly string[] | undefined;
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
  const pub = options.publicTrace;
  if (trace && pub) throw new Error('one trace at a time: a recorded cluster or a public trace');
  // A trace is its own timeline: no warm-up day before it.
  const s = pub ? { ...pub.scenario, warmupHours: 0 } : trace ? { ...scenario, nodes: trace.polls[0]!.nodes.length, warmupHours: 0 } : scenario;
  const demand = options.demand ?? 'scenario';
  if (trace && options.nodesNeeded) throw new Error('nodes needed does not apply to a replayed trace: its nodes are the cluster');
  const workload = pub ? pub.workload : buildWorkload(s);
  const recorded = trace && replay(trace, workload.steps, s.tickSeconds);
  const shape: NodeShape = { raw: rawAllocatable(s), capacity: s.node.capacity, systemUsage: s.node.systemUsage };
  // nodes-needed's clusters: nodes of the scenario's shape, or the first k of a public trace's machines.
  const nodesOf = (nodes: number): { shapes: NodeShape[]; baseline: Baseline | undefined } => (pub ? pub.nodes(nodes) : { shapes: new Array(nodes).fill(shape), baseline: undefined });
  const shapes: NodeShape[] = pub?.shapes ?? recorded?.shapes ?? nodesOf(s.nodes).shapes;
  const baseline = pub ? pub.baseline : recorded?.baseline;
  const requestsKnown = pub ? pub.summary.requestsKnown : true;
  const entries = (s.policies.oversell.length > 0 ? s.policies.oversell : [DEFAULT_OVERSELL]).map(policyEntry);
  const first: Policy = entries[0]?.policy ?? DEFAULT_POLICY;
  const p = s.policies;
  // Each policy as a function of its nodes: nodes-needed runs it on other node counts.
  const allFactories: ((sh: NodeShape[], b: Baseline | undefined) => Allocator)[] = [
    (sh) => noneAllocator(sh),
    (sh) => staticAllocator(sh, p.static),
    (sh) => seaiiiAllocator(sh),
    (sh) => katalystAllocator(sh, p.katalyst),
    (sh) => koordinatorAllocator(sh, p.koordinator, s.node.reserved, s.tickSeconds),
    (sh) => craneAllocator(sh, p.crane, s.tickSeconds),
    (sh) => peakPredictorAllocator(sh, p.peakPredictor, s.node.evictionHardMemory, s.tickSeconds),
    (sh, b) => limitAllocator(sh, s, workload, b),
    ...entries.map((e) => (sh: NodeShape[]) => oversellAllocator(sh, e)),
  ];
  const allNames = [...FIXED_POLICIES, ...entries.map((e) => e.name)];
  const clash = allNames.find((x, i) => allNames.indexOf(x) !== i);
  if (clash) throw new Error(`two policies are named ${JSON.stringify(clash)}; OversellPolicies need names other than ${FIXED_POLICIES.join(', ')}`);
  const unknown = options.only?.find((x) => !allNames.includes(x));
  if (unknown !== undefined) throw new Error(`no policy is named ${JSON.stringify(unknown)} (this run has ${allNames.join(', ')})`);
  const picked = allNames.map((_, k) => k).filter((k) => !options.only || options.only.includes(allNames[k]!));
  const factories = picked.map((k) => allFactories[k]!);
  const names = picked.map((k) => allNames[k]!);

  const seriesEverySteps = Math.max(1, Math.ceil((workload.steps - workload.warmupSteps) / 288));
  const targets = { cpu: first.cpu.targetUtilization, memory: first.memory.targetUtilization };
  const runs = factories.map((make, k) => {
    const allocator = make(shapes, baseline);
    return runPolicy({
      scenario: s, workload, allocator, shapes, targets, seriesEverySteps, baseline, demand,
      onProgress: onProgress && ((t) => onProgress({ policy: allocator.name, done: (k + t / workload.steps) / factories.length })),
    });
  });

  let needed: (number | null)[] | undefined;
  let neededRuns = 0;
  const maxNodes = pub ? pub.maxNodes : NODES_NEEDED_FACTOR * s.nodes;
  if (options.nodesNeeded) {
    needed = factories.map((make, k) => {
      const search = nodesNeeded(
        (nodes) => {
          const c = nodesOf(nodes);
          const r = runPolicy({ scenario: s, workload, allocator: make(c.shapes, c.baseline), shapes: c.shapes, targets, seriesEverySteps, baseline: c.baseline, demand: 'scenario', stopWhenPending: true });
          onProgress?.({ policy: `${names[k]} on ${nodes} nodes`, done: 1 });
          return r.peakPending === 0;
        },
        Math.min(s.nodes, maxNodes),
        maxNodes,
      );
      neededRuns += search.probes.length;
      return search.nodes ?? null;
    });
  }

  const noneRun = runs.find((r) => r.kind === 'none');
  const limitRun = runs.find((r) => r.kind === 'limit');
  const none = noneRun ? round(noneRun.podsPlaced, 1) : 0;
  const limit = limitRun ? round(limitRun.podsPlaced, 1) : 0;
  const policies = runs.map((r, k): PolicyResult => {
    const pods = round(r.podsPlaced, 1);
    return {
      ...r,
      podsPlaced: pods,
      podsPending: round(r.podsPending, 1),
      // Without known requests the pods placed are no one's choice to compare: no density, no share of the limit.
      // none placing nothing is no reference either: a ratio to zero is not a density.
      densityVsNone: requestsKnown && none > 0 ? round(pods / none, 4) : null,
      gainCaptured: requestsKnown && noneRun && limitRun ? gainCaptured(pods, none, limit) : null,
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
    ...(pub && { trace: pub.summary }),
    demand,
    steps: workload.steps - workload.warmupSteps,
    seriesEverySeconds: seriesEverySteps * s.tickSeconds,
    targets,
    caps: { cpu: first.cpu.maxRatio, memory: first.memory.maxRatio },
    budget: { cpu: first.cpu.riskBudget.enabled ? first.cpu.riskBudget : undefined, memory: first.memory.riskBudget.enabled ? first.memory.riskBudget : undefined },
    policies,
    limit: { podsPlaced: limit },
    ...(needed && { nodesNeeded: { demand: 'scenario' as const, maxNodes, runs: neededRuns } }),
  };
}
