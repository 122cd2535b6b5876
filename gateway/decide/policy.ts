// The oversell decision: a pure function from (raw allocatable, usage, bound
// requests, policy) to (allocatable, reason). No I/O, no clock: the caller passes
// the data age.
//
// Headroom follows Katalyst's formula. With A = raw allocatable, R = requests
// bound to the node, U = usage (window statistic), T = target utilization and
// L = clamp(U / R, minLoadFactor, 1):
//
//     headroom = R + (A*T - U) / L
//
// i.e. if new pods use their requests in the same proportion L as the pods
// already there, filling the node up to `headroom` brings usage to A*T.
// The grant is then bounded by construction:
//
//     granted = max(floor, min(cap, headroom)),  floor = max(A, R),  cap = A * maxRatio
//
// so it never drops below what the kubelet computed nor below what is already
// bound (pods would be rejected on a kubelet restart), and never exceeds the cap
// unless bound requests already do.

export interface ResourcePolicy {
  /** Hard ceiling on granted / raw. */
  maxRatio: number;
  /** Share of raw allocatable that real usage may reach once the node is filled. */
  targetUtilization: number;
  /** Lower clamp of usage/requests, so near-idle pods cannot justify unbounded grants. */
  minLoadFactor: number;
}

export interface Policy {
  cpu: ResourcePolicy;
  memory: ResourcePolicy;
  /** Usage older than this (gateway clock) never inflates. */
  staleAfterMs: number;
}

export const DEFAULT_POLICY: Policy = {
  cpu: { maxRatio: 2.0, targetUtilization: 0.6, minLoadFactor: 0.1 },
  memory: { maxRatio: 1.25, targetUtilization: 0.8, minLoadFactor: 0.1 },
  staleAfterMs: 40_000,
};

export interface Allocatable {
  cpuMillicores: bigint;
  memoryBytes: bigint;
}

export interface UsageInput {
  /** Gateway now - when the newest sample arrived. */
  ageMs: number;
  samples: number;
  spanMs: number;
  cpuMillicores: number;
  memoryBytes: number;
  requests: { cpuMillicores: number; memoryBytes: number; known: boolean };
}

export type Bound = 'headroom' | 'cap' | 'floor-raw' | 'floor-requests' | 'stale' | 'no-data';

export interface ResourceDecision {
  raw: bigint;
  granted: bigint;
  bound: Bound;
  floor: bigint;
  cap: bigint;
  /** Undefined when no headroom was computed (stale or no data). */
  headroom: bigint | undefined;
}

export interface Decision {
  cpu: ResourceDecision;
  memory: ResourceDecision;
  /** One line an operator can read in the node annotation. */
  reason: string;
}

const KI = 1024n;
const maxBig = (a: bigint, b: bigint) => (a > b ? a : b);
const minBig = (a: bigint, b: bigint) => (a < b ? a : b);

/** raw * ratio, exact to a millionth of the ratio, rounded down to the resource's unit. */
function scale(raw: bigint, ratio: number, unit: bigint): bigint {
  const v = (raw * BigInt(Math.round(ratio * 1e6))) / 1_000_000n;
  return (v / unit) * unit;
}

/** Headroom in the resource's unit, rounded down; negative when the node is already past target. */
export function headroom(raw: number, requests: number, usage: number, p: ResourcePolicy): number {
  const load = requests > 0 ? Math.min(1, Math.max(p.minLoadFactor, usage / requests)) : 1;
  return requests + (raw * p.targetUtilization - usage) / load;
}

