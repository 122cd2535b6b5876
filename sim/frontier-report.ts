// The page of a frontier sweep (docs/frontier.md): who places most at each
// level of risk, whether oversell's frontier dominates the anchors', every
// point, and the chart. Pure: files are returned as text, the CLI writes them.
import { RISK_BUDGET_BOUNDS } from '../gateway/policies/policy-spec.js';
import { FAMILIES, type Family, type Frontier, type FrontierPoint } from './frontier.js';
import { frontierChart, type FrontierSeries } from './svg.js';

export const FRONTIER_CHART = 'frontier/frontier.svg';

const COLORS: Record<Family, string> = {
  static: '#ff7f0e', seaiii: '#8c564b', katalyst: '#9467bd', koordinator: '#e377c2', crane: '#2ca02c', 'peak-predictor': '#ff9896', oversell: '#1f77b4',
};

const gain = (d: number | null) => {
  if (d === null) return '-';
  const v = Math.round((d - 1) * 1000) / 10;
  return `${v >= 0 ? '+' : ''}${(v === 0 ? 0 : v).toFixed(1)} %`;
};
const nodeHours = (s: number) => (s === 0 ? '0' : (s / 3600).toFixed(s < 360 ? 2 : 1));
const share = (x: number) => (x === 0 ? '0' : x >= 1 ? 'any' : `${+(x * 100).toPrecision(3)} %`);
const density = (p: { densityVsNone: number | null }) => ((p.densityVsNone ?? 1) - 1) * 100;

/** The points of a family no other of it beats (more pods at no more risk), risk ascending, as stairs: between two, the less risky one holds. */
export function stairs(points: readonly FrontierPoint[], nodeSeconds: number): [number, number][] {
  const sorted = [...points].sort((a, b) => a.riskNodeSeconds - b.riskNodeSeconds || b.podsPlaced - a.podsPlaced);
  const out: [number, number][] = [];
  let top = -Infinity;
  for (const p of sorted) {
    if (p.podsPlaced <= top) continue;
    const x = p.riskNodeSeconds / nodeSeconds;
    if (out.length > 0) out.push([x, out[out.length - 1]![1]]);
    out.push([x, density(p)]);
    top = p.podsPlaced;
  }
  return out;
}

export function frontierSvg(f: Frontier): string {
  const series = FAMILIES.map((family): FrontierSeries => {
    const points = f.points.filter((p) => p.family === family);
    return { name: family, color: COLORS[family], points: points.map((p) => [p.riskNodeSeconds / f.nodeSeconds, density(p)]), frontier: stairs(points, f.nodeSeconds) };
  }).filter((s) => s.points.length > 0);
  const limit = f.none.podsPlaced > 0 ? ((f.limit.podsPlaced / f.none.podsPlaced) - 1) * 100 : 0;
  return frontierChart(
    { title: 'Density against risk, every setting of every family', xLabel: 'risk: share of node-time at risk (log scale; zero at the axis)', yLabel: '% more pods running than without oversell' },
    series,
    [{ name: 'limit', color: '#111111', y: limit }],
  );
}

/** What --frontier --output json prints: the sweep, every point, the table and the dominance check. */
export function frontierJson(f: Frontier): string {
  return JSON.stringify(f, null, 2) + '\n';
}

function levelTable(f: Frontier): string[] {
  const rows = [
    `| risk at most (node-time) | risk at most (node-h) | ${FAMILIES.join(' | ')} | most pods |`,
    `|--:|--:|${FAMILIES.map(() => '--:|').join('')}---|`,
  ];
  for (const l of f.levels) {
    const cells = FAMILIES.map((fam) => {
      const b = l.best[fam];
      return b ? `${gain(b.densityVsNone)} (${b.label})` : '-';
    });
    rows.push(`| ${share(l.riskShare)} | ${l.riskShare >= 1 ? 'any' : +(l.riskNodeSeconds / 3600).toPrecision(3)} | ${cells.join(' | ')} | ${l.most.join(', ') || '-'} |`);
  }
  return rows;
}

function pointTable(f: Frontier): string[] {
  const rows = [
    "| family | setting | pods running (mean) | vs none | of the limit's gain | pods hit by memory overload | protected pods hit | pods relieved | CPU over capacity (node-time) | below requests (node-h) | risk (node-h) | risk (node-time) |",
    '|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|',
  ];
  for (const p of f.points) {
    rows.push(
      `| ${p.family} | ${p.label} | ${p.podsPlaced.toFixed(1)} | ${gain(p.densityVsNone)} | ${p.gainCaptured === null ? '-' : `${(p.gainCaptured * 100).toFixed(1)} %`} | ${p.podsHitByMemoryOverload} | ${p.protectedPodsHit} | ${p.podsRelieved} | ${share(p.cpuOverCapacityShare)} | ${nodeHours(p.belowRequestsNodeSeconds)} | ${nodeHours(p.riskNodeSeconds)} | ${share(p.riskNodeSeconds / f.nodeSeconds)} |`,
    );
  }
  return rows;
}

