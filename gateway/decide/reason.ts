// The reason a decision gives, one line an operator reads in the node's
// oversell.io/reason annotation, in describe and in the query API.
import { CPU_BUDGET_BURN } from './pool-harm.js';
import { isFresh, type DecidedBy, type Decision, type DecisionInput, type Policy, type ResourceDecision, type UsageInput } from './decision-types.js';


export interface ExplainFacts {
  /** How long the node's load history spans; undefined: none kept. */
  historySpanMs: number | undefined;
  usage: { ageMs: number; requests: UsageInput['requests'] } | undefined;
  requestsTrusted: boolean;
  newestPodAgeMs: number | undefined;
  policy: Policy | undefined;
  nodeMaxRatio: DecisionInput['nodeMaxRatio'];
  /** The caps while the node is learning (Infinity: none). */
  learningCaps: { cpu: number; memory: number };
  /** The pool's memory budget is spent (DecisionInput.poolHarm): memory held at 1x. */
  memoryBudgetSpent?: { overloads: number; untilMs: number } | undefined;
  /** The pool's CPU budget is spent (DecisionInput.poolHarm): CPU held at 1x. The last hour's share over capacity, and the policy's overShare. */
  cpuBudgetSpent?: { share: number; budget: number } | undefined;
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

const DECIDED_BY_TEXT: Record<DecidedBy, (d: ResourceDecision, maxRatio: number, requestsTrusted: boolean, facts: ExplainFacts) => string> = {
  headroom: () => 'headroom',
  budget: () => 'risk budget',
  cap: (d, r) => (d.exclusive ? `capped at ${r}x the shared CPUs` : `capped at ${r}x raw`),
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
  learning: (_d, _r, _t, f) =>
    `learning the node: floor until its load history spans ${hours(f.policy?.history.minSpanMs)} (${hours(f.historySpanMs)} so far)`,
  pressure: () => 'pressure: floor until calm',
  stale: (d) => (d.floor > d.raw ? 'stale data: floor at bound requests' : 'stale data: raw'),
  'no-policy': () => 'no policy: floor',
  'no-data': () => 'no data',
};

function explainResource(name: 'cpu' | 'memory', d: ResourceDecision, input: ExplainFacts, fmt: (v: bigint | number) => string): string {
  const p = input.policy?.[name];
  const spent = name === 'memory' ? input.memoryBudgetSpent : undefined;
  const cpuSpent = name === 'cpu' ? input.cpuBudgetSpent : undefined;
  const maxRatio = spent || cpuSpent ? 1 : Math.min(p?.maxRatio ?? 1, input.nodeMaxRatio?.[name] ?? Infinity, input.learningCaps[name]);
  const head = `${name} ${fmt(d.raw)}->${fmt(d.granted)}`;
  const moved =
    d.avoided === undefined ? ''
    : d.avoided === d.raw ? '; one unit above raw, so the kubelet keeps writing every 10 s and a rise lands at its next write'
    : `; moved off ${fmt(d.avoided)}, which the kubelet left in place and may be its raw, so its next write says`;
  const learningCapped = d.decidedBy === 'cap' && input.learningCaps[name] === maxRatio && maxRatio < (p?.maxRatio ?? 1);
  const exclusive = d.exclusive
    ? `; static CPU manager: ${fmt(d.exclusive)} held exclusively is not inflated, only the shared ${fmt(d.raw - d.exclusive)} (cap ${fmt(d.cap)} = ${fmt(d.raw - d.exclusive)} x ${maxRatio} + ${fmt(d.exclusive)})`
    : '';
  const budget = spent
    ? `; the pool's risk budget is spent: ${spent.overloads} pod(s) evicted by the kubelet or OOM-killed for lack of memory on its nodes in the last hour, so no memory above the floor until an hour without one (${new Date(spent.untilMs).toISOString()} if none comes)`
    : '';
  const cpuBudget = cpuSpent
    ? `; the pool's CPU risk budget is spent: its nodes had CPU demand over capacity ${pct(cpuSpent.share)} of their time in the last hour, more than ${CPU_BUDGET_BURN}x its ${pct(cpuSpent.budget)}, so no CPU above the floor until the hour's share falls back`
    : '';
  const bound = `${DECIDED_BY_TEXT[d.decidedBy](d, maxRatio, input.requestsTrusted, input)}${learningCapped ? ' while learning (history.learningMaxRatio)' : ''}${moved}${exclusive}${budget}${cpuBudget}`;
  if (d.headroom === undefined || d.usage === undefined || !p || !input.usage) return `${head} (${bound})`;
  const r = input.usage.requests;
  const req = r.known ? fmt(name === 'cpu' ? r.cpuMillicores : r.memoryBytes) : 'unknown';
  if (d.loadFactor !== undefined) {
    const b = p.riskBudget;
    const over = b.overShare > 0 ? `exceeded ${pct(b.overShare)} of the time` : 'largest';
    const minSpanMs = input.policy?.history.minSpanMs ?? 0;
    const learning = (input.historySpanMs ?? 0) < minSpanMs ? `; learning: below the targets, which decide until the history spans ${hours(minSpanMs)}` : '';
    const pool = d.newLoadFactor !== undefined ? `; pods it lets in at the pool's typical peak ${d.newLoadFactor.toFixed(3)}` : '';
    return `${head} (${bound}; headroom ${fmt(d.headroom)}: predicted peak at ${d.loadFactor.toFixed(3)} of requests ${req} (history ${hours(input.historySpanMs)}, ${over}; ${p.statistic} usage now ${fmt(d.usage)})${pool}, margin ${pct(b.margin)}${learning})`;
  }
  const why = !p.riskBudget.enabled || !input.policy ? '' : !r.known ? '; the risk budget needs requests'
    : `; the risk budget once the load history spans ${hours(input.policy.history.minSpanMs)} (${hours(input.historySpanMs)} so far; until then it may only lower them)`;
  return `${head} (${bound}; headroom ${fmt(d.headroom)} from ${p.statistic} usage ${fmt(d.usage)}, requests ${req}, target ${Math.round(p.targetUtilization * 100)}%${why})`;
}

/**
 * Data older than this is named in the reason: a steady node's agent sends at
 * least every 20 s by default (summaries; batches every 5 s), so older data
 * means slowed agents (load shedding), a late message or a lost agent.
 */
export const AGE_SHOWN_MS = 25_000;

const pct = (share: number) => `${Number((share * 100).toPrecision(3))}%`;
const hours = (ms: number | undefined) => `${Number(((ms ?? 0) / 3_600_000).toFixed(1))}h`;

function explain(cpu: ResourceDecision, memory: ResourceDecision, input: ExplainFacts, samples: number): string {
  const { usage, policy } = input;
  if (usage === undefined || cpu.decidedBy === 'no-data') return 'no usage data for this node: allocatable left as the kubelet wrote it';
  const parts: string[] = [];
  if (!policy) parts.push('no valid OversellPolicy selects this node: no inflation');
  else parts.push(`policy ${policy.name}${policy.mode === 'DryRun' ? ' (DryRun: allocatable not changed)' : ''}`);
  if (policy && !isFresh(usage.ageMs, policy.staleAfterMs)) {
    parts.push(`usage data is ${Math.round(usage.ageMs / 1000)}s old (staleAfter ${Math.round(policy.staleAfterMs / 1000)}s): no inflation`);
  } else if (usage.ageMs > AGE_SHOWN_MS) {
    parts.push(`usage ${Math.round(usage.ageMs / 1000)}s old`);
  }
  parts.push(explainResource('cpu', cpu, input, fmtCpu), explainResource('memory', memory, input, fmtMem));
  if (policy) parts.push(`${samples} samples in the ${Math.round(policy.windowMs / 1000)}s window`);
  return parts.join('; ');
}


/**
 * The reason is only read where it is written down (the webhook's annotation,
 * describe, the full query view), but formatting it was a third of a
 * decision: it is built on first read, from values copied at decision time
 * (the caller's objects may change later). A getter on the class, so every
 * decision shares one shape.
 */
export class ExplainedDecision implements Decision {
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
