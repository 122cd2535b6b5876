// The decision's inputs and outputs: what policy.ts decides from and returns,
// and what its readers (webhook, status writer, query API, simulator) hold.
import type { UsageWindow } from '../../lib/usage/usage-window.js';
import type { Statistic } from '../../lib/usage/usage-stats.js';
import type { AgentSummary, WindowSummary } from '../../lib/usage/summary-plan.js';
import type { LoadHistoryView } from './load-history.js';

/** The largest value a Kubernetes quantity holds in its unit: no grant goes past it. */
import type { CpuManagerPolicy, ProtectPolicy } from './tiers.js';

export type { WindowSummary } from '../../lib/usage/summary-plan.js';

export const MAX_INT64 = 2n ** 63n - 1n;

/**
 * Usage this old may still inflate under a policy with this staleAfter. The one staleness rule: the decision, its
 * reason, the status writer's hold-back and nudge, the summary table and the metrics API all ask it, so they cannot
 * disagree at the edge.
 */
export const isFresh = (ageMs: number, staleAfterMs: number): boolean => ageMs <= staleAfterMs;

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
  /** Grant from the node's predicted peak instead of the target, once its history is long enough (Policy.history). */
  riskBudget: RiskBudget;
}

/**
 * The risk an operator accepts, instead of a target: the grant is what keeps
 * the node's predicted peak (requests x the load factor its history exceeded
 * for only `overShare` of its time) within raw allocatable less `margin`.
 */
export interface RiskBudget {
  enabled: boolean;
  /** Share of node-time the predicted load factor may be exceeded; 0: the history's largest. */
  overShare: number;
  /** Share of raw allocatable kept free at the predicted peak. */
  margin: number;
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
  /**
   * How long a node's load history must span before its risk budget is used,
   * and what decides until then: the targets (Targets), or nothing above the
   * floor (Floor: a night is not mistaken for the peak). While the targets
   * learn, the caps are at most learningMaxRatio: pods placed then stay
   * through a peak the history has not seen.
   */
  history: { minSpanMs: number; learning: 'Targets' | 'Floor'; learningMaxRatio: { cpu: number; memory: number } };
  /** Which pods never depend on oversold capacity and are never relieved (tiers.ts). */
  protect: ProtectPolicy;
  /** Relief (relief.ts): off, or the lines and the per-node rate; a DryRun policy only reports it. */
  relief: ReliefSpec;
}

export interface ReliefSpec {
  enabled: boolean;
  /** Working set over capacity past which unprotected pods are evicted. */
  memoryLine: number;
  /** Relief takes pods until the working set is under this share of capacity. */
  calmLine: number;
  /** At most this many evictions per node per minute. */
  perNodePerMinute: number;
}


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

/**
 * A node's usage as the decision reads it: the window of points the gateway
 * keeps (at least the policy's window and calm period), or its summary under
 * the policy (window-summary.ts), computed wherever the points are.
 */
export type UsageInput = UsageFacts & (
  | {
    window: UsageWindow;
    summary?: undefined;
    /**
     * The newest sample's summaries from its agent (Sample.summaries): the one
     * made by the policy's plan and ending at the window's newest point is read
     * instead of the window, which then holds only the samples sent.
     */
    agentSummaries?: readonly AgentSummary[];
    planned?: undefined;
  }
  | { summary: WindowSummary; window?: undefined; agentSummaries?: undefined; planned?: undefined }
  /**
   * The window summarized under each plan where its points are (the replica
   * the node's agent streams to, shard/node-inputs-sender.ts): the decision
   * reads the one made by its policy's plan, and no usage without it.
   */
  | { planned: readonly AgentSummary[]; window?: undefined; summary?: undefined; agentSummaries?: undefined }
);


