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
// The grant is bounded by construction:
//
//     granted = max(floor, min(cap, headroom)),  cap = A * maxRatio,
//     floor = max(A, min(R, cap), Ra)  with R from the API server (the gateway's own watch)
//     floor = max(A, min(R, cap))      with R from the node's agent
//
// where Ra is the part of R the kubelet has admitted (a container status, or
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
import { COLUMN, UsageWindow } from './usage-window.js';
import { windowStart, windowStatistic, type Statistic } from './usage-stats.js';

/** The largest value a Kubernetes quantity holds in its unit: no grant goes past it. */
export const MAX_INT64 = 2n ** 63n - 1n;

export interface ResourcePolicy {
  /** Hard ceiling on granted / raw. */
  maxRatio: number;
  /** Share of raw allocatable that real usage may reach once the node is filled. */
  targetUtilization: number;
  /** Lower clamp of usage/requests, so near-idle pods cannot justify unbounded grants. */
  minLoadFactor: number;
  /** How the window is reduced to one usage figure. */
  statistic: Statistic;
  /** PSI "some" avg10 (percent) at or above which the resource is under pressure. */
  pressureThreshold: number;
}

export interface Policy {
  /** The OversellPolicy's name, or "flags" for the gateway's own default. */
  name: string;
  /** DryRun computes and reports, but allocatable stays at the floor. */
  mode: 'Enforce' | 'DryRun';
  cpu: ResourcePolicy;
  memory: ResourcePolicy & {
    /** Working set / capacity at or above which memory is under pressure. */
    workingSetThreshold: number;
  };
  windowMs: number;
  /** Usage older than this (gateway clock) never inflates. */
  staleAfterMs: number;
  /** After pressure, the grant stays at the floor until this long without it. */
  calmPeriodMs: number;
  /** A rise smaller than this fraction of the previous grant is held back. */
  hysteresis: number;
  /** No rise while the node's newest pod was bound less than this long ago (its usage may not show yet). */
  startupGraceMs: number;
}

export const DEFAULT_POLICY: Policy = {
  name: 'flags',
  mode: 'Enforce',
  cpu: { maxRatio: 2.0, targetUtilization: 0.6, minLoadFactor: 0.1, statistic: 'p95', pressureThreshold: 40 },
  memory: { maxRatio: 1.25, targetUtilization: 0.8, minLoadFactor: 0.1, statistic: 'max', pressureThreshold: 10, workingSetThreshold: 0.9 },
  windowMs: 60_000,
  staleAfterMs: 40_000,
  calmPeriodMs: 60_000,
  hysteresis: 0.05,
  startupGraceMs: 30_000,
};

export interface Allocatable {
  cpuMillicores: bigint;
  memoryBytes: bigint;
}

/** A grant the gateway made for a node: hysteresis compares the next one with it. */
export interface PreviousGrant {
  granted: Allocatable;
  /** Under a DryRun policy: what would have been granted. */
  wouldGrant: Allocatable | undefined;
  /**
   * Per resource, a value that may be the kubelet's raw but was never sent by
   * it (trusted-raw.ts): the kubelet left our earlier grant of this value in
   * place. Allocatable must not be written at it, so the kubelet's next write says.
   */
  unconfirmed?: Partial<Allocatable> | undefined;
}

/**
 * What the node object says that a decision needs, as the webhook observed it
 * on the kubelet's last write: the query API decides from the same inputs.
 */
export interface NodeObservation {
  raw: Allocatable;
  labels: Record<string, string>;
  /** Per-node caps from annotations (they only lower). */
  nodeMaxRatio: { cpu?: number; memory?: number };
  /** The grant that write carried away (or, with no patch, the verified one it came with). */
  lastGrant: PreviousGrant | undefined;
}

export interface UsageInput {
  /** Gateway now - when the newest sample arrived. */
  ageMs: number;
  /** At least the policy's window and calm period. */
  window: UsageWindow;
  capacityMemoryBytes: number;
  requests: { cpuMillicores: number; memoryBytes: number; known: boolean };
}

