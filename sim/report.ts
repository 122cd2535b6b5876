// The report of a simulation: the checks against issue 31's targets and issue
// 45's (who pays when the forecast is wrong), the markdown page with its SVG
// charts, and the JSON for tools. Pure: files are returned as text, the CLI
// writes them.
import type { PublicTraceSummary } from './public-replay.js';
import type { Scenario } from './scenario.js';
import type { PolicyResult, SimulationResult } from './simulate.js';
import { lineChart, scatter, type Series } from './svg.js';
import { UTILISATION_BUCKETS } from './cluster.js';

export interface Check {
  target: string;
  met: boolean;
  detail: string;
}

export interface Report {
  main: SimulationResult;
  /** The same scenario with usage stepped up mid-run; undefined when not run. */
  busier: SimulationResult | undefined;
  checks: Check[];
  /** Issue 45's targets: who pays, by tier. */
  harm: Check[];
}

const FIXED_COLORS: Record<string, string> = {
  none: '#7f7f7f', static: '#ff7f0e', seaiii: '#8c564b', katalyst: '#9467bd', koordinator: '#e377c2', crane: '#98df8a', 'peak-predictor': '#ff9896', limit: '#111111',
};
const OVERSELL_COLORS = ['#1f77b4', '#17becf', '#2ca02c', '#d62728', '#bcbd22'];

function colors(policies: PolicyResult[]): Map<string, string> {
  let k = 0;
  return new Map(policies.map((p) => [p.name, FIXED_COLORS[p.kind] ?? OVERSELL_COLORS[k++ % OVERSELL_COLORS.length]!]));
}

/** The default policy's row, or the first OversellPolicy's. */
export function oversellOf(r: SimulationResult): PolicyResult {
  return r.policies.find((p) => p.name === 'oversell') ?? r.policies.find((p) => p.kind === 'oversell')!;
}

const pct = (x: number) => `${(x * 100).toFixed(1)} %`;
const gain = (x: number | null) => {
  if (x === null) return '-';
  const v = Math.round((x - 1) * 1000) / 10;
  return `${v >= 0 ? '+' : ''}${(v === 0 ? 0 : v).toFixed(1)} %`;
};
const nodeHours = (s: number) => (s === 0 ? '0' : (s / 3600).toFixed(s < 360 ? 2 : 1));

/** gainCaptured as the page says it: a share, or why there is none. */
export function captured(p: PolicyResult): string {
  return p.gainCaptured === null ? 'no share: the limit places no more than none, so the reference degenerates' : pct(p.gainCaptured);
}

/** The share of the limit's gain issue 31 asks of oversell, and its ceiling on CPU demand over capacity. */
export const TARGET_GAIN = 0.6;
export const TARGET_CPU_OVER = 0.001;

/** The public trace a run replayed, if it did (`oversell record`'s traces have polls instead). */
export function publicTraceOf(r: SimulationResult): PublicTraceSummary | undefined {
  return r.trace && 'format' in r.trace ? r.trace : undefined;
}

/** What the page says instead of a comparison when the trace does not give its pods' requests. */
export const REQUESTS_UNKNOWN =
  'Requests are unknown: this trace does not say what its pods request, so the policies are not compared on it (no density, no share of the limit\'s gain, no targets). The figures below are the recorded load on the trace\'s machines.';