export interface UsageFacts {
  /** Gateway now - when the newest sample arrived. */
  ageMs: number;
  capacityMemoryBytes: number;
  requests: { cpuMillicores: number; memoryBytes: number; known: boolean };
  /** The node's load factor over hours (load-history.ts); undefined: none kept, targets only. */
  history?: LoadHistoryView | undefined;
  /**
   * The kubelet's CPU manager as the node's newest sample says; undefined:
   * unknown (an agent that could not tell, or one older than the field), CPU
   * decided as on any node. Under static, the exclusive CPUs are not inflated.
   */
  cpuManager?: CpuManagerInput | undefined;
}

/** A known CPU manager: its policy and, under static, the CPUs held exclusively (whole CPUs, as the agent counts them). */
export interface CpuManagerInput {
  policy: Exclude<CpuManagerPolicy, 'unknown'>;
  exclusiveCpus: number;
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
  /**
   * Harm on the nodes of this node's pool in the last hour (pool-harm.ts):
   * pods evicted by the kubelet or OOM-killed without a memory limit (the
   * memory budget allows none: with any, the pool's memory grants stop at
   * the floor until an hour passes without one); node-time observed and with
   * CPU demand over capacity (past CPU_BUDGET_BURN times cpu.riskBudget.overShare
   * of it, the pool's CPU grants stop at the floor). CPU fields absent: none.
   */
  poolHarm?: { memoryOverloads: number; untilMs: number; cpuObservedSeconds?: number; cpuOverSeconds?: number } | undefined;
  /** Values allocatable must not be written at (PreviousGrant.unconfirmed): moved one unit off them, within floor and cap. */
  avoid?: Partial<Allocatable> | undefined;
  /**
   * The node's pool's typical predicted peak (pool-load.ts): under a risk
   * budget the pods a rise lets in count at the larger of it and the node's
   * own. Undefined: the node's own only.
   */
  poolLoad?: PoolLoad | undefined;
}

/** A pool's typical predicted peak load factor per resource: the median over its nodes with a history as long as the policy asks (pool-load.ts). */
export interface PoolLoad {
  cpu: number;
  memory: number;
  /** Nodes it is the median of. */
  nodes: number;
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
  /**
   * Of those, the pods being deleted (an eviction, relief's among them): while
   * the node is under pressure they do not hold its floor up, so the room they
   * leave is not handed straight back to their replacements.
   */
  leaving?: { cpuMillicores: number; memoryBytes: number } | undefined;
}

/** What set a resource's value: the limit that won, or why there was none (no policy, no data, stale data, pressure). */
export type DecidedBy =
  | 'headroom' | 'budget' | 'cap' | 'floor-raw' | 'floor-requests' | 'hysteresis' | 'starting'
  | 'learning' | 'pressure' | 'stale' | 'no-policy' | 'no-data';

export interface ResourceDecision {
  raw: bigint;
  /** What the policy grants (in DryRun: what it would grant). */
  granted: bigint;
  /** What goes into status.allocatable: granted, or the floor in DryRun. */
  applied: bigint;
  decidedBy: DecidedBy;
  floor: bigint;
  cap: bigint;
  /** Bound requests are above the cap: the floor is theirs (from the API server) or stops at the cap (from the agent). */
  requestsOverCap: boolean;
  /** The window statistic the headroom was computed from. */
  usage: number | undefined;
  headroom: bigint | undefined;
  /** Under a risk budget: the load factor the node's peak was predicted at; undefined under the target. */
  loadFactor: number | undefined;
  /** Under the budget, what the pods a rise lets in were counted at: the pool's typical peak, when above loadFactor; else undefined. */
  newLoadFactor?: number | undefined;
  /** The value allocatable was moved one unit off (DecisionInput.avoid); undefined when it was not. */
  avoided: bigint | undefined;
  /** CPU held exclusively under the static CPU manager, in the resource's unit, kept out of the ratio (0 or absent: none; memory never has any). */
  exclusive?: bigint;
}

export interface Decision {
  cpu: ResourceDecision;
  memory: ResourceDecision;
  policy: string | undefined;
  dryRun: boolean;
  /** One line an operator can read in the node annotation. */
  reason: string;
}