function dominanceLines(f: Frontier): string[] {
  const beaten = f.dominance.filter((d) => !d.atLeastAsMany);
  const rows = ['| anchor | setting | its pods | its risk (node-h) | oversell at no more risk | its pods | |', '|---|---|--:|--:|---|--:|---|'];
  for (const d of f.dominance) {
    rows.push(
      `| ${d.anchor.family} | ${d.anchor.label} | ${d.anchor.podsPlaced.toFixed(1)} | ${nodeHours(d.anchor.riskNodeSeconds)} | ${d.oversell?.label ?? 'none as safe'} | ${d.oversell ? d.oversell.podsPlaced.toFixed(1) : '-'} | ${d.atLeastAsMany ? 'as many or more' : '**fewer**'} |`,
    );
  }
  const lines = [
    `**${f.dominatesEveryAnchor ? 'Yes' : 'No'}**: at ${f.dominance.length - beaten.length} of the ${f.dominance.length} anchor points, one of oversell's settings places at least as many pods at no more risk` +
      (beaten.length > 0 ? `; at ${beaten.length} it does not (${beaten.map((d) => `${d.anchor.family} ${d.anchor.label}`).join(', ')}).` : '.'),
  ];
  if (beaten.length > 0) {
    const share = (x: number) => `${+(100 * x).toFixed(1)} %`;
    const leastRisk = Math.min(...beaten.map((d) => d.anchor.riskNodeSeconds)) / f.nodeSeconds;
    const oversellMost = Math.max(...f.points.filter((p) => p.family === 'oversell').map((p) => p.riskNodeSeconds)) / f.nodeSeconds;
    const b = RISK_BUDGET_BOUNDS.maxOverShare;
    lines.push(
      '',
      `Each of those runs at ${share(leastRisk)} of node-time at risk or more; oversell's riskiest setting swept here runs at ${share(oversellMost)}. ` +
        `No OversellPolicy can aim that high: the risk budget accepts at most CPU demand over capacity ${share(b.cpu)} and memory over its line ${share(b.memory)} of node-time (the CRD's bounds). Past that risk the anchors place more, and oversell does not follow by design.`,
    );
  }
  return [...lines, '', ...rows];
}

export function frontierMarkdown(f: Frontier, withChart: boolean, command: string): string {
  const s = f.scenario;
  const families = FAMILIES.map((fam) => `${fam} ${f.points.filter((p) => p.family === fam).length}`).join(', ');
  const lines = [
    '# Frontiers: density against risk, every family swept',
    '',
    `Generated by \`${command}\` (seed ${s.seed}; [what it sweeps](simulate.md#frontiers---frontier)); do not edit.`,
    `${s.nodes} nodes of ${s.node.capacity.cpu / 1000} cores and ${(s.node.capacity.memory / 1024 ** 3).toFixed(0)} GiB over ${+s.hours.toFixed(3)} hours, ${s.tickSeconds} s steps, ` +
      `demand ${f.demand === 'saturating' ? 'saturating (pods never run out: every setting is bound by what the nodes hold)' : "the scenario's own"}.`,
    `Without oversell ${f.none.podsPlaced.toFixed(1)} pods run on average; the physical limit runs ${f.limit.podsPlaced.toFixed(1)} (${gain(f.none.podsPlaced > 0 ? f.limit.podsPlaced / f.none.podsPlaced : null)}).`,
    `Settings run: ${families}; each alone on the same workload and seed.`,
    '',
    '## Who places most at each level of risk',
    '',
    "Each cell is the family's most pods (over none's) among its settings whose risk is at most the row's, and that setting; - when none of them is that safe. " +
      '*Risk* is the report\'s: node-seconds with CPU demand over capacity, memory overloaded, allocatable below bound requests or a relief eviction by oversell (density is never bought with evictions unseen), here also as a share of all node-time.',
    '',
    ...levelTable(f),
    '',
    "## Does oversell's frontier dominate the anchors?",
    '',
    "Issue 31's target: at each anchor setting's risk, oversell places at least as many pods. For each anchor setting, oversell's setting placing most with no more risk:",
    '',
    ...dominanceLines(f),
    '',
  ];
  if (withChart) {
    lines.push(
      '## Chart',
      '',
      `![Density against risk, per family: markers at every setting, a line along each family's frontier, the limit dashed](${FRONTIER_CHART})`,
      '',
      "Up is more pods, left is less risk. A family's line is its frontier: at each risk, its most pods at no more risk. A family whose line lies above and left of another's places more at every risk.",
      '',
    );
  }
  lines.push('## Every setting', '', ...pointTable(f), '');
  return lines.join('\n');
}

/** Every file of `--frontier --out DIR`, by path under it. */
export function frontierFiles(f: Frontier, command: string): Record<string, string> {
  return { 'frontier.md': frontierMarkdown(f, true, command), 'frontier.json': frontierJson(f), [FRONTIER_CHART]: frontierSvg(f) };
}