export function checks(main: SimulationResult, busier: SimulationResult | undefined): Check[] {
  if (publicTraceOf(main)?.requestsKnown === false) return [];
  const o = oversellOf(main);
  const note = main.demand === 'saturating' ? '' : ' (this run: the scenario\'s own demand; the target is set for --demand saturating)';
  const out: Check[] = [
    {
      target: `${o.name} captures at least ${pct(TARGET_GAIN)} of the physical limit's gain over none, with 0 pods hit by memory overload, CPU demand over capacity at most ${pct(TARGET_CPU_OVER)} of node-time and 0 node-seconds below bound requests`,
      met:
        o.gainCaptured !== null && o.gainCaptured >= TARGET_GAIN && o.podsHitByMemoryOverload === 0 && o.cpuOverCapacityShare <= TARGET_CPU_OVER && o.belowRequestsNodeSeconds === 0,
      detail: `${captured(o)} of the limit's gain; ${o.podsHitByMemoryOverload} pods hit; CPU over capacity ${(o.cpuOverCapacityShare * 100).toFixed(3)} % of node-time; ${nodeHours(o.belowRequestsNodeSeconds)} node-hours below requests${note}`,
    },
  ];
  const formulas = main.policies.filter((p) => p.kind !== 'none' && p.kind !== 'limit' && p.kind !== 'oversell');
  const denser = formulas.filter((p) => p.podsPlaced >= o.podsPlaced);
  // Zero against zero is no risk either way; otherwise oversell must carry strictly less.
  const worse = denser.filter((p) => p.riskNodeSeconds <= o.riskNodeSeconds && o.riskNodeSeconds > 0);
  out.push({
    target: `at equal or higher density, fewer risk node-seconds than every other formula`,
    met: worse.length === 0,
    detail:
      denser.length === 0
        ? `no other formula placed as many pods as ${o.name}`
        : denser.map((p) => `${p.name}: ${gain(p.densityVsNone)} pods, ${nodeHours(p.riskNodeSeconds)} risk node-hours against ${nodeHours(o.riskNodeSeconds)}`).join('; '),
  });
  if (busier) {
    const bo = oversellOf(busier);
    const bs = busier.policies.find((p) => p.kind === 'static')!;
    out.push({
      target: `busier than its history: ${bo.name} costs no pod a memory-overload hit`,
      met: bo.podsHitByMemoryOverload === 0,
      detail: `${bo.name} ${bo.podsHitByMemoryOverload} pods hit (static ${bs.podsHitByMemoryOverload})`,
    });
  }
  return out;
}

/** Who was hit, by tier, as the page says it. */
export function whoPaid(p: PolicyResult): string {
  const kubelet = p.podsHitByMemoryOverload - p.podsOomKilled;
  const relieved = p.kind === 'oversell' ? `; ${p.podsRelieved} pods relieved by oversell (${p.protectedPodsRelieved} of them protected)` : '';
  return `${p.protectedPodsHit} protected pods hit${relieved}; ${p.podsOomKilled} OOM-killed and ${kubelet} evicted by the kubelet`;
}

/**
 * Issue 45's targets: busier than its history, the default policy hits no
 * protected pod and leaves the kernel and the kubelet nothing to do, every
 * relief eviction is of an unprotected pod and counted; and the default day
 * still captures TARGET_GAIN of the limit's gain with no protected pod hit.
 */
export function harmChecks(main: SimulationResult, busier: SimulationResult | undefined): Check[] {
  if (publicTraceOf(main)?.requestsKnown === false) return [];
  const o = oversellOf(main);
  const out: Check[] = [];
  if (busier) {
    const bo = oversellOf(busier);
    const step = busier.scenario.usage.step;
    const when = step ? `busier than its history (usage x${step.factor} from hour ${step.atHour})` : 'busier than its history';
    const others = busier.policies.filter((p) => p.kind === 'static' || p.kind === 'limit').map((p) => `${p.name}: ${p.protectedPodsHit} protected, ${p.podsHitByMemoryOverload} by the kernel or the kubelet`);
    out.push(
      {
        target: `${when}, ${bo.name}: 0 protected pods hit`,
        met: bo.protectedPodsHit === 0,
        detail: `${bo.protectedPodsHit} protected pods hit (${others.join('; ')})`,
      },
      {
        target: `${when}, ${bo.name}: 0 pods OOM-killed or evicted by the kubelet`,
        met: bo.podsHitByMemoryOverload === 0,
        detail: `${bo.podsOomKilled} OOM-killed, ${bo.podsHitByMemoryOverload - bo.podsOomKilled} evicted by the kubelet, ${nodeHours(bo.memoryOverloadNodeSeconds)} node-hours of memory overload`,
      },
      {
        target: `${when}, ${bo.name}: every relief eviction an unprotected pod, counted`,
        met: bo.protectedPodsRelieved === 0 && o.protectedPodsRelieved === 0,
        detail: `${bo.podsRelieved} pods relieved (${bo.protectedPodsRelieved} protected) in ${nodeHours(bo.reliefNodeSeconds)} node-hours, counted as risk; the default day ${o.podsRelieved} (${o.protectedPodsRelieved} protected)`,
      },
    );
  }
  out.push({
    target: `the default day, ${o.name}: at least ${pct(TARGET_GAIN)} of the physical limit's gain over none with 0 protected pods hit`,
    met: o.gainCaptured !== null && o.gainCaptured >= TARGET_GAIN && o.protectedPodsHit === 0,
    detail: `${captured(o)} of the limit's gain; ${whoPaid(o)}`,
  });
  return out;
}