export interface DecisionInput {
  raw: Allocatable;
  usage: UsageInput | undefined;
  /** Undefined when no (valid) policy selects the node: no inflation. */
  policy: Policy | undefined;
  /** The grant this node carries from last time (its annotation), for hysteresis. */
  previous?: Partial<Allocatable>;
  /** Per-node caps from annotations; they can only lower the policy's maxRatio. */
  nodeMaxRatio?: { cpu?: number; memory?: number };
  /**
   * Requests of the pods the API server has bound to the node, from the
   * gateway's own watch: used instead of the agent's report, and the only
   * requests that may hold the floor above the cap. Undefined without that view.
   */
  boundRequests?: BoundRequestsInput | undefined;
  /** Values allocatable must not be written at (PreviousGrant.unconfirmed): moved one unit off them, within floor and cap. */
  avoid?: Partial<Allocatable> | undefined;
}

/**
 * The requests of the pods bound to a node. Those the kubelet has not admitted
 * yet (no container status, not running) count up to the cap only: a pod
 * created with spec.nodeName and huge requests must not lift the floor past
 * the cap before the kubelet has checked that it fits. `admitted` undefined:
 * every bound pod counts as admitted (callers that cannot tell).
 */
export interface BoundRequestsInput {
  cpuMillicores: number;
  memoryBytes: number;
  admitted?: { cpuMillicores: number; memoryBytes: number } | undefined;
  newestPodAgeMs?: number;
}

export type Bound =
  | 'headroom' | 'cap' | 'floor-raw' | 'floor-requests' | 'hysteresis' | 'starting'
  | 'pressure' | 'stale' | 'no-policy' | 'no-data';

export interface ResourceDecision {
  raw: bigint;
  /** What the policy grants (in DryRun: what it would grant). */
  granted: bigint;
  /** What goes into status.allocatable: granted, or the floor in DryRun. */
  applied: bigint;
  bound: Bound;
  floor: bigint;
  cap: bigint;
  /** Bound requests are above the cap: the floor is theirs (from the API server) or stops at the cap (from the agent). */
  requestsOverCap: boolean;
  /** The window statistic the headroom was computed from. */
  usage: number | undefined;
  headroom: bigint | undefined;
  /** The value allocatable was moved one unit off (DecisionInput.avoid); undefined when it was not. */
  avoided: bigint | undefined;
}

export interface Decision {
  cpu: ResourceDecision;
  memory: ResourceDecision;
  policy: string | undefined;
  dryRun: boolean;
  /** One line an operator can read in the node annotation. */
  reason: string;
}

const maxBig = (a: bigint, b: bigint) => (a > b ? a : b);
const minBig = (a: bigint, b: bigint) => (a < b ? a : b);

/** raw * ratio, exact to a millionth of the ratio, rounded down to the resource's unit. */
function scale(raw: bigint, ratio: number, unit: bigint): bigint {
  const v = (raw * BigInt(Math.round(ratio * 1e6))) / 1_000_000n;
  return (v / unit) * unit;
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
  /** The policy's window is the points from index `from` on. */
  window: UsageWindow;
  from: number;
  field: 'cpuMillicores' | 'memoryBytes';
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
  /** A value the applied allocatable must not equal (DecisionInput.avoid). */
  avoid: bigint | undefined;
  /** Set by decideResource once the cap is known. */
  requestsOverCap: boolean;
}

