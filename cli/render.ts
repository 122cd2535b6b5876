// What the CLI prints, as pure functions of the query API's answers, so the
// output is tested against golden files.
import type { NodeStatus__Output } from '../proto/gen/oversell/v1/NodeStatus.js';
import type { NodeSummaries__Output } from '../proto/gen/oversell/v1/NodeSummaries.js';
import type { PolicyInfo__Output } from '../proto/gen/oversell/v1/PolicyInfo.js';
import type { RiskBudgetState__Output } from '../proto/gen/oversell/v1/RiskBudgetState.js';
import { formatDuration } from '../lib/duration.js';
import { cpuPressureOf } from '../wire/cpu-pressure.js';

export interface Style {
  color: boolean;
}

const paint = (style: Style, code: number, text: string) => (style.color ? `\x1b[${code}m${text}\x1b[0m` : text);
const green = (s: Style, t: string) => paint(s, 32, t);
const yellow = (s: Style, t: string) => paint(s, 33, t);
const red = (s: Style, t: string) => paint(s, 31, t);

// Widths are measured without colour codes.
// eslint-disable-next-line no-control-regex
const visible = (t: string) => t.replace(/\x1b\[\d+m/g, '').length;

export function table(rows: string[][]): string {
  const widths: number[] = [];
  for (const r of rows) r.forEach((c, i) => (widths[i] = Math.max(widths[i] ?? 0, visible(c))));
  return rows.map((r) => r.map((c, i) => (i === r.length - 1 ? c : c + ' '.repeat((widths[i] ?? 0) - visible(c)))).join('   ')).join('\n') + '\n';
}

export const cores = (m: number) => (m % 1000 === 0 ? `${m / 1000}` : `${m}m`);
export function bytes(b: number): string {
  if (b >= 1024 ** 3) return `${(b / 1024 ** 3).toFixed(b >= 10 * 1024 ** 3 ? 0 : 1)}Gi`;
  if (b >= 1024 ** 2) return `${Math.round(b / 1024 ** 2)}Mi`;
  return `${Math.round(b / 1024)}Ki`;
}
const pct = (part: number, whole: number) => (whole > 0 ? `${Math.round((part / whole) * 100)}%` : '-');
const ratio = (granted: number, raw: number) => (raw > 0 ? `${(granted / raw).toFixed(2)}x` : '-');

export type SortKey = 'name' | 'cpu' | 'memory' | 'ratio' | 'age';

/**
 * One line of `oversell top`: what the table shows of a node, from a full
 * NodeStatus (watch, one node) or from a column of NodeSummaries (the list,
 * which at fleet scale is only affordable as columns).
 */
export interface TopRow {
  name: string;
  connected: boolean;
  ageMs: number;
  /** Undefined before the node's first sample. */
  usage: { cpuMillicores: number; memoryBytes: number; capacityCpuMillicores: number; capacityMemoryBytes: number } | undefined;
  requests: { cpuMillicores: number; memoryBytes: number } | undefined;
  /** PSI some avg10, when the kernel has PSI. */
  pressure: { cpu: number; memory: number } | undefined;
  raw: { cpuMillicores: number; memoryBytes: number } | undefined;
  /** The decision; undefined until raw allocatable is known. */
  decision: { cpuMillicores: number; memoryBytes: number; cpuBound: string; memoryBound: string } | undefined;
  policy: string;
  samples: number;
}

export function rowOfStatus(n: NodeStatus__Output): TopRow {
  const s = n.latest;
  const p = s?.pressure;
  const d = n.decision;
  return {
    name: n.name,
    connected: n.connected,
    ageMs: n.ageMs,
    usage: s ? { cpuMillicores: s.cpuUsageMillicores, memoryBytes: s.memoryWorkingSetBytes, capacityCpuMillicores: s.capacity?.cpuMillicores ?? 0, capacityMemoryBytes: s.capacity?.memoryBytes ?? 0 } : undefined,
    requests: s?.requests?.known ? { cpuMillicores: s.requests.cpuMillicores, memoryBytes: s.requests.memoryBytes } : undefined,
    pressure: p?.available || p?.cpuContention ? { cpu: cpuPressureOf(p), memory: p.memorySome?.avg10 ?? 0 } : undefined,
    raw: n.rawAllocatableKnown && n.rawAllocatable ? { cpuMillicores: n.rawAllocatable.cpuMillicores, memoryBytes: n.rawAllocatable.memoryBytes } : undefined,
    decision: d ? { cpuMillicores: d.allocatable?.cpuMillicores ?? 0, memoryBytes: d.allocatable?.memoryBytes ?? 0, cpuBound: d.cpuBound, memoryBound: d.memoryBound } : undefined,
    policy: n.policy,
    samples: n.window?.samples ?? 0,
  };
}

export function rowsOfSummaries(c: NodeSummaries__Output): TopRow[] {
  const text = (i: number | undefined) => c.texts[i ?? 0] ?? '';
  return c.name.map((name, i) => ({
    name,
    connected: c.connected[i] ?? false,
    ageMs: c.ageMs[i] ?? 0,
    usage: c.hasSample[i]
      ? { cpuMillicores: c.cpuUsageMillicores[i] ?? 0, memoryBytes: c.memoryWorkingSetBytes[i] ?? 0, capacityCpuMillicores: c.capacityCpuMillicores[i] ?? 0, capacityMemoryBytes: c.capacityMemoryBytes[i] ?? 0 }
      : undefined,
    requests: c.requestsKnown[i] ? { cpuMillicores: c.requestsCpuMillicores[i] ?? 0, memoryBytes: c.requestsMemoryBytes[i] ?? 0 } : undefined,
    pressure: c.pressureAvailable[i] ? { cpu: c.cpuPressure[i] ?? 0, memory: c.memoryPressure[i] ?? 0 } : undefined,
    raw: c.rawAllocatableKnown[i] ? { cpuMillicores: c.rawCpuMillicores[i] ?? 0, memoryBytes: c.rawMemoryBytes[i] ?? 0 } : undefined,
    decision: c.rawAllocatableKnown[i]
      ? { cpuMillicores: c.allocatableCpuMillicores[i] ?? 0, memoryBytes: c.allocatableMemoryBytes[i] ?? 0, cpuBound: text(c.cpuBound[i]), memoryBound: text(c.memoryBound[i]) }
      : undefined,
    policy: text(c.policy[i]),
    samples: c.windowSamples[i] ?? 0,
  }));
}

export function sortNodes(nodes: TopRow[], by: SortKey): TopRow[] {
  const key: Record<SortKey, (n: TopRow) => number | string> = {
    name: (n) => n.name,
    cpu: (n) => -(n.usage?.cpuMillicores ?? 0),
    memory: (n) => -(n.usage?.memoryBytes ?? 0),
    ratio: (n) => -((n.decision?.cpuMillicores ?? 0) / Math.max(1, n.raw?.cpuMillicores ?? 1)),
    age: (n) => -n.ageMs,
  };
  const k = key[by];
  return [...nodes].sort((a, b) => {
    const x = k(a);
    const y = k(b);
    return x < y ? -1 : x > y ? 1 : a.name.localeCompare(b.name);
  });
}

function ageCell(style: Style, n: TopRow): string {
  if (!n.usage) return red(style, 'no data');
  const text = formatDuration(n.ageMs);
  const bound = n.decision?.cpuBound;
  return bound === 'stale' ? red(style, text) : n.connected ? text : yellow(style, `${text} (agent gone)`);
}

function pressureCell(style: Style, n: TopRow): string {
  const p = n.pressure;
  if (!p) return '-';
  const text = `${p.cpu.toFixed(0)}/${p.memory.toFixed(0)}`;
  return n.decision?.cpuBound === 'pressure' || n.decision?.memoryBound === 'pressure' ? red(style, text) : text;
}

function allocCell(style: Style, granted: number | undefined, raw: number | undefined, fmt: (v: number) => string): string {
  if (raw === undefined) return '-';
  const g = granted ?? raw;
  const text = `${fmt(raw)}->${fmt(g)}`;
  return g > raw ? green(style, text) : text;
}

/** `oversell top nodes`: like `kubectl top nodes`, plus what oversell did. */
export function renderTop(nodes: TopRow[], style: Style, wide = false): string {
  const head = ['NAME', 'CPU(cores)', 'CPU%', 'MEMORY(bytes)', 'MEMORY%', 'ALLOCATABLE CPU', 'REQUESTED CPU', 'ALLOCATABLE MEMORY', 'REQUESTED MEMORY', 'RATIO', 'PRESSURE CPU/MEM', 'DATA AGE'];
  if (wide) head.push('POLICY', 'CPU BOUND', 'MEMORY BOUND', 'SAMPLES');
  const rows = [head];
  for (const n of nodes) {
    const u = n.usage;
    const raw = n.raw;
    const alloc = n.decision;
    const req = n.requests;
    const row = [
      n.name,
      u ? cores(u.cpuMillicores) : '-',
      u ? pct(u.cpuMillicores, u.capacityCpuMillicores) : '-',
      u ? bytes(u.memoryBytes) : '-',
      u ? pct(u.memoryBytes, u.capacityMemoryBytes) : '-',
      allocCell(style, alloc?.cpuMillicores, raw?.cpuMillicores, cores),
      req ? cores(req.cpuMillicores) : '?',
      allocCell(style, alloc?.memoryBytes, raw?.memoryBytes, bytes),
      req ? bytes(req.memoryBytes) : '?',
      raw && alloc ? `${ratio(alloc.cpuMillicores, raw.cpuMillicores)}/${ratio(alloc.memoryBytes, raw.memoryBytes)}` : '-',
      pressureCell(style, n),
      ageCell(style, n),
    ];
    if (wide) row.push(n.policy || '-', n.decision?.cpuBound ?? '-', n.decision?.memoryBound ?? '-', String(n.samples));
    rows.push(row);
  }
  return table(rows);
}

/** `oversell describe node`: every input and bound of the decision, in words. */
export function renderDescribe(n: NodeStatus__Output, style: Style): string {
  const lines: string[] = [];
  const add = (label: string, value: string) => lines.push(`${(label + ':').padEnd(22)}${value}`);
  const s = n.latest;
  const d = n.decision;
  add('Name', n.name);
  add('Agent', n.connected ? `connected (instance ${n.instanceId})` : yellow(style, 'not connected'));
  add('Data age', s ? `${formatDuration(n.ageMs)} (newest sample #${s.seq})` : red(style, 'no sample yet'));
  if (n.host?.cpuModel || n.host?.os) add('Host', [n.host.cpuModel, n.host.os, n.host.kernel].filter(Boolean).join(', '));
  if (n.host) add('Cgroups', `${n.host.cgroupMode || '?'}${n.host.cgroupDriver ? ` + ${n.host.cgroupDriver}` : ''}`);
  add('Policy', n.policy ? `${n.policy}${d?.dryRun ? ' (DryRun)' : ''}` : 'none');
  if (s) {
    lines.push('', 'Usage (now / window):');
    add('  CPU', `${cores(s.cpuUsageMillicores)} now, ${cores(d?.usage?.cpuMillicores ?? n.window?.cpuP95Millicores ?? 0)} window statistic, capacity ${cores(s.capacity?.cpuMillicores ?? 0)}`);
    add('  Memory', `${bytes(s.memoryWorkingSetBytes)} now, ${bytes(d?.usage?.memoryBytes ?? n.window?.memoryMaxBytes ?? 0)} window statistic, capacity ${bytes(s.capacity?.memoryBytes ?? 0)}`);
    add('  Window', `${n.window?.samples ?? 0} samples over ${formatDuration(n.window?.spanMs ?? 0)}`);
    const p = s.pressure;
    if (p?.cpuContention) add('  CPU contention', `${p.cpuContention.avg10.toFixed(1)}% (avg10; what decisions read, throttling left out)`);
    add('  Pressure (PSI)', p?.available ? `cpu some ${p.cpuSome?.avg10}% (avg10), memory some ${p.memorySome?.avg10}% (avg10)` : 'not available on this kernel');
    const r = s.requests;
    add('  Requested', r?.known ? `${cores(r.cpuMillicores)} CPU, ${bytes(r.memoryBytes)} memory by ${r.podCount} pods` : 'unknown (the agent cannot see the pods)');
  }
  if (n.rawAllocatableKnown && n.rawAllocatable && d) {
    lines.push('', 'Allocatable:');
    const res = (name: string, raw: number, floor: number, cap: number, granted: number, applied: number, bound: string, fmt: (v: number) => string) =>
      add(`  ${name}`, `raw ${fmt(raw)}, floor ${fmt(floor)}, cap ${fmt(cap)} -> granted ${fmt(granted)}${applied !== granted ? `, written ${fmt(applied)} (DryRun)` : ''} [${bound}]`);
    res('CPU', n.rawAllocatable.cpuMillicores, d.floor?.cpuMillicores ?? 0, d.cap?.cpuMillicores ?? 0, d.granted?.cpuMillicores ?? 0, d.allocatable?.cpuMillicores ?? 0, d.cpuBound, cores);
    res('Memory', n.rawAllocatable.memoryBytes, d.floor?.memoryBytes ?? 0, d.cap?.memoryBytes ?? 0, d.granted?.memoryBytes ?? 0, d.allocatable?.memoryBytes ?? 0, d.memoryBound, bytes);
    if (d.budget) lines.push('', `Risk budget (pool ${n.policy}, last hour):`, ...renderBudget(d.budget, style));
    lines.push('', 'Reason:', `  ${d.reason}`);
  } else {
    lines.push('', 'Allocatable:          not seen yet (no kubelet status write has reached this gateway)');
  }
  return lines.join('\n') + '\n';
}

/** The closed loop in words: what the pool's nodes took against what its policy allows, and whether its grants stopped. */
function renderBudget(b: RiskBudgetState__Output, style: Style): string[] {
  const out: string[] = [];
  const row = (label: string, value: string) => out.push(`${(`  ${label}:`).padEnd(22)}${value}`);
  if (b.memoryEnabled) {
    const hurt = `${b.memoryOverloads} pod(s) hurt for lack of memory`;
    row('Memory', b.memoryOverloads > 0 ? red(style, `${hurt}: spent until ${new Date(b.memorySpentUntilMs).toISOString()}, grants held at 1x`) : `${hurt}: not spent`);
  }
  if (b.cpuEnabled) {
    const share = b.cpuObservedSeconds > 0 ? b.cpuOverSeconds / b.cpuObservedSeconds : 0;
    const seen = b.cpuObservedSeconds > 0 ? `${percent(share)} of ${Math.round(b.cpuObservedSeconds)} node-seconds over capacity` : 'no node-time observed yet';
    const text = `${seen}; spent past ${percent(b.cpuSpentPastShare)}`;
    row('CPU', b.cpuSpent ? red(style, `${text}: spent, grants held at 1x`) : `${text}: not spent`);
  }
  return out;
}

const percent = (share: number) => `${(share * 100).toFixed(3)} %`;

export function renderPolicies(policies: PolicyInfo__Output[], style: Style): string {
  const rows = [['NAME', 'PRIORITY', 'MODE', 'CPU MAX', 'MEMORY MAX', 'NODES', 'SELECTOR', 'STATUS']];
  for (const p of policies) {
    rows.push([
      p.name,
      String(p.priority),
      p.mode || '-',
      p.valid ? `${p.cpuMaxRatio}x` : '-',
      p.valid ? `${p.memoryMaxRatio}x` : '-',
      String(p.matchedNodes),
      p.nodeSelector,
      p.valid ? 'ok' : red(style, `invalid: ${p.error}`),
    ]);
  }
  return table(rows);
}