/** The scenario with usage times `factor` from half-way through: a cluster busier than the history its grants came from. */
export function busierScenario(s: Scenario, factor: number): Scenario {
  return { ...s, usage: { ...s.usage, step: { atHour: s.hours / 2, factor, rampMinutes: 0 } } };
}

export function buildReport(main: SimulationResult, busier: SimulationResult | undefined): Report {
  return { main, busier, checks: checks(main, busier), harm: harmChecks(main, busier) };
}

/** What --output json prints: every figure, series included. */
export function reportJson(r: Report): string {
  return JSON.stringify({ ...r.main, checks: r.checks, harmChecks: r.harm, busier: r.busier && { step: r.busier.scenario.usage.step, policies: r.busier.policies } }, null, 2) + '\n';
}

export const CHARTS = {
  placed: 'outcome/pods-placed.svg',
  riskGain: 'outcome/risk-gain.svg',
  cpu: 'outcome/utilisation-cpu.svg',
  memory: 'outcome/utilisation-memory.svg',
} as const;

export function charts(r: Report): Record<(typeof CHARTS)[keyof typeof CHARTS], string> {
  const m = r.main;
  const color = colors(m.policies);
  const hours = (i: number) => (i * m.seriesEverySeconds) / 3600;
  const series = (pick: (p: PolicyResult) => number[]): Series[] =>
    m.policies.map((p) => ({ name: p.name, color: color.get(p.name)!, dashed: p.kind === 'limit', points: pick(p).map((v, i) => [hours(i), v] as [number, number]) }));
  const share = (counts: number[]) => {
    const total = counts.reduce((a, b) => a + b, 0) || 1;
    return counts.map((c, i) => [i * 10 + 5, (100 * c) / total] as [number, number]);
  };
  const distribution = (resource: 'cpu' | 'memory'): Series[] =>
    m.policies.map((p) => ({ name: p.name, color: color.get(p.name)!, dashed: p.kind === 'limit', points: share(p.utilisation[resource]) }));
  const last = `${(UTILISATION_BUCKETS - 1) * 10}`;
  return {
    [CHARTS.placed]: lineChart({ title: 'Pods running over the day', xLabel: 'hour', yLabel: 'pods running' }, series((p) => p.series.placed)),
    [CHARTS.riskGain]: scatter(
      { title: 'Risk against gain', xLabel: '% more pods running than without oversell', yLabel: 'risk node-seconds (log scale)' },
      m.policies.map((p) => ({ name: p.name, color: color.get(p.name)!, x: ((p.densityVsNone ?? 1) - 1) * 100, y: p.riskNodeSeconds })),
    ),
    [CHARTS.cpu]: lineChart({ title: `Node CPU usage / capacity (last bucket: ${last} % and over)`, xLabel: 'CPU usage, % of capacity', yLabel: '% of node-time' }, distribution('cpu'), 0),
    [CHARTS.memory]: lineChart({ title: `Node memory usage / capacity (last bucket: ${last} % and over)`, xLabel: 'memory usage, % of capacity', yLabel: '% of node-time' }, distribution('memory'), 0),
  };
}

