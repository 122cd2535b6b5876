// The oversell decision: a pure function from (raw allocatable, usage window,
// bound requests, policy, previous grant) to (allocatable, reason). No I/O, no
// clock: the caller passes the data age.
//
// Headroom follows Katalyst's formula. With A = raw allocatable, R = requests
// bound to the node, U = usage (the policy's window statistic), T = target
// utilization and L = clamp(U / R, minLoadFactor, 1):
//
//     headroom = R + (A*T - U) / L
//
// i.e. if new pods use their requests in the same proportion L as the pods
// already there, filling the node up to `headroom` brings usage to A*T.
// Under a risk budget (ResourcePolicy.riskBudget), once the node's load
// history spans Policy.history.minSpan, the target gives way to the node's
// predicted peak. With L = the larger of the load factor the history exceeded
// for only overShare of its time, the window's U / R, and minLoadFactor, and
// m = the budget's margin:
//
//     headroom = R + (A*(1 - m) - L*(R - S) - S) / max(L, P)
//
// where S is the part of R not yet running (bound, not admitted: no usage to
// see), counted at its requests, and P is the pool's typical predicted peak
// (pool-load.ts): the pods a rise lets in come from the pool, not from this
// node. With S = 0 and P <= L it is A*(1 - m) / L: filling the node with pods
// that use their requests as its pods did at the predicted peak brings usage
// to A*(1 - m). A pod running but not yet showing its usage is covered by the
// startupGrace hold below.
// The grant is bounded by construction:
//
//     granted = max(floor, min(cap, headroom)),  cap = (A - E) * maxRatio + E,
//     floor = max(A, min(R, cap), Ra)  with R from the API server (the gateway's own watch)
//     floor = max(A, min(R, cap))      with R from the node's agent
//
// where E is the CPU the static CPU manager holds exclusively on the node
// (0 for memory, and wherever the agent says none or cannot tell): those
// cores belong to their containers alone, so only the shared pool is
// inflated, as Katalyst's controller does. E is taken within [0, A], so
// whatever an agent reports it can only lower the cap, down to A.
// Ra is the part of R the kubelet has admitted (a container status, or
// running). So it never drops below what the kubelet computed nor below what
// is already bound (pods would be rejected on a kubelet restart), and never
// exceeds max(cap, Ra) for an Ra no agent or pod author can inflate. An
// agent's R, which a compromised node controls, and a pod created with
// spec.nodeName that the kubelet has not admitted may hold the floor up to the
// cap, never past it.
// requestsOverCap reports a node whose R is above the cap. Stale data,
// pressure, a missing policy give the floor.
// Hysteresis holds small rises back, and so does a pod bound less than
// startupGrace ago: its requests count at once but its usage does not show
// until it has started, so a rise then would count its requests at the load
// factor of pods that are running. A fall is never delayed.
import type { LoadHistoryView } from './load-history.js';
import { NO_USAGE, summaryUnder } from '../../lib/usage/window-summary.js';
import { planId, type AgentSummary } from '../../lib/usage/summary-plan.js';
import { ExplainedDecision, type ExplainFacts } from './reason.js';
import { CPU_BUDGET_BURN, CPU_BUDGET_MIN_OBSERVED_SECONDS } from './pool-harm.js';
import { DEFAULT_PROTECT } from './tiers.js';
import { DEFAULT_RELIEF } from './relief.js';
import { isFresh, MAX_INT64, type CpuManagerInput, type DecidedBy, type Decision, type DecisionInput, type Policy, type ResourceDecision, type ResourcePolicy } from './decision-types.js';

// Readers import the decision's types from here, with the decision.
export * from './decision-types.js';
export { pressureNow } from '../../lib/usage/pressure.js';