function decideResource(
  raw: bigint,
  usage: number | undefined,
  requests: number | undefined,
  stale: boolean,
  p: ResourcePolicy,
  unit: bigint,
): ResourceDecision {
  const bound = requests === undefined ? 0n : BigInt(Math.ceil(requests));
  const floor = maxBig(raw, bound);
  const cap = maxBig(scale(raw, p.maxRatio, unit), raw);
  if (usage === undefined) return { raw, granted: raw, bound: 'no-data', floor, cap, headroom: undefined };
  if (stale) return { raw, granted: floor, bound: 'stale', floor, cap, headroom: undefined };
  const h = headroom(Number(raw), requests ?? 0, usage, p);
  const hRounded = Number.isFinite(h) ? (BigInt(Math.floor(h)) / unit) * unit : 0n;
  const granted = maxBig(floor, minBig(cap, hRounded));
  let which: Bound;
  if (granted === floor && minBig(cap, hRounded) <= floor) which = bound > raw ? 'floor-requests' : 'floor-raw';
  else which = hRounded > cap ? 'cap' : 'headroom';
  return { raw, granted, bound: which, floor, cap, headroom: hRounded };
}

export function decide(raw: Allocatable, usage: UsageInput | undefined, policy: Policy): Decision {
  const stale = usage !== undefined && usage.ageMs > policy.staleAfterMs;
  const known = usage?.requests.known === true;
  const cpu = decideResource(
    raw.cpuMillicores,
    usage?.cpuMillicores,
    known ? usage.requests.cpuMillicores : undefined,
    stale,
    policy.cpu,
    1n,
  );
  const memory = decideResource(
    raw.memoryBytes,
    usage?.memoryBytes,
    known ? usage.requests.memoryBytes : undefined,
    stale,
    policy.memory,
    KI,
  );
  return { cpu, memory, reason: explain(cpu, memory, usage, policy) };
}

// ---------------------------------------------------------------- reason text

const fmtCpu = (m: bigint | number) => `${m}m`;
function fmtMem(b: bigint | number): string {
  const n = Number(b);
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let i = 0;
  let v = n;
  while (Math.abs(v) >= 1024 && i < units.length - 1) {
    v /= 1024;
    i += 1;
  }
  return `${Number.isInteger(v) ? v : v.toFixed(1)}${units[i]}`;
}

function explainResource(
  name: 'cpu' | 'memory',
  d: ResourceDecision,
  usage: UsageInput,
  p: ResourcePolicy,
  fmt: (v: bigint | number) => string,
  statistic: string,
): string {
  const head = `${name} ${fmt(d.raw)}->${fmt(d.granted)}`;
  const bound =
    d.bound === 'cap'
      ? `capped at ${p.maxRatio}x raw`
      : d.bound === 'floor-raw'
        ? 'floor at raw (no headroom above raw)'
        : d.bound === 'floor-requests'
          ? 'floor at bound requests'
          : d.bound === 'stale'
            ? d.floor > d.raw ? 'stale data: floor at bound requests' : 'stale data: raw'
            : 'headroom';
  if (d.headroom === undefined) return `${head} (${bound})`;
  const used = name === 'cpu' ? usage.cpuMillicores : usage.memoryBytes;
  const req = usage.requests.known ? fmt(name === 'cpu' ? usage.requests.cpuMillicores : usage.requests.memoryBytes) : 'unknown';
  return `${head} (${bound}; headroom ${fmt(d.headroom)} from ${statistic} usage ${fmt(used)}, requests ${req}, target ${Math.round(p.targetUtilization * 100)}%)`;
}

export function explain(cpu: ResourceDecision, memory: ResourceDecision, usage: UsageInput | undefined, policy: Policy): string {
  if (usage === undefined) return 'no usage data for this node: allocatable left as the kubelet wrote it';
  const window = `${usage.samples} samples over ${Math.round(usage.spanMs / 1000)}s`;
  if (usage.ageMs > policy.staleAfterMs) {
    return `usage data is ${Math.round(usage.ageMs / 1000)}s old (staleAfter ${Math.round(policy.staleAfterMs / 1000)}s): no inflation; ` +
      `${explainResource('cpu', cpu, usage, policy.cpu, fmtCpu, 'p95')}; ${explainResource('memory', memory, usage, policy.memory, fmtMem, 'max')}`;
  }
  return `${explainResource('cpu', cpu, usage, policy.cpu, fmtCpu, 'p95')}; ` +
    `${explainResource('memory', memory, usage, policy.memory, fmtMem, 'max')}; window ${window}`;
}