function table(policies: PolicyResult[]): string[] {
  const needed = policies.some((p) => p.nodesNeeded !== undefined);
  const rows = [
    `| policy |${needed ? ' nodes needed |' : ''} pods running (mean) | vs none | of the limit's gain | pending (mean) | CPU slack | memory slack | pods hit by memory overload (OOM-killed) | protected pods hit | pods relieved | CPU over capacity (node-h) | over target (node-h) | below requests (node-h) | risk (node-h) | allocatable changes / node-h |`,
    `|---|${needed ? '--:|' : ''}--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|`,
  ];
  for (const p of policies) {
    const nodes = needed ? ` ${p.nodesNeeded ?? 'more than the search tried'} |` : '';
    rows.push(
      `| ${p.name} |${nodes} ${p.podsPlaced.toFixed(1)} | ${gain(p.densityVsNone)} | ${p.gainCaptured === null ? '-' : pct(p.gainCaptured)} | ${p.podsPending.toFixed(1)} | ${pct(p.cpuSlack)} | ${pct(p.memorySlack)} | ${p.podsHitByMemoryOverload} (${p.podsOomKilled}) | ${p.protectedPodsHit} | ${p.podsRelieved} | ${nodeHours(p.cpuOverCapacityNodeSeconds)} | ${nodeHours(p.overTargetNodeSeconds)} | ${nodeHours(p.belowRequestsNodeSeconds)} | ${nodeHours(p.riskNodeSeconds)} | ${p.allocatableChangesPerNodeHour.toFixed(1)} |`,
    );
  }
  return rows;
}

/** The page's lead when nodes needed were searched: what oversell saves against none. */
function nodesSaved(r: SimulationResult, o: PolicyResult): string[] {
  const none = r.policies[0]!;
  if (!r.nodesNeeded || none.nodesNeeded === undefined) return [];
  const limit = r.policies.find((p) => p.kind === 'limit');
  const said = (p: PolicyResult | undefined) => (p?.nodesNeeded == null ? `more than ${r.nodesNeeded!.maxNodes}` : `${p.nodesNeeded}`);
  const saved = none.nodesNeeded !== null && o.nodesNeeded != null ? none.nodesNeeded - o.nodesNeeded : undefined;
  return [
    `**Nodes saved: ${saved === undefined ? 'unknown' : saved}.** For the scenario's own demand with no pod left waiting, ${o.name} needs ${said(o)} nodes where no oversell needs ${said(none)}` +
      `${saved !== undefined && none.nodesNeeded ? ` (${pct(saved / none.nodesNeeded)} fewer)` : ''}; the physical limit would need ${said(limit)}. ` +
      `(The fewest nodes found by a binary search over the node count, ${r.nodesNeeded.runs} runs in all.)`,
    '',
  ];
}

/** The commonest reasons an OversellPolicy changed allocatable, from its decisions' bounds. */
function causes(p: PolicyResult): string {
  const top = Object.entries(p.changesByBound ?? {}).slice(0, 3);
  if (top.length === 0) return '';
  const said = top.map(([k, v]) => {
    const [resource, bound, direction] = k.split(' ');
    return `${resource === 'cpu' ? 'CPU' : 'memory'} ${direction} at ${bound} ${v.toFixed(1)}`;
  });
  return ` (per node-hour, most often ${said.join(', ')}: hysteresis holds back small rises, never a fall)`;
}