export const DEFAULT_POLICY: Policy = {
  name: 'flags',
  mode: 'Enforce',
  cpu: { maxRatio: 4, targetUtilization: 0.6, minLoadFactor: 0.1, statistic: 'p95', pressureThreshold: 40, riskBudget: { enabled: true, overShare: 0.001, margin: 0 } },
  memory: { maxRatio: 3, targetUtilization: 0.8, minLoadFactor: 0.1, statistic: 'max', pressureThreshold: 10, workingSetThreshold: 0.9, riskBudget: { enabled: true, overShare: 0, margin: 0.05 } },
  windowMs: 60_000,
  staleAfterMs: 40_000,
  calmPeriodMs: 60_000,
  hysteresis: 0.05,
  startupGraceMs: 30_000,
  history: { minSpanMs: 24 * 3_600_000, learning: 'Targets', learningMaxRatio: { cpu: 2, memory: 1.25 } },
  protect: DEFAULT_PROTECT,
  relief: { enabled: true, memoryLine: DEFAULT_RELIEF.memoryLine, calmLine: DEFAULT_RELIEF.calmLine, perNodePerMinute: DEFAULT_RELIEF.perNodePerMinute },
};

const maxBig = (a: bigint, b: bigint) => (a > b ? a : b);
const minBig = (a: bigint, b: bigint) => (a < b ? a : b);

/** The realised share of the pool's node-time over capacity in the last hour, when it spends the CPU budget. */
function cpuBudgetBurnt(harm: DecisionInput['poolHarm'], overShare: number): { share: number; budget: number } | undefined {
  const observed = harm?.cpuObservedSeconds ?? 0;
  const over = harm?.cpuOverSeconds ?? 0;
  if (observed < CPU_BUDGET_MIN_OBSERVED_SECONDS || !(over > CPU_BUDGET_BURN * overShare * observed)) return undefined;
  return { share: over / observed, budget: overShare };
}

/** A pool's risk budget against the harm its nodes took in the last hour, as the decision weighs it (for the query API); undefined when the policy has no budget. */
export function riskBudgetState(policy: Policy | undefined, harm: DecisionInput['poolHarm']): RiskBudgetView | undefined {
  const memory = policy?.memory?.riskBudget.enabled === true;
  const cpu = policy?.cpu.riskBudget.enabled === true;
  if (!policy || (!memory && !cpu)) return undefined;
  const overloads = harm?.memoryOverloads ?? 0;
  return {
    memoryEnabled: memory,
    memoryOverloads: overloads,
    memorySpentUntilMs: memory && overloads > 0 ? (harm?.untilMs ?? 0) : 0,
    cpuEnabled: cpu,
    cpuObservedSeconds: harm?.cpuObservedSeconds ?? 0,
    cpuOverSeconds: harm?.cpuOverSeconds ?? 0,
    cpuSpentPastShare: CPU_BUDGET_BURN * policy.cpu.riskBudget.overShare,
    cpuSpent: cpu && cpuBudgetBurnt(harm, policy.cpu.riskBudget.overShare) !== undefined,
  };
}

export interface RiskBudgetView {
  memoryEnabled: boolean;
  memoryOverloads: number;
  memorySpentUntilMs: number;
  cpuEnabled: boolean;
  cpuObservedSeconds: number;
  cpuOverSeconds: number;
  cpuSpentPastShare: number;
  cpuSpent: boolean;
}

/** raw * ratio, exact to a millionth of the ratio, rounded down to the resource's unit. */
function scale(raw: bigint, ratio: number, unit: bigint): bigint {
  const v = (raw * BigInt(Math.round(ratio * 1e6))) / 1_000_000n;
  return (v / unit) * unit;
}

/**
 * Headroom under a risk budget: what brings the predicted peak to raw less the
 * margin, the pods already running at the load factor and those not yet
 * running (`starting`, their usage unseen) at their requests.
 */
export function budgetHeadroom(raw: number, requests: number, starting: number, loadFactor: number, margin: number, newLoadFactor = loadFactor): number {
  return requests + (raw * (1 - margin) - loadFactor * (requests - starting) - starting) / Math.max(loadFactor, newLoadFactor);
}