// No object spread: `{ ...a, x }` leaves V8 with a slow-mode object that every
// later field access pays for. Every ResourceDecision is built by this one
// literal, so they all share one shape.
function resourceDecision(c: ResourceContext, granted: bigint, bound: Bound, floor: bigint, cap: bigint, usage: number | undefined, headroom: bigint | undefined): ResourceDecision {
  let applied = c.dryRun ? floor : granted;
  let avoided: bigint | undefined;
  // One unit off a value the kubelet may hold as raw without saying so: down while that keeps the floor, else up within the cap.
  if (c.avoid !== undefined && applied === c.avoid && bound !== 'no-data') {
    const moved = applied - c.unit >= floor ? applied - c.unit : applied + c.unit <= maxBig(cap, floor) ? applied + c.unit : applied;
    if (moved !== applied) {
      avoided = applied;
      applied = moved;
      if (!c.dryRun) granted = moved;
    }
  }
  return { raw: c.raw, granted, applied, bound, floor, cap, requestsOverCap: c.requestsOverCap, usage, headroom, avoided };
}

/** A request figure as a bigint in its unit: NaN and negatives count as nothing, infinity as past any cap. */
function requestsOf(r: number | undefined): bigint {
  return r === undefined || !(r > 0) ? 0n : Number.isFinite(r) ? BigInt(Math.ceil(r)) : MAX_INT64 + 1n;
}

function decideResource(c: ResourceContext): ResourceDecision {
  // Whatever an agent reports, this stays a bigint.
  const bound = requestsOf(c.requests);
  const cap = minBig(maxBig(scale(c.raw, c.maxRatio, c.unit), c.raw), (MAX_INT64 / c.unit) * c.unit);
  c.requestsOverCap = bound > cap;
  // Up to the cap every bound pod counts; past it only what the API server bound and the kubelet admitted.
  const admitted = c.requestsTrusted ? (c.admitted === undefined ? bound : minBig(bound, requestsOf(c.admitted))) : 0n;
  const floor = maxBig(maxBig(c.raw, minBig(bound, cap)), admitted);
  if (c.noData) return resourceDecision(c, c.raw, 'no-data', floor, cap, undefined, undefined);
  if (!c.policy) return resourceDecision(c, floor, 'no-policy', floor, cap, undefined, undefined);
  if (c.stale) return resourceDecision(c, floor, 'stale', floor, cap, undefined, undefined);
  if (c.underPressure) return resourceDecision(c, floor, 'pressure', floor, cap, undefined, undefined);

  const usage = windowStatistic(c.window, c.from, c.field, c.policy.statistic);
  const h = headroom(Number(c.raw), c.requests ?? 0, usage, c.policy);
  const hRounded = Number.isFinite(h) ? (BigInt(Math.floor(h)) / c.unit) * c.unit : 0n;
  let granted = maxBig(floor, minBig(cap, hRounded));
  let which: Bound;
  if (granted === floor && minBig(cap, hRounded) <= floor) which = floor > c.raw ? 'floor-requests' : 'floor-raw';
  else which = hRounded > cap ? 'cap' : 'headroom';

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
  return resourceDecision(c, granted, which, floor, cap, usage, hRounded);
}

/** The window's point i shows CPU pressure under this policy. */
function cpuPressureAt(window: UsageWindow, i: number, p: ResourcePolicy): boolean {
  return window.get(i, COLUMN.cpuPressure) >= p.pressureThreshold;
}

/** The window's point i shows memory pressure: PSI, or a working set near capacity. */
function memoryPressureAt(window: UsageWindow, i: number, p: Policy['memory'], capacity: number): boolean {
  return window.get(i, COLUMN.memoryPressure) >= p.pressureThreshold || (capacity > 0 && window.get(i, COLUMN.memoryBytes) >= p.workingSetThreshold * capacity);
}

/** The newest point of the window shows pressure of either kind: the one check the status writer makes on every sample. */
export function pressureNow(window: UsageWindow, policy: Policy, capacityMemoryBytes: number): boolean {
  const last = window.length - 1;
  return last >= 0 && (cpuPressureAt(window, last, policy.cpu) || memoryPressureAt(window, last, policy.memory, capacityMemoryBytes));
}

// Two loops rather than one taking a predicate: decide() runs per review and per sample, and a closure per call is garbage.
function cpuPressureSince(window: UsageWindow, sinceMs: number, p: ResourcePolicy): boolean {
  for (let i = window.length - 1; i >= 0 && window.get(i, COLUMN.timestampMs) >= sinceMs; i--) if (cpuPressureAt(window, i, p)) return true;
  return false;
}