/** What bounds the gain: where usage reaches the target or the risk budget's line, and the cap. */
function bounds(r: SimulationResult): string[] {
  const s = r.scenario;
  const share = (name: 'cpu' | 'memory') => 1 - (name === 'cpu' ? s.usage.cpuSlack : s.usage.memorySlack);
  const swing = (name: 'cpu' | 'memory') => (name === 'cpu' ? s.usage.diurnal.cpuSwing : s.usage.diurnal.memorySwing);
  // With a budget, requests grow to raw x (1 - margin) / the peak load factor; with targets, to raw x target / the load factor now.
  const uncapped = (name: 'cpu' | 'memory', atPeak: boolean) => {
    const b = r.budget[name];
    const u = share(name) * (atPeak || b ? 1 + swing(name) : 1);
    return (b ? 1 - b.margin : r.targets[name]) / u;
  };
  const reach = (name: 'cpu' | 'memory', atPeak: boolean) => Math.min(r.caps[name], uncapped(name, atPeak));
  const line = (name: 'cpu' | 'memory', label: string) => {
    const u = share(name);
    const cap = r.caps[name];
    const b = r.budget[name];
    const used = `pods use ${pct(u)} of their requests on average (${pct(u * (1 + swing(name)))} at the daily peak)`;
    if (b) {
      const budgetReach = uncapped(name, true);
      const binds = cap <= budgetReach ? `the ${cap}x cap binds first` : 'the budget binds first';
      return `- **${label}**: ${used}; the risk budget keeps each node's predicted peak (its history's load factor, ${b.overShare > 0 ? `exceeded ${pct(b.overShare)} of the time` : 'the largest seen'}) within raw allocatable less ${pct(b.margin)}, so requests can reach about ${budgetReach.toFixed(2)}x raw at any hour, bursts and memory growth aside; the cap is ${cap}x: ${binds}.`;
    }
    const target = r.targets[name];
    const binds = cap <= target / u ? `the ${cap}x cap binds first` : `the ${pct(target)} target binds first`;
    return `- **${label}**: ${used}, so requests can reach ${(target / u).toFixed(2)}x raw allocatable before usage reaches the ${pct(target)} target (${(target / (u * (1 + swing(name)))).toFixed(2)}x at the peak); the cap is ${cap}x: ${binds}.`;
  };
  const mean = Math.min(reach('cpu', false), reach('memory', false));
  const peak = Math.min(reach('cpu', true), reach('memory', true));
  return [
    line('cpu', 'CPU'),
    line('memory', 'Memory'),
    '',
    r.budget.cpu || r.budget.memory
      ? `A pod needs both, so requests can grow to about ${peak.toFixed(2)}x raw allocatable, by night as by day: the budget predicts the daily peak from the node's history once it spans a day; until then the targets decide, lowered to what the history so far allows and capped at history.learningMaxRatio.`
      : `A pod needs both, so requests can grow to about ${mean.toFixed(2)}x raw allocatable on average and ${peak.toFixed(2)}x at the daily peak, when pods wait; ` +
        'pods placed before the peak stay (the floor never drops below bound requests), so the gain over a day sits between the two.',
  ];
}

const FORMAT_NAMES: Record<PublicTraceSummary['format'], [string, string]> = { bitbrains: ['Bitbrains (GWA-T-12)', 'VMs'], 'alibaba-2018': ['Alibaba cluster-trace-v2018', 'containers'] };

/** The page's opening on a public trace: what was replayed on what, and what the reader had to infer. */
function publicIntro(m: SimulationResult, t: PublicTraceSummary): string[] {
  const s = m.scenario;
  const [name, pods] = FORMAT_NAMES[t.format];
  const nodes = t.machines
    ? `the trace's ${t.machines.length} machines`
    : `${s.nodes} nodes of ${s.node.capacity.cpu / 1000} cores and ${(s.node.capacity.memory / 1024 ** 3).toFixed(0)} GiB (the trace has no hosts)`;
  const what = t.requestsKnown ? `The ${t.pods} ${pods} of a public ${name} trace` : `A public ${name} trace with no ${pods}`;
  return [
    `${what} (${(t.seconds / 3600).toFixed(2)} hours, sampled every ${t.sampleSeconds} s)${t.requestsKnown ? ', each with its recorded requests and usage,' : ''} on ${nodes}, over ${+s.hours.toFixed(3)} hours in ${s.tickSeconds} s steps.`,
    '',
    m.demand === 'saturating'
      ? `Demand is saturating: besides the recorded ${pods}, copies of them (each with its recorded requests and usage, leaving when it does, in a fixed order drawn from the seed) keep coming until nothing more fits.`
      : `Demand is the trace's own: each of its ${pods} arrives at its recorded start and leaves at its recorded end.`,
    '',
    ...(t.requestsKnown ? [] : [`**${REQUESTS_UNKNOWN}**`, '']),
    '### What the reader inferred',
    '',
    ...t.notes.map((n) => `- ${n}`),
    '',
  ];
}

/** What a replay's recording did that no policy chose (not counted as any policy's risk). */
function recordedFacts(m: SimulationResult): string[] {
  const facts = m.policies.filter((p) => p.recorded && (p.recorded.requestRisesNotFitting > 0 || p.recorded.overCapacityNodeSeconds > 0));
  if (facts.length === 0) return [];
  return [
    'Recorded facts, not charged to any policy: ' +
      facts.map((p) => `${p.name}: ${p.recorded!.requestRisesNotFitting} node-steps where a recorded rise of requests did not fit, ${nodeHours(p.recorded!.overCapacityNodeSeconds)} node-hours with the recorded load alone over capacity`).join('; ') +
      '.',
    '',
  ];
}