/** Headroom in the resource's unit; negative when the node is already past target. */
export function headroom(raw: number, requests: number, usage: number, p: Pick<ResourcePolicy, 'targetUtilization' | 'minLoadFactor'>): number {
  const load = requests > 0 ? Math.min(1, Math.max(p.minLoadFactor, usage / requests)) : 1;
  return requests + (raw * p.targetUtilization - usage) / load;
}

interface ResourceContext {
  raw: bigint;
  unit: bigint;
  requests: number | undefined;
  policy: ResourcePolicy | undefined;
  maxRatio: number;
  /** The policy's statistic of the resource over its window (window-summary.ts). */
  usage: number;
  /** The node's load history, when it spans the policy's minimum; otherwise undefined (targets). */
  history: LoadHistoryView | undefined;
  /** Policy.history.learning is Floor. */
  learnAtFloor: boolean;
  /** Learning with the targets: the history so far, which may lower them (never raise them). */
  learningHistory: LoadHistoryView | undefined;
  resource: 'cpu' | 'memory';
  underPressure: boolean;
  stale: boolean;
  noData: boolean;
  previous: bigint | undefined;
  hysteresis: number;
  /** A pod bound within the policy's startupGrace: no rise above the previous grant (or the floor, with none). */
  starting: boolean;
  dryRun: boolean;
  /** Requests from the API server (may lift the floor past the cap), not from the agent. */
  requestsTrusted: boolean;
  /** Of the trusted requests, those of pods the kubelet has admitted: only they lift the floor past the cap. */
  admitted: number | undefined;
  /** Of the trusted requests, those of pods being deleted: under pressure they do not hold the floor up. */
  leaving: number | undefined;
  /** A value the applied allocatable must not equal (DecisionInput.avoid). */
  avoid: bigint | undefined;
  /**
   * Nor raw itself: a stored status equal to what the kubelet computes stops
   * its writes until nodeStatusReportFrequency (5 min), and every rise would
   * wait for that. Set while a policy in Enforce decides from fresh data.
   */
  offRaw: boolean;
  /** Set by decideResource once the cap is known. */
  requestsOverCap: boolean;
  /** Held exclusively (static CPU manager), within [0, raw]: kept out of the ratio. */
  exclusive: bigint;
  /** The pool's typical predicted peak (DecisionInput.poolLoad): what the pods a rise lets in count at, when above the node's own. */
  poolLoadFactor: number | undefined;
}

function mustAvoid(c: ResourceContext, v: bigint): boolean {
  return v === c.avoid || (c.offRaw && v === c.raw);
}

// No object spread: `{ ...a, x }` leaves V8 with a slow-mode object that every
// later field access pays for. Every ResourceDecision is built by this one
// literal, so they all share one shape.
function resourceDecision(c: ResourceContext, granted: bigint, decidedBy: DecidedBy, floor: bigint, cap: bigint, usage: number | undefined, headroom: bigint | undefined, loadFactor?: number, newLoadFactor?: number): ResourceDecision {
  let applied = c.dryRun ? floor : granted;
  let avoided: bigint | undefined;
  // One unit off a value the kubelet may hold as raw without saying so, or off raw: down while that keeps the floor, else up within the cap.
  if (mustAvoid(c, applied) && decidedBy !== 'no-data') {
    // Two values may be avoided (raw and one the kubelet left): two units, when one is.
    const high = maxBig(cap, floor);
    let moved = applied;
    for (const step of [-1n, 1n, -2n, 2n]) {
      const v = applied + step * c.unit;
      if (v >= floor && v <= high && !mustAvoid(c, v)) {
        moved = v;
        break;
      }
    }
    if (moved !== applied) {
      avoided = applied;
      applied = moved;
      if (!c.dryRun) granted = moved;
    }
  }
  return { raw: c.raw, granted, applied, decidedBy, floor, cap, requestsOverCap: c.requestsOverCap, usage, headroom, loadFactor, newLoadFactor, avoided, exclusive: c.exclusive };
}