function memoryPressureSince(window: UsageWindow, sinceMs: number, p: Policy['memory'], capacity: number): boolean {
  for (let i = window.length - 1; i >= 0 && window.get(i, COLUMN.timestampMs) >= sinceMs; i--) if (memoryPressureAt(window, i, p, capacity)) return true;
  return false;
}

/** The window of a node with no usage: never added to. */
const NO_POINTS = new UsageWindow();

/**
 * The reason is only read where it is written down (the webhook's annotation,
 * describe, the full query view), but formatting it was a third of a
 * decision: it is built on first read, from values copied at decision time
 * (the caller's objects may change later). A getter on the class, so every
 * decision shares one shape.
 */
class ExplainedDecision implements Decision {
  #reason: string | undefined;
  readonly #facts: ExplainFacts;
  readonly #samples: number;

  constructor(
    readonly cpu: ResourceDecision,
    readonly memory: ResourceDecision,
    readonly policy: string | undefined,
    readonly dryRun: boolean,
    facts: ExplainFacts,
    samples: number,
  ) {
    this.#facts = facts;
    this.#samples = samples;
  }

  get reason(): string {
    return (this.#reason ??= explain(this.cpu, this.memory, this.#facts, this.#samples));
  }
}

export function decide(input: DecisionInput): Decision {
  const { raw, usage, policy } = input;
  const stale = usage !== undefined && policy !== undefined && usage.ageMs > policy.staleAfterMs;
  const trusted = input.boundRequests;
  const known = trusted !== undefined || usage?.requests.known === true;
  const window = usage?.window ?? NO_POINTS;
  const from = policy ? windowStart(window, policy.windowMs) : window.length;
  const samples = window.length - from;
  const calmFrom = (window.newestMs() ?? 0) - (policy?.calmPeriodMs ?? 0);
  const mem = policy?.memory;
  const memoryCapacity = usage?.capacityMemoryBytes ?? 0;
  const noData = usage === undefined || window.length === 0;
  const hysteresis = policy?.hysteresis ?? 0;
  const newestPodAgeMs = trusted?.newestPodAgeMs;
  const starting = policy !== undefined && newestPodAgeMs !== undefined && newestPodAgeMs < policy.startupGraceMs;
  const dryRun = policy?.mode === 'DryRun';

  const cpuMax = Math.min(policy?.cpu.maxRatio ?? 1, input.nodeMaxRatio?.cpu ?? Infinity);
  const memMax = Math.min(mem?.maxRatio ?? 1, input.nodeMaxRatio?.memory ?? Infinity);
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
    avoid: input.avoid?.cpuMillicores,
    policy: policy?.cpu,
    maxRatio: Math.max(1, cpuMax),
    window,
    from,
    field: 'cpuMillicores',
    underPressure: policy !== undefined && cpuPressureSince(window, calmFrom, policy.cpu),
    previous: input.previous?.cpuMillicores,
    requestsOverCap: false,
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
    avoid: input.avoid?.memoryBytes,
    policy: mem,
    maxRatio: Math.max(1, memMax),
    window,
    from,
    field: 'memoryBytes',
    underPressure: mem !== undefined && memoryPressureSince(window, calmFrom, mem, memoryCapacity),
    previous: input.previous?.memoryBytes,
    requestsOverCap: false,
  });
  // What the reason reads from the input, copied now: the caller's objects may change later.
  const facts: ExplainFacts = {
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
  };
  return new ExplainedDecision(cpu, memory, policy?.name, dryRun, facts, samples);
}

// ---------------------------------------------------------------- reason text

interface ExplainFacts {
  usage: { ageMs: number; requests: UsageInput['requests'] } | undefined;
  requestsTrusted: boolean;
  newestPodAgeMs: number | undefined;
  policy: Policy | undefined;
  nodeMaxRatio: DecisionInput['nodeMaxRatio'];
}

