// What the CLI prints, as pure functions of the query API's answers, so the
// output is tested against golden files.
import type { NodeStatus__Output } from '../proto/gen/oversell/v1/NodeStatus.js';
import type { PolicyInfo__Output } from '../proto/gen/oversell/v1/PolicyInfo.js';
import { formatDuration } from '../lib/duration.js';

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

export function sortNodes(nodes: NodeStatus__Output[], by: SortKey): NodeStatus__Output[] {
  const key: Record<SortKey, (n: NodeStatus__Output) => number | string> = {
    name: (n) => n.name,
    cpu: (n) => -(n.latest?.cpuUsageMillicores ?? 0),
    memory: (n) => -(n.latest?.memoryWorkingSetBytes ?? 0),
    ratio: (n) => -((n.decision?.allocatable?.cpuMillicores ?? 0) / Math.max(1, n.rawAllocatable?.cpuMillicores ?? 1)),
    age: (n) => -n.ageMs,
  };
  const k = key[by];
  return [...nodes].sort((a, b) => {
    const x = k(a);
    const y = k(b);
    return x < y ? -1 : x > y ? 1 : a.name.localeCompare(b.name);
  });
}

function ageCell(style: Style, n: NodeStatus__Output): string {
  if (!n.latest) return red(style, 'no data');
  const text = formatDuration(n.ageMs);
  const bound = n.decision?.cpuBound;
  return bound === 'stale' ? red(style, text) : n.connected ? text : yellow(style, `${text} (agent gone)`);
}

function pressureCell(style: Style, n: NodeStatus__Output): string {
  const p = n.latest?.pressure;
  if (!p?.available) return '-';
  const text = `${(p.cpuSome?.avg10 ?? 0).toFixed(0)}/${(p.memorySome?.avg10 ?? 0).toFixed(0)}`;
  return n.decision?.cpuBound === 'pressure' || n.decision?.memoryBound === 'pressure' ? red(style, text) : text;
}

function allocCell(style: Style, granted: number | undefined, raw: number | undefined, fmt: (v: number) => string): string {
  if (raw === undefined) return '-';
  const g = granted ?? raw;
  const text = `${fmt(raw)}->${fmt(g)}`;
  return g > raw ? green(style, text) : text;
}

/** `oversell top nodes`: like `kubectl top nodes`, plus what oversell did. */
export function renderTop(nodes: NodeStatus__Output[], style: Style, wide = false): string {
  const head = ['NAME', 'CPU(cores)', 'CPU%', 'MEMORY(bytes)', 'MEMORY%', 'ALLOCATABLE CPU', 'REQUESTED CPU', 'ALLOCATABLE MEMORY', 'REQUESTED MEMORY', 'RATIO', 'PSI CPU/MEM', 'DATA AGE'];
  if (wide) head.push('POLICY', 'CPU BOUND', 'MEMORY BOUND', 'SAMPLES');
  const rows = [head];
  for (const n of nodes) {
    const cap = n.latest?.capacity;
    const raw = n.rawAllocatableKnown ? n.rawAllocatable : undefined;
    const alloc = n.decision?.allocatable;
    const req = n.latest?.requests;
    const row = [
      n.name,
      n.latest ? cores(n.latest.cpuUsageMillicores) : '-',
      n.latest ? pct(n.latest.cpuUsageMillicores, cap?.cpuMillicores ?? 0) : '-',
      n.latest ? bytes(n.latest.memoryWorkingSetBytes) : '-',
      n.latest ? pct(n.latest.memoryWorkingSetBytes, cap?.memoryBytes ?? 0) : '-',
      allocCell(style, alloc?.cpuMillicores, raw?.cpuMillicores, cores),
      req?.known ? cores(req.cpuMillicores) : '?',
      allocCell(style, alloc?.memoryBytes, raw?.memoryBytes, bytes),
      req?.known ? bytes(req.memoryBytes) : '?',
      raw && alloc ? `${ratio(alloc.cpuMillicores, raw.cpuMillicores)}/${ratio(alloc.memoryBytes, raw.memoryBytes)}` : '-',
      pressureCell(style, n),
      ageCell(style, n),
    ];
    if (wide) row.push(n.policy || '-', n.decision?.cpuBound ?? '-', n.decision?.memoryBound ?? '-', String(n.window?.samples ?? 0));
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
    lines.push('', 'Reason:', `  ${d.reason}`);
  } else {
    lines.push('', 'Allocatable:          not seen yet (no kubelet status write has reached this gateway)');
  }
  return lines.join('\n') + '\n';
}

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