/** A request figure as a bigint in its unit: NaN and negatives count as nothing, infinity as past any cap. */
function requestsOf(r: number | undefined): bigint {
  return r === undefined || !(r > 0) ? 0n : Number.isFinite(r) ? BigInt(Math.ceil(r)) : MAX_INT64 + 1n;
}

/**
 * Millicores the static CPU manager holds exclusively, within [0, raw]: an
 * agent's count can only lower the cap, never raise it. 0 under none or unknown.
 */
export function exclusiveMillicores(cpuManager: CpuManagerInput | undefined, raw: bigint): bigint {
  const cpus = cpuManager?.policy === 'static' ? cpuManager.exclusiveCpus : 0;
  if (!(cpus > 0) || raw <= 0n) return 0n;
  return Number.isFinite(cpus) ? minBig(BigInt(Math.floor(cpus)) * 1000n, raw) : raw;
}

function decideResource(c: ResourceContext): ResourceDecision {
  // Whatever an agent reports, this stays a bigint.
  const bound = requestsOf(c.requests);
  // The ratio applies to the shared part only; what is held exclusively counts once.
  const cap = minBig(maxBig(scale(c.raw - c.exclusive, c.maxRatio, c.unit) + c.exclusive, c.raw), (MAX_INT64 / c.unit) * c.unit);
  c.requestsOverCap = bound > cap;
  // Up to the cap every bound pod counts; past it only what the API server bound and the kubelet admitted.
  const admitted = c.requestsTrusted ? (c.admitted === undefined ? bound : minBig(bound, requestsOf(c.admitted))) : 0n;
  const floor = maxBig(maxBig(c.raw, minBig(bound, cap)), admitted);
  if (c.noData) return resourceDecision(c, c.raw, 'no-data', floor, cap, undefined, undefined);
  if (!c.policy) return resourceDecision(c, floor, 'no-policy', floor, cap, undefined, undefined);
  if (c.stale) return resourceDecision(c, floor, 'stale', floor, cap, undefined, undefined);
  if (c.underPressure) {
    // A hot node does not keep room for pods on their way out: their replacements would take it at once.
    const leaving = c.requestsTrusted ? minBig(requestsOf(c.leaving), bound) : 0n;
    const hot = leaving === 0n ? floor : maxBig(maxBig(c.raw, minBig(bound - leaving, cap)), admitted > leaving ? admitted - leaving : 0n);
    return resourceDecision(c, hot, 'pressure', hot, cap, undefined, undefined);
  }

  const usage = c.usage;
  const requests = c.requests ?? 0;
  const budget = c.policy.riskBudget;
  // Until the history is long enough to have seen the node's peak: the target, or with learning Floor nothing above the floor.
  // Without requests a load factor says nothing: the target.
  if (budget.enabled && !c.history && c.learnAtFloor && requests > 0) return resourceDecision(c, floor, 'learning', floor, cap, usage, undefined);
  const resource = c.resource;
  const minLoadFactor = c.policy.minLoadFactor;
  const predictedPeak = (h: LoadHistoryView) => Math.max(h.quantile(resource, budget.overShare), usage / requests, minLoadFactor);
  let loadFactor = budget.enabled && c.history && requests > 0 ? predictedPeak(c.history) : undefined;
  // Pods bound but not yet admitted (not running: no usage to see) count at their requests.
  const starting = c.requestsTrusted && c.admitted !== undefined ? Math.max(0, Math.min(requests, requests - c.admitted)) : 0;
  // The pods a rise lets in come from the pool: at its typical peak when that is above this node's.
  const newLoadFactor = loadFactor !== undefined && c.poolLoadFactor !== undefined && c.poolLoadFactor > loadFactor ? c.poolLoadFactor : undefined;
  let h = loadFactor !== undefined ? budgetHeadroom(Number(c.raw), requests, starting, loadFactor, budget.margin, newLoadFactor) : headroom(Number(c.raw), requests, usage, c.policy);
  // Learning: the targets see only the window; the history so far has seen more (a burst an hour ago), so the budget on it may lower them.
  // It never raises them: a short history has not seen the daily peak.
  if (loadFactor === undefined && budget.enabled && c.learningHistory && requests > 0 && c.learningHistory.spanMs() > 0) {
    const partial = predictedPeak(c.learningHistory);
    const lower = budgetHeadroom(Number(c.raw), requests, starting, partial, budget.margin);
    if (lower < h) {
      h = lower;
      loadFactor = partial;
    }
  }
  const hRounded = Number.isFinite(h) ? (BigInt(Math.floor(h)) / c.unit) * c.unit : 0n;
  let granted = maxBig(floor, minBig(cap, hRounded));
  let which: DecidedBy;
  if (granted === floor && minBig(cap, hRounded) <= floor) which = floor > c.raw ? 'floor-requests' : 'floor-raw';
  else which = hRounded > cap ? 'cap' : loadFactor !== undefined ? 'budget' : 'headroom';

  // Hold back a small rise; never a fall. The held value is clamped into today's bounds.
  // A previous grant moved one unit off the avoided value (resourceDecision) counts as that value, so a second pass settles where the first did.
  const prev = c.avoid !== undefined && c.previous !== undefined && (c.previous === c.avoid - c.unit || c.previous === c.avoid + c.unit) ? c.avoid : c.previous;
  if (prev !== undefined && granted > prev && Number(granted - prev) <= c.hysteresis * Number(prev)) {
    const held = maxBig(floor, minBig(cap, prev));
    if (held < granted) {
      granted = held;
      which = 'hysteresis';
    }
  }
  // A pod still starting: no rise past the previous grant (the floor, with none), as above.
  if (c.starting) {
    const held = prev === undefined ? floor : maxBig(floor, minBig(cap, prev));
    if (held < granted) {
      granted = held;
      which = 'starting';
    }
  }
  return resourceDecision(c, granted, which, floor, cap, usage, hRounded, loadFactor, newLoadFactor);
}