const fmtCpu = (m: bigint | number) => `${typeof m === 'number' ? Math.round(m) : m}m`;
function fmtMem(b: bigint | number): string {
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let v = Number(b);
  let i = 0;
  while (Math.abs(v) >= 1024 && i < units.length - 1) {
    v /= 1024;
    i += 1;
  }
  return `${Number.isInteger(v) ? v : v.toFixed(1)}${units[i]}`;
}

const BOUND_TEXT: Record<Bound, (d: ResourceDecision, maxRatio: number, requestsTrusted: boolean, facts: ExplainFacts) => string> = {
  headroom: () => 'headroom',
  cap: (_d, r) => `capped at ${r}x raw`,
  'floor-raw': () => 'floor at raw (no headroom above raw)',
  'floor-requests': (d, _r, trusted) =>
    !d.requestsOverCap
      ? 'floor at bound requests'
      : d.floor > d.cap
        ? 'floor at bound requests, above the cap'
        : trusted
          ? 'floor at the cap: the requests bound above it include pods the kubelet has not admitted'
          : 'floor at the cap: bound requests reported above it',
  hysteresis: () => 'held at the previous grant (rise within hysteresis)',
  starting: (_d, _r, _t, f) =>
    `held: a pod bound ${Math.round((f.newestPodAgeMs ?? 0) / 1000)}s ago may not show its usage yet (startupGrace ${Math.round((f.policy?.startupGraceMs ?? 0) / 1000)}s)`,
  pressure: () => 'pressure: floor until calm',
  stale: (d) => (d.floor > d.raw ? 'stale data: floor at bound requests' : 'stale data: raw'),
  'no-policy': () => 'no policy: floor',
  'no-data': () => 'no data',
};

function explainResource(name: 'cpu' | 'memory', d: ResourceDecision, input: ExplainFacts, fmt: (v: bigint | number) => string): string {
  const p = input.policy?.[name];
  const maxRatio = Math.min(p?.maxRatio ?? 1, input.nodeMaxRatio?.[name] ?? Infinity);
  const head = `${name} ${fmt(d.raw)}->${fmt(d.granted)}`;
  const moved = d.avoided === undefined ? '' : `; moved off ${fmt(d.avoided)}, which the kubelet left in place and may be its raw, so its next write says`;
  const bound = `${BOUND_TEXT[d.bound](d, maxRatio, input.requestsTrusted, input)}${moved}`;
  if (d.headroom === undefined || d.usage === undefined || !p || !input.usage) return `${head} (${bound})`;
  const r = input.usage.requests;
  const req = r.known ? fmt(name === 'cpu' ? r.cpuMillicores : r.memoryBytes) : 'unknown';
  return `${head} (${bound}; headroom ${fmt(d.headroom)} from ${p.statistic} usage ${fmt(d.usage)}, requests ${req}, target ${Math.round(p.targetUtilization * 100)}%)`;
}

function explain(cpu: ResourceDecision, memory: ResourceDecision, input: ExplainFacts, samples: number): string {
  const { usage, policy } = input;
  if (usage === undefined || cpu.bound === 'no-data') return 'no usage data for this node: allocatable left as the kubelet wrote it';
  const parts: string[] = [];
  if (!policy) parts.push('no valid OversellPolicy selects this node: no inflation');
  else parts.push(`policy ${policy.name}${policy.mode === 'DryRun' ? ' (DryRun: allocatable not changed)' : ''}`);
  if (policy && usage.ageMs > policy.staleAfterMs) {
    parts.push(`usage data is ${Math.round(usage.ageMs / 1000)}s old (staleAfter ${Math.round(policy.staleAfterMs / 1000)}s): no inflation`);
  }
  parts.push(explainResource('cpu', cpu, input, fmtCpu), explainResource('memory', memory, input, fmtMem));
  if (policy) parts.push(`${samples} samples in the ${Math.round(policy.windowMs / 1000)}s window`);
  return parts.join('; ');
}