export function markdown(r: Report, withCharts: boolean, command: string): string {
  const m = r.main;
  const s = m.scenario;
  const o = oversellOf(m);
  const none = m.policies[0]!;
  const pub = publicTraceOf(m);
  const compared = pub?.requestsKnown !== false;
  const lines: string[] = [
    '# What oversell is worth: a simulated day',
    '',
    `Generated by \`${command}\` (seed ${s.seed}; [the model](simulate.md)); do not edit.`,
  ];
  if (pub) lines.push(...publicIntro(m, pub));
  else lines.push(
    m.trace && 'polls' in m.trace
      ? `The ${m.trace.nodes.length} nodes of a recorded cluster (${m.trace.polls} polls over ${(m.trace.seconds / 60).toFixed(1)} minutes, replayed over ${s.hours} hours, ${s.tickSeconds} s steps) keep their recorded load; the scenario's pods are placed on top;`
      : `${s.nodes} nodes of ${s.node.capacity.cpu / 1000} cores and ${(s.node.capacity.memory / 1024 ** 3).toFixed(0)} GiB over ${s.hours} hours, ${s.tickSeconds} s steps;`,
    `pods use on average ${pct(1 - s.usage.memorySlack)} of their memory requests and ${pct(1 - s.usage.cpuSlack)} of their CPU requests`,
    `(slack ${pct(s.usage.memorySlack)}; Google's Autopilot paper reports 46 % for manually sized jobs)${m.demand === 'scenario' && none.podsPending > 0 ? ', and more pods are wanted at the daily peak than the nodes hold without oversell' : ''}.`,
    '',
    m.demand === 'saturating'
      ? 'Demand is saturating: pods of the scenario\'s classes, in its mix, keep coming until nothing more fits, so every policy is bound by what the nodes hold.'
      : 'Demand is the scenario\'s own: Deployments follow the daily curve and jobs arrive at random.',
    '',
  );
  lines.push(...(compared ? nodesSaved(m, o) : []), '## What the run shows', '');
  if (compared) lines.push(
    `- Without oversell, ${none.podsPlaced.toFixed(0)} pods run on average and ${none.podsPending.toFixed(0)} wait; the physical limit runs ${m.limit.podsPlaced.toFixed(0)}. ` +
      `**${o.name}** runs ${o.podsPlaced.toFixed(0)} (${gain(o.densityVsNone)}), capturing ${captured(o)} of the limit's gain over none, ` +
      `with ${o.podsHitByMemoryOverload} pods hit by memory overload (OOM-killed or evicted by the kubelet), ${o.protectedPodsHit} protected pods hit, ${o.podsRelieved} pods relieved, ${nodeHours(o.belowRequestsNodeSeconds)} node-hours with allocatable below bound requests ` +
      `and ${nodeHours(o.cpuOverCapacityNodeSeconds)} node-hours of CPU demand over capacity; its allocatable changes ${o.allocatableChangesPerNodeHour.toFixed(0)} times per node-hour${causes(o)}.`,
  );
  else lines.push(`- Not compared: ${REQUESTS_UNKNOWN}`);
  for (const p of m.policies) {
    if (p === o || p.kind === 'none' || !compared) continue;
    const risks = [
      p.podsHitByMemoryOverload > 0 && `${p.podsHitByMemoryOverload} pods hit by memory overload (${p.protectedPodsHit} of them protected)`,
      p.cpuOverCapacityNodeSeconds > 0 && `${nodeHours(p.cpuOverCapacityNodeSeconds)} node-hours of CPU over capacity`,
      p.belowRequestsNodeSeconds > 0 && `${nodeHours(p.belowRequestsNodeSeconds)} node-hours below bound requests`,
      p.allocatableChangesPerNodeHour >= 10 && `allocatable changing ${p.allocatableChangesPerNodeHour.toFixed(0)} times per node-hour`,
    ].filter((x): x is string => typeof x === 'string');
    const share = p.kind === 'limit' || p.gainCaptured === null ? '' : `, ${pct(p.gainCaptured)} of the limit's gain`;
    lines.push(`- **${p.name}** runs ${p.podsPlaced.toFixed(0)} (${gain(p.densityVsNone)}${share})${risks.length ? `, with ${risks.join(', ')}` : ', with no risk counted'}.`);
  }
  lines.push('', ...recordedFacts(m));
  if (compared) {
    lines.push('## Against the targets of issue 31', '', '| target | met | figures |', '|---|---|---|');
    for (const c of r.checks) lines.push(`| ${c.target} | ${c.met ? 'yes' : '**no**'} | ${c.detail} |`);
    lines.push('');
  }
  if (compared && r.harm.length > 0) {
    lines.push(
      '## Who pays: the targets of issue 45',
      '',
      'Protected pods (Guaranteed, exclusive CPUs, priority at or above system-cluster-critical) are never relieved; relief evicts unprotected pods through the Eviction API before the kernel or the kubelet must choose ([the model](simulate.md#who-pays-tiers-relief-the-kubelet-and-the-kernel)).',
      '',
      '| target | | figures |',
      '|---|---|---|',
    );
    for (const c of r.harm) lines.push(`| ${c.target} | ${c.met ? 'met' : '**missed**'} | ${c.detail} |`);
    lines.push('');
  }
  lines.push('## Policies side by side', '', ...table(m.policies), '');
  lines.push(
    "Pods running and pending are means over the run. *Of the limit's gain* is (pods - none's) / (the limit's - none's). Slack is 1 - usage / requests of running pods. *Risk* counts node-seconds with CPU demand over capacity (throttling), " +
      'memory over capacity minus the eviction threshold (pods OOM-killed by the kernel or evicted by the kubelet; each counted as hit), allocatable below bound requests (pods a kubelet restart would reject) ' +
      'or a relief eviction by oversell (graceful, but an eviction: counted as risk, and each relieved pod counted). *Protected pods hit* counts protected pods evicted or OOM-killed by anyone. ' +
      `*Over target* counts node-seconds with usage above the default policy's targets (CPU ${pct(m.targets.cpu)}, memory ${pct(m.targets.memory)} of raw allocatable): ` +
      'it is what the targets try to avoid, not harm in itself.',
    '',
  );
  if (withCharts) {
    lines.push('## Charts', '', `![Pods running over the day, per policy](${CHARTS.placed})`, '', `![Risk node-seconds against pods placed, per policy](${CHARTS.riskGain})`, '');
    lines.push(`![Distribution of node CPU usage](${CHARTS.cpu})`, '', `![Distribution of node memory usage](${CHARTS.memory})`, '');
  }
  // The bounds are the model's slack and daily curve: a public trace has its own usage.
  if (!pub) lines.push('## What bounds the gain', '', ...bounds(m), '');
  if (compared) lines.push(
    'The physical limit knows every pod\'s future usage and places a pod only where the node\'s summed usage stays within capacity (memory: capacity minus the eviction threshold) for the pod\'s whole stay: ' +
      'no targets, no caps, no requests. The prediction, its margin and the caps above are what keep oversell below it.',
    '',
  );
  if (r.busier) {
    const step = r.busier.scenario.usage.step!;
    lines.push(
      '## Busier than its history',
      '',
      `The same workload with every pod's usage ${step.factor}x from hour ${step.atHour} on: grants made on the quieter history meet a busier cluster.`,
      '',
      ...r.busier.policies.filter((p) => p.kind === 'oversell' || p.kind === 'static' || p.kind === 'limit').map((p) => `- **${p.name}**: ${whoPaid(p)}.`),
      '',
      ...table(r.busier.policies),
      '',
    );
  }
  lines.push('## Reproduce', '', `\`${command}\`; change the workload with \`--scenario FILE\` (every field: [examples/simulate.yaml](../examples/simulate.yaml)).`, '');
  return lines.join('\n');
}

/** Every file of `--out DIR`, by path under it. */
export function reportFiles(r: Report, command: string): Record<string, string> {
  return { 'outcome.md': markdown(r, true, command), 'outcome.json': reportJson(r), ...charts(r) };
}