export function decide(input: DecisionInput): Decision {
  const { raw, usage, policy } = input;
  const stale = usage !== undefined && policy !== undefined && !isFresh(usage.ageMs, policy.staleAfterMs);
  const trusted = input.boundRequests;
  const known = trusted !== undefined || usage?.requests.known === true;
  // A summary made where the points are, or the gateway's window summarized here: the same figures from the same points.
  const summary = usage === undefined ? NO_USAGE
    : usage.summary ?? (usage.window ? summaryUnder(usage.window, policy, usage.capacityMemoryBytes, usage.agentSummaries) : plannedSummaryOf(usage.planned, policy));
  const samples = summary.samples;
  const mem = policy?.memory;
  const noData = summary.newestMs === undefined;
  const hysteresis = policy?.hysteresis ?? 0;
  const newestPodAgeMs = trusted?.newestPodAgeMs;
  const starting = policy !== undefined && newestPodAgeMs !== undefined && newestPodAgeMs < policy.startupGraceMs;
  const dryRun = policy?.mode === 'DryRun';
  const offRaw = policy !== undefined && !dryRun && !stale && !noData;
  const history = policy && usage?.history && usage.history.spanMs() >= policy.history.minSpanMs ? usage.history : undefined;
  const learnAtFloor = policy?.history.learning === 'Floor';
  // Learning with the targets: the history so far may lower them, and the learning caps bound them (docs/policy.md, "The risk budget").
  const learning = policy !== undefined && !history && !learnAtFloor;
  const learningHistory = learning ? usage?.history : undefined;
  const learningCaps = {
    cpu: learning && policy.cpu.riskBudget.enabled ? policy.history.learningMaxRatio.cpu : Infinity,
    memory: learning && mem?.riskBudget.enabled ? policy.history.learningMaxRatio.memory : Infinity,
  };

  const cpuBudgetSpent = policy?.cpu.riskBudget.enabled === true ? cpuBudgetBurnt(input.poolHarm, policy.cpu.riskBudget.overShare) : undefined;
  const cpuMax = cpuBudgetSpent ? 1 : Math.min(policy?.cpu.maxRatio ?? 1, input.nodeMaxRatio?.cpu ?? Infinity, learningCaps.cpu);
  // The closed loop: harm the memory budget does not allow (its overShare is of the largest load factor seen; none beyond it) spends it.
  const memoryBudgetSpent = mem?.riskBudget.enabled === true && (input.poolHarm?.memoryOverloads ?? 0) > 0;
  const memMax = memoryBudgetSpent ? 1 : Math.min(mem?.maxRatio ?? 1, input.nodeMaxRatio?.memory ?? Infinity, learningCaps.memory);
  const cpu = decideResource({
    stale,
    noData,
    hysteresis,
    starting,
    dryRun,
    raw: raw.cpuMillicores,
    unit: 1n,
    requests: trusted ? trusted.cpuMillicores : known ? usage?.requests.cpuMillicores : undefined,
    requestsTrusted: trusted !== undefined,
    admitted: trusted?.admitted?.cpuMillicores,
    leaving: trusted?.leaving?.cpuMillicores,
    avoid: input.avoid?.cpuMillicores,
    offRaw,
    policy: policy?.cpu,
    maxRatio: Math.max(1, cpuMax),
    usage: summary.cpuMillicores,
    history,
    learnAtFloor,
    learningHistory,
    resource: 'cpu',
    underPressure: summary.cpuPressure,
    previous: input.previous?.cpuMillicores,
    requestsOverCap: false,
    exclusive: exclusiveMillicores(usage?.cpuManager, raw.cpuMillicores),
    poolLoadFactor: input.poolLoad?.cpu,
  });
  const memory = decideResource({
    stale,
    noData,
    hysteresis,
    starting,
    dryRun,
    raw: raw.memoryBytes,
    unit: 1024n,
    requests: trusted ? trusted.memoryBytes : known ? usage?.requests.memoryBytes : undefined,
    requestsTrusted: trusted !== undefined,
    admitted: trusted?.admitted?.memoryBytes,
    leaving: trusted?.leaving?.memoryBytes,
    avoid: input.avoid?.memoryBytes,
    // One resource off raw is enough for the kubelet to see a difference: memory only when cpu stayed at raw (a cap of 1x).
    offRaw: offRaw && cpu.applied === raw.cpuMillicores,
    policy: mem,
    maxRatio: Math.max(1, memMax),
    usage: summary.memoryBytes,
    history,
    learnAtFloor,
    learningHistory,
    resource: 'memory',
    underPressure: summary.memoryPressure,
    previous: input.previous?.memoryBytes,
    requestsOverCap: false,
    exclusive: 0n,
    poolLoadFactor: input.poolLoad?.memory,
  });
  // What the reason reads from the input, copied now: the caller's objects may change later.
  const facts: ExplainFacts = {
    historySpanMs: usage?.history?.spanMs(),
    usage: usage && {
      ageMs: usage.ageMs,
      requests: trusted
        ? { cpuMillicores: trusted.cpuMillicores, memoryBytes: trusted.memoryBytes, known: true }
        : { cpuMillicores: usage.requests.cpuMillicores, memoryBytes: usage.requests.memoryBytes, known: usage.requests.known },
    },
    requestsTrusted: trusted !== undefined,
    newestPodAgeMs,
    policy,
    nodeMaxRatio: input.nodeMaxRatio && { cpu: input.nodeMaxRatio.cpu, memory: input.nodeMaxRatio.memory },
    learningCaps,
    memoryBudgetSpent: memoryBudgetSpent ? { overloads: input.poolHarm!.memoryOverloads, untilMs: input.poolHarm!.untilMs } : undefined,
    cpuBudgetSpent,
  };
  return new ExplainedDecision(cpu, memory, policy?.name, dryRun, facts, samples);
}

/** The summary made elsewhere under the policy's plan; none without a policy or that plan. */
function plannedSummaryOf(planned: readonly AgentSummary[], policy: Policy | undefined) {
  if (!policy) return NO_USAGE;
  const id = planId(policy);
  return planned.find((p) => p.planId === id)?.summary ?? NO_USAGE;
}
