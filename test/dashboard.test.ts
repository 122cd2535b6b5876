// deploy/monitoring/: the Grafana dashboard and the Prometheus-operator objects
// are checked against the metrics the code really registers (names, types,
// labels), the manifests they scrape (deploy/base) and docs/metrics.md.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { loadAllYaml } from '@kubernetes/client-node';
import { AgentMetrics } from '../agent/metrics.js';
import { defineAgentFlags } from '../agent/flags.js';
import { GatewayMetrics } from '../gateway/metrics/metrics.js';
import { NodeStore } from '../gateway/store/node-store.js';
import { NODE_FAMILIES } from '../gateway/metrics/node-series.js';
import { AGENT_SERIES, GATEWAY_SERIES } from './helpers/metric-names.js';

const repo = fileURLToPath(new URL('../', import.meta.url));
const read = (path: string) => readFileSync(repo + path, 'utf8');

// ------------------------------------------------------------------ what exists

export interface Series {
  type: string;
  labels: readonly string[];
  /** Labels the scrape adds (ServiceMonitor / PodMonitor target labels). */
  targetLabels: readonly string[];
}

type Obj = Record<string, unknown>;
const obj = (v: unknown, what: string): Obj => {
  assert.ok(v !== null && typeof v === 'object' && !Array.isArray(v), `${what} is not an object`);
  return v as Obj;
};
const arr = (v: unknown, what: string): unknown[] => {
  assert.ok(Array.isArray(v), `${what} is not a list`);
  return v;
};
const str = (v: unknown, what: string): string => {
  assert.equal(typeof v, 'string', `${what} is not a string`);
  return v as string;
};

function docs(path: string): Obj[] {
  return (loadAllYaml(read(path)) as unknown[]).map((d, i) => obj(d, `${path} document ${i}`));
}
function only(path: string, kind: string): Obj {
  const all = docs(path);
  assert.equal(all.length, 1, `${path}: one document`);
  const d = all[0]!;
  assert.equal(d.kind, kind, `${path}: kind`);
  return d;
}
const get = (o: unknown, path: string): unknown =>
  path.split('.').reduce<unknown>((v, k) => (v !== null && typeof v === 'object' ? (v as Obj)[k] : undefined), o);

/** Target labels every Prometheus-operator scrape adds. */
const SERVICE_TARGET_LABELS = ['namespace', 'service', 'pod', 'container', 'endpoint', 'job', 'instance'];
const POD_TARGET_LABELS = ['namespace', 'pod', 'container', 'endpoint', 'job', 'instance'];

/** Labels the PodMonitor's relabelings add to the agent targets (e.g. node). */
function podMonitorTargetLabels(): string[] {
  const pm = only('deploy/monitoring/podmonitor.yaml', 'PodMonitor');
  const ep = obj(arr(get(pm, 'spec.podMetricsEndpoints'), 'podMetricsEndpoints')[0], 'podMetricsEndpoints[0]');
  return (Array.isArray(ep.relabelings) ? ep.relabelings : [])
    .map((r) => (r as Obj).targetLabel)
    .filter((l): l is string => typeof l === 'string' && !l.startsWith('__'));
}

/** Every named series with the type and labels the code registers, from real GatewayMetrics and AgentMetrics registries. */
export async function registeredSeries(): Promise<Map<string, Series>> {
  const out = new Map<string, Series>();
  const gateway = new GatewayMetrics(new NodeStore({ retainMs: 60_000, forgetAfterMs: 600_000 }));
  const agent = new AgentMetrics(() => undefined);
  const agentTargetLabels = [...POD_TARGET_LABELS, ...podMonitorTargetLabels()];
  const gatewayTypes = new Map((await gateway.registry.getMetricsAsJSON()).map((m) => [m.name, String(m.type)]));
  const nodeFamilies = new Map(NODE_FAMILIES.map((f) => [f.name, f]));
  for (const name of GATEWAY_SERIES) {
    // The per-node series are written by node-series.ts, outside prom-client's registry: every one a gauge.
    const family = nodeFamilies.get(name);
    if (family) {
      out.set(name, { type: 'gauge', labels: family.labels, targetLabels: SERVICE_TARGET_LABELS });
      continue;
    }
    const metric = gateway.registry.getSingleMetric(name);
    assert.ok(metric, `${name} is in test/helpers/metric-names.ts but not registered by the code`);
    const labels = (metric as unknown as { labelNames?: readonly string[] }).labelNames ?? [];
    out.set(name, { type: gatewayTypes.get(name) ?? 'unknown', labels, targetLabels: SERVICE_TARGET_LABELS });
  }
  for (const name of AGENT_SERIES) {
    const metric = agent.registry.get(name);
    assert.ok(metric, `${name} is in test/helpers/metric-names.ts but not registered by the code`);
    out.set(name, { type: metric.type, labels: metric.labelNames, targetLabels: agentTargetLabels });
  }
  return out;
}

// ------------------------------------------------------------------ PromQL checks

const HISTOGRAM_SUFFIXES = ['_bucket', '_count', '_sum'];

/** Drops string literals (label values, which may hold anything) so that only PromQL syntax is left. */
const withoutStrings = (expr: string) => expr.replace(/"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'/g, '""');

/** Metric names referenced in a PromQL expression: every oversell_* identifier outside strings. */
export function metricNames(expr: string): string[] {
  return [...new Set(withoutStrings(expr).match(/oversell_[a-z0-9_]+/g) ?? [])];
}

/** A referenced name back to its series: a histogram's _bucket/_count/_sum to the histogram. */
export function seriesOf(name: string, known: ReadonlyMap<string, Series>): { series: string; suffix: string } | undefined {
  if (known.has(name)) return { series: name, suffix: '' };
  for (const suffix of HISTOGRAM_SUFFIXES) {
    const base = name.slice(0, -suffix.length);
    if (name.endsWith(suffix) && known.get(base)?.type === 'histogram') return { series: base, suffix };
  }
  return undefined;
}

/** Problems of one PromQL expression against the known series; empty when fine. */
export function exprProblems(expr: string, known: ReadonlyMap<string, Series>, legend?: string): string[] {
  const problems: string[] = [];
  const text = withoutStrings(expr);
  const pairs: Record<string, string> = { ')': '(', ']': '[', '}': '{' };
  const stack: string[] = [];
  for (const c of text) {
    if ('([{'.includes(c)) stack.push(c);
    else if (c in pairs && stack.pop() !== pairs[c]) return [`unbalanced ${c} in ${expr}`];
  }
  if (stack.length > 0) return [`unclosed ${stack.join('')} in ${expr}`];

  const labelsInExpr = new Set<string>(['le']);
  for (const m of text.matchAll(/oversell_[a-z0-9_]+/g)) {
    const name = m[0];
    const at = m.index;
    const s = seriesOf(name, known);
    if (!s) {
      problems.push(`${name} is no series the gateway or the agent exposes (test/helpers/metric-names.ts)`);
      continue;
    }
    const series = known.get(s.series)!;
    series.labels.forEach((l) => labelsInExpr.add(l));
    series.targetLabels.forEach((l) => labelsInExpr.add(l));
    if (series.type === 'histogram' && s.suffix === '') problems.push(`${name} is a histogram: use ${name}_bucket, _count or _sum`);
    const cumulative = series.type === 'counter' || s.suffix !== '';
    const after = text.slice(at + name.length);
    const selector = /^\s*\{([^}]*)\}/.exec(after);
    const rest = selector ? after.slice(selector[0].length) : after;
    if (cumulative && !(/(?:^|[^a-z_])(?:rate|irate|increase)\(\s*$/.test(text.slice(0, at)) && /^\s*\[/.test(rest))) {
      problems.push(`${name} is cumulative (a counter or histogram part): take rate() or increase() over a range`);
    }
    for (const [, label] of selector?.[1]?.matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)\s*(?:=~|!~|!=|=)/g) ?? []) {
      const allowed = new Set([...series.labels, ...series.targetLabels, ...(s.suffix === '_bucket' ? ['le'] : [])]);
      if (!allowed.has(label!)) problems.push(`${name} has no label ${label} (labels: ${[...allowed].join(', ')})`);
    }
  }
  for (const [, clause] of text.matchAll(/\b(?:by|without|on|ignoring|group_left|group_right)\s*\(([^)]*)\)/g)) {
    for (const label of clause!.split(',').map((l) => l.trim()).filter(Boolean)) {
      if (!labelsInExpr.has(label)) problems.push(`no series in the expression has the label ${label}: ${expr}`);
    }
  }
  for (const [, label] of legend?.matchAll(/\{\{\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*\}\}/g) ?? []) {
    if (!labelsInExpr.has(label!)) problems.push(`legend {{${label}}} is no label of the expression: ${expr}`);
  }
  return problems;
}

/** Template variables referenced ($name, ${name}, [[name]]), without Grafana's built-ins ($__interval, ...). */
export function variablesUsed(text: string): string[] {
  const names = [...text.matchAll(/\$\{?([a-zA-Z_][a-zA-Z0-9_]*)|\[\[([a-zA-Z_][a-zA-Z0-9_]*)/g)].map((m) => m[1] ?? m[2]!);
  return [...new Set(names.filter((n) => !n.startsWith('__')))];
}

// ------------------------------------------------------------------ the dashboard

interface Target { expr?: unknown; refId?: unknown; legendFormat?: unknown; datasource?: unknown }
interface Panel {
  id?: unknown; type?: unknown; title?: unknown; datasource?: unknown;
  gridPos?: { x?: unknown; y?: unknown; w?: unknown; h?: unknown };
  targets?: Target[]; panels?: Panel[]; fieldConfig?: { defaults?: { unit?: unknown } };
}
interface Variable { name?: unknown; type?: unknown; query?: unknown; definition?: unknown; datasource?: unknown }
interface Dashboard { schemaVersion?: unknown; uid?: unknown; title?: unknown; panels?: Panel[]; templating?: { list?: Variable[] } }

const DASHBOARD = 'deploy/monitoring/grafana-dashboard.json';
const loadDashboard = (): Dashboard => JSON.parse(read(DASHBOARD)) as Dashboard;
const PANEL_TYPES = new Set(['row', 'timeseries', 'stat', 'table', 'gauge', 'bargauge', 'heatmap', 'text']);

/** Every panel, rows' nested (collapsed) panels included. */
function allPanels(d: Dashboard): Panel[] {
  return (d.panels ?? []).flatMap((p) => [p, ...(p.panels ?? [])]);
}

/** Structure problems of a dashboard; empty when fine. */
export function structureProblems(d: Dashboard): string[] {
  const problems: string[] = [];
  if (typeof d.schemaVersion !== 'number' || d.schemaVersion < 36) problems.push(`schemaVersion ${String(d.schemaVersion)}: want a number >= 36`);
  if (typeof d.uid !== 'string' || d.uid === '') problems.push('no uid');
  if (typeof d.title !== 'string' || d.title === '') problems.push('no title');
  const panels = allPanels(d);
  if (panels.length === 0) problems.push('no panels');
  const ids = new Set<unknown>();
  const boxes: { title: string; x: number; y: number; w: number; h: number }[] = [];
  for (const p of panels) {
    const title = typeof p.title === 'string' ? p.title : `panel ${String(p.id)}`;
    if (!Number.isInteger(p.id)) problems.push(`${title}: id is not an integer`);
    if (ids.has(p.id)) problems.push(`${title}: id ${String(p.id)} is used twice`);
    ids.add(p.id);
    if (typeof p.type !== 'string' || !PANEL_TYPES.has(p.type)) problems.push(`${title}: unknown type ${String(p.type)}`);
    if (typeof p.title !== 'string' || p.title === '') problems.push(`panel ${String(p.id)}: no title`);
    const g = p.gridPos ?? {};
    const [x, y, w, h] = [g.x, g.y, g.w, g.h];
    if (![x, y, w, h].every(Number.isInteger)) {
      problems.push(`${title}: gridPos needs integer x, y, w, h`);
    } else {
      const box = { title, x: x as number, y: y as number, w: w as number, h: h as number };
      if (box.x < 0 || box.y < 0 || box.w < 1 || box.h < 1 || box.x + box.w > 24) problems.push(`${title}: gridPos outside the 24-column grid`);
      for (const o of boxes) {
        if (box.x < o.x + o.w && o.x < box.x + box.w && box.y < o.y + o.h && o.y < box.y + box.h) problems.push(`${title} overlaps ${o.title}`);
      }
      boxes.push(box);
    }
    if (p.type === 'row') {
      if ((p.targets ?? []).length > 0) problems.push(`${title}: a row has no queries`);
      continue;
    }
    if (get(p.datasource, 'uid') !== '${datasource}') problems.push(`${title}: panel datasource is not \${datasource}`);
    if (typeof p.fieldConfig?.defaults?.unit !== 'string' || p.fieldConfig.defaults.unit === '') {
      if (p.type !== 'table' && p.type !== 'text') problems.push(`${title}: no unit`);
    }
    const targets = p.targets ?? [];
    if (targets.length === 0 && p.type !== 'text') problems.push(`${title}: no targets`);
    const refIds = new Set<unknown>();
    for (const t of targets) {
      if (typeof t.expr !== 'string' || t.expr.trim() === '') problems.push(`${title}: a target without expr`);
      if (typeof t.refId !== 'string' || refIds.has(t.refId)) problems.push(`${title}: refId missing or used twice`);
      refIds.add(t.refId);
      if (get(t.datasource, 'uid') !== '${datasource}') problems.push(`${title}: target ${String(t.refId)} datasource is not \${datasource}`);
    }
  }
  return problems;
}

/** Every PromQL expression of a dashboard, with where it is and its legend. */
function expressions(d: Dashboard): { where: string; expr: string; legend?: string }[] {
  return allPanels(d).flatMap((p) =>
    (p.targets ?? []).map((t) => ({
      where: `${String(p.title)} / ${String(t.refId)}`,
      expr: String(t.expr),
      ...(typeof t.legendFormat === 'string' ? { legend: t.legendFormat } : {}),
    })),
  );
}

/** Problems of a dashboard's queries and variables against the known series; empty when fine. */
export function queryProblems(d: Dashboard, known: ReadonlyMap<string, Series>): string[] {
  const problems: string[] = [];
  const vars = d.templating?.list ?? [];
  const defined = new Set(vars.map((v) => v.name));
  for (const { where, expr, legend } of expressions(d)) {
    problems.push(...exprProblems(expr, known, legend).map((p) => `${where}: ${p}`));
    for (const v of variablesUsed(expr)) if (!defined.has(v)) problems.push(`${where}: $${v} is not a template variable`);
  }
  for (const v of vars) {
    const q = typeof v.query === 'string' ? v.query : typeof get(v.query, 'query') === 'string' ? String(get(v.query, 'query')) : '';
    if (v.type !== 'query') continue;
    const lv = /^label_values\(\s*([a-z0-9_]+)\s*,\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*\)$/.exec(q);
    if (!lv) {
      problems.push(`variable ${String(v.name)}: expected label_values(<series>, <label>), got ${q}`);
      continue;
    }
    const s = known.get(lv[1]!);
    if (!s) problems.push(`variable ${String(v.name)}: ${lv[1]} is no known series`);
    else if (![...s.labels, ...s.targetLabels].includes(lv[2]!)) problems.push(`variable ${String(v.name)}: ${lv[1]} has no label ${lv[2]}`);
    for (const u of variablesUsed(JSON.stringify(v.datasource ?? ''))) if (!defined.has(u)) problems.push(`variable ${String(v.name)}: $${u} undefined`);
  }
  for (const p of allPanels(d)) {
    for (const u of variablesUsed(JSON.stringify(p.datasource ?? ''))) if (!defined.has(u)) problems.push(`${String(p.title)}: $${u} undefined`);
  }
  return problems;
}

describe('Grafana dashboard (deploy/monitoring/grafana-dashboard.json)', async () => {
  const known = await registeredSeries();
  const dashboard = loadDashboard();

  it('is well-formed: unique ids, gridPos on the grid without overlaps, targets with expr, units, ${datasource}', () => {
    assert.deepEqual(structureProblems(dashboard), []);
    assert.ok(allPanels(dashboard).some((p) => p.type === 'row'), 'panels are grouped in rows');
  });

  it('defines $datasource (Prometheus) and $node (label_values of oversell_node_applied_ratio)', () => {
    const vars = dashboard.templating?.list ?? [];
    const ds = vars.find((v) => v.name === 'datasource');
    assert.equal(ds?.type, 'datasource');
    assert.equal(ds?.query, 'prometheus');
    const node = vars.find((v) => v.name === 'node');
    assert.equal(node?.type, 'query');
    assert.equal(get(node?.datasource, 'uid'), '${datasource}');
    assert.equal(get(node?.query, 'query') ?? node?.query, 'label_values(oversell_node_applied_ratio, node)');
    assert.ok(expressions(dashboard).some((e) => variablesUsed(e.expr).includes('node')), 'some query filters by $node');
  });

  it('every query uses real series (names, types, labels) and only defined variables', () => {
    assert.deepEqual(queryProblems(dashboard, known), []);
  });

  it('shows every series of the gateway and the agent', () => {
    const used = new Set(expressions(dashboard).flatMap((e) => metricNames(e.expr).map((n) => seriesOf(n, known)?.series ?? n)));
    for (const name of [...GATEWAY_SERIES, ...AGENT_SERIES]) assert.ok(used.has(name), `no panel uses ${name}`);
  });

  it('has the panels the issue asks for', () => {
    const all = expressions(dashboard).map((e) => e.expr).join('\n');
    assert.match(all, /\(oversell_node_applied_ratio\{resource="cpu"\}\) - 1\) \* on \(node, resource\) max by \(node, resource\) \(oversell_node_raw_allocatable/, 'headroom gained, cpu');
    assert.match(all, /histogram_quantile\(0\.99, sum by \(outcome, le\) \(rate\(oversell_webhook_request_duration_seconds_bucket/, 'webhook p99 by outcome');
    assert.match(all, /histogram_quantile\(0\.5, sum by \(outcome, le\)/, 'webhook p50 by outcome');
    assert.match(all, /count\(max by \(node\) \(oversell_node_sample_age_seconds\) > 40\)/, 'stale agents');
    assert.match(all, /sum by \(resource, bound\) \(rate\(oversell_decisions_total/, 'decisions by bound');
  });

  it('stays small enough for a ConfigMap applied with kubectl apply (last-applied annotation < 256 KiB)', () => {
    assert.ok(Buffer.byteLength(read(DASHBOARD)) < 200 * 1024);
  });

  it('the checks fail on broken dashboards', () => {
    const typo = structuredClone(dashboard);
    const t = typo.panels?.find((p) => p.targets?.length)?.targets?.[0];
    assert.ok(t && typeof t.expr === 'string');
    t.expr = t.expr.replace(/oversell_node_applied_ratio/g, 'oversell_node_aplied_ratio');
    assert.ok(queryProblems(typo, known).some((p) => p.includes('oversell_node_aplied_ratio')), 'a misspelt metric fails');

    const badVar = structuredClone(dashboard);
    badVar.templating = { list: (badVar.templating?.list ?? []).filter((v) => v.name !== 'node') };
    assert.ok(queryProblems(badVar, known).some((p) => p.includes('$node is not a template variable')), 'an undefined $node fails');

    const dup = structuredClone(dashboard);
    const [a, b] = (dup.panels ?? []).filter((p) => p.type !== 'row');
    assert.ok(a && b);
    b.id = a.id;
    b.gridPos = { ...a.gridPos };
    const problems = structureProblems(dup);
    assert.ok(problems.some((p) => p.includes('used twice')) && problems.some((p) => p.includes('overlaps')), 'duplicate ids and overlapping panels fail');
  });
});

describe('PromQL checks', async () => {
  const known = await registeredSeries();
  const bad = (expr: string, legend?: string) => exprProblems(expr, known, legend);

  it('accept correct queries', () => {
    assert.deepEqual(bad('sum by (outcome, le) (rate(oversell_webhook_request_duration_seconds_bucket{outcome="patched"}[5m]))', '{{outcome}}'), []);
    assert.deepEqual(bad('max by (node) (oversell_node_sample_age_seconds{node=~"$node"}) > 40'), []);
    assert.deepEqual(bad('sum(increase(oversell_agent_stream_reconnects_total{node=~"a|b"}[1h]))'), []);
    assert.deepEqual(bad('up{job="oversell-gateway", namespace="oversell"}'), [], 'label values and other metrics are not checked');
  });

  it('reject unknown names, bare histograms, counters without rate, wrong labels, broken brackets', () => {
    assert.equal(bad('rate(oversell_decision_total[5m])').length, 1);
    assert.match(bad('oversell_webhook_request_duration_seconds')[0] ?? '', /histogram/);
    assert.match(bad('sum(oversell_decisions_total)')[0] ?? '', /cumulative/);
    assert.match(bad('rate(oversell_decisions_total{bond="cap"}[5m])')[0] ?? '', /no label bond/);
    assert.match(bad('sum by (outcom) (rate(oversell_webhook_request_duration_seconds_count[5m]))')[0] ?? '', /label outcom/);
    assert.match(bad('oversell_agents_connected', '{{node}}')[0] ?? '', /legend/);
    assert.match(bad('sum(rate(oversell_decisions_total[5m])')[0] ?? '', /unclosed/);
    assert.match(bad('oversell_agent_sampling_duration_seconds_sum')[0] ?? '', /cumulative/);
  });

  it('find variables but not built-ins', () => {
    assert.deepEqual(variablesUsed('rate(x{node=~"$node", a="${datasource}"}[$__rate_interval]) [[legacy]]'), ['node', 'datasource', 'legacy']);
  });
});

describe('Prometheus-operator manifests (deploy/monitoring)', async () => {
  const known = await registeredSeries();

  it('ServiceMonitor scrapes the gateway Service port "metrics" (9090) in namespace oversell', () => {
    const sm = only('deploy/monitoring/servicemonitor.yaml', 'ServiceMonitor');
    assert.equal(sm.apiVersion, 'monitoring.coreos.com/v1');
    assert.equal(get(sm, 'metadata.namespace'), 'oversell');
    assert.deepEqual(get(sm, 'spec.namespaceSelector.matchNames'), ['oversell']);
    const endpoints = arr(get(sm, 'spec.endpoints'), 'spec.endpoints');
    assert.equal(endpoints.length, 1);
    assert.equal(get(endpoints[0], 'port'), 'metrics');
    assert.equal(get(endpoints[0], 'path') ?? '/metrics', '/metrics');
    const selector = obj(get(sm, 'spec.selector.matchLabels'), 'spec.selector.matchLabels');

    // The Service it selects has that port, and it leads to the gateway container's 9090.
    const base = docs('deploy/base/gateway.yaml');
    const svc = base.find((d) => d.kind === 'Service' && get(d, 'metadata.name') === 'oversell-gateway');
    assert.ok(svc, 'Service oversell-gateway in deploy/base/gateway.yaml');
    const labels = obj(get(svc, 'metadata.labels'), 'Service labels');
    for (const [k, v] of Object.entries(selector)) assert.equal(labels[k], v, `the ServiceMonitor selects the Service by ${k}`);
    const port = arr(get(svc, 'spec.ports'), 'Service ports').find((p) => get(p, 'name') === 'metrics');
    assert.ok(port, 'the Service has a port named metrics');
    const deployment = base.find((d) => d.kind === 'Deployment');
    const containerPorts = arr(get(arr(get(deployment, 'spec.template.spec.containers'), 'containers')[0], 'ports'), 'container ports');
    const target = get(port, 'targetPort');
    const cp = containerPorts.find((p) => get(p, 'name') === target || get(p, 'containerPort') === target);
    assert.equal(get(cp, 'containerPort'), 9090);
  });

  it('PodMonitor scrapes every agent pod on its metrics port (9091), labelled with its node', () => {
    const pm = only('deploy/monitoring/podmonitor.yaml', 'PodMonitor');
    assert.equal(pm.apiVersion, 'monitoring.coreos.com/v1');
    assert.equal(get(pm, 'metadata.namespace'), 'oversell');
    assert.deepEqual(get(pm, 'spec.namespaceSelector.matchNames'), ['oversell']);
    const ds = only('deploy/base/agent.yaml', 'DaemonSet');
    const podLabels = obj(get(ds, 'spec.template.metadata.labels'), 'agent pod labels');
    for (const [k, v] of Object.entries(obj(get(pm, 'spec.selector.matchLabels'), 'selector'))) {
      assert.equal(podLabels[k], v, `the PodMonitor selects the agent pods by ${k}`);
    }
    const container = obj(arr(get(ds, 'spec.template.spec.containers'), 'containers')[0], 'agent container');

    // The agent's metrics port: --metrics-address / OVERSELL_AGENT_METRICS_ADDRESS in the DaemonSet, else the flag's default.
    const option = defineAgentFlags().options.find((o) => o.long === '--metrics-address');
    const fromEnv = (Array.isArray(container.env) ? container.env : []).find((e) => get(e, 'name') === option?.envVar);
    const address = fromEnv ? String(get(fromEnv, 'value')) : option?.defaultValue as string | undefined;
    assert.ok(address, 'the agent\'s metrics address (flag default in agent/flags.ts)');
    const agentPort = Number(address.slice(address.lastIndexOf(':') + 1));
    assert.equal(agentPort, 9091);

    const ep = obj(arr(get(pm, 'spec.podMetricsEndpoints'), 'podMetricsEndpoints')[0], 'endpoint');
    assert.equal(ep.path ?? '/metrics', '/metrics');
    const declared = (Array.isArray(container.ports) ? container.ports : []).find((p) => get(p, 'containerPort') === agentPort);
    if (declared && ep.port !== undefined) {
      assert.equal(ep.port, get(declared, 'name'), 'port names a declared container port');
    } else {
      // No declared port: Prometheus makes one port-free target per container; the relabelings must pick
      // the agent container and give it <pod IP>:port, for IPv4 and IPv6.
      assert.equal(ep.port, undefined, 'port/portNumber only match declared ports, and the agent declares none');
      assert.equal(ep.portNumber, undefined, 'port/portNumber only match declared ports, and the agent declares none');
      const rl = arr(ep.relabelings, 'relabelings').map((r) => obj(r, 'relabeling'));
      const keep = rl.find((r) => r.action === 'keep' && JSON.stringify(r.sourceLabels) === '["__meta_kubernetes_pod_container_name"]');
      assert.equal(keep?.regex, container.name, 'keeps only the agent container');
      const address = rl.filter((r) => r.targetLabel === '__address__');
      const rewrite = (ip: string) => {
        let out: string | undefined;
        for (const r of address) {
          const m = new RegExp(`^(?:${String(r.regex)})$`).exec(ip);
          if (m) out = String(r.replacement).replace(/\$(\d)/g, (_, i: string) => m[Number(i)] ?? '');
        }
        return out;
      };
      assert.equal(rewrite('10.1.2.3'), `10.1.2.3:${agentPort}`);
      assert.equal(rewrite('fd00:10:244::7'), `[fd00:10:244::7]:${agentPort}`);
    }
    assert.ok(podMonitorTargetLabels().includes('node'), 'agent series get the label node (the gateway\'s name for nodes)');
    const nodeRule = arr(ep.relabelings, 'relabelings').find((r) => get(r, 'targetLabel') === 'node');
    assert.deepEqual(get(nodeRule, 'sourceLabels'), ['__meta_kubernetes_pod_node_name']);
  });

  it('PrometheusRule: every alert has a severity and a summary, queries real series, and is in docs/metrics.md', () => {
    const pr = only('deploy/monitoring/prometheusrule.yaml', 'PrometheusRule');
    assert.equal(pr.apiVersion, 'monitoring.coreos.com/v1');
    assert.equal(get(pr, 'metadata.namespace'), 'oversell');
    const doc = read('docs/metrics.md');
    const names = new Set<string>();
    for (const g of arr(get(pr, 'spec.groups'), 'groups')) {
      for (const r of arr(get(g, 'rules'), 'rules').map((x) => obj(x, 'rule'))) {
        const alert = str(r.alert, 'alert');
        assert.ok(!names.has(alert), `${alert} twice`);
        names.add(alert);
        assert.match(String(r.for), /^\d+[smh]$/, `${alert}: for`);
        assert.match(String(get(r, 'labels.severity')), /^(critical|warning|info)$/, `${alert}: severity`);
        assert.ok(str(get(r, 'annotations.summary'), `${alert} summary`).length > 0);
        assert.deepEqual(exprProblems(str(r.expr, `${alert} expr`), known), [], alert);
        assert.deepEqual(variablesUsed(String(r.expr)), [], `${alert}: no Grafana variables in rules`);
        assert.ok(doc.includes(alert), `docs/metrics.md describes ${alert}`);
      }
    }
    assert.ok(names.size >= 4);
  });

  it('a kustomize Component lists the monitors and generates the dashboard ConfigMap for the Grafana sidecar', () => {
    const k = only('deploy/monitoring/kustomization.yaml', 'Component');
    assert.equal(k.apiVersion, 'kustomize.config.k8s.io/v1alpha1');
    // A Component's transformers apply to everything it is added to: no namespace, labels or generatorOptions of its own.
    for (const key of ['namespace', 'labels', 'commonLabels', 'generatorOptions', 'patches']) assert.equal(k[key], undefined, `the Component sets ${key}`);
    assert.deepEqual([...arr(k.resources, 'resources')].sort(), ['podmonitor.yaml', 'prometheusrule.yaml', 'servicemonitor.yaml']);
    const gen = arr(k.configMapGenerator, 'configMapGenerator').map((g) => obj(g, 'generator'));
    assert.equal(gen.length, 1);
    assert.equal(gen[0]!.namespace, 'oversell');
    assert.deepEqual(gen[0]!.files, ['grafana-dashboard.json']);
    assert.equal(get(gen[0], 'options.labels.grafana_dashboard'), '1');
    assert.equal(get(gen[0], 'options.disableNameSuffixHash'), true, 'a stable name: no second copy of the dashboard uid');
    // Optional for oversell itself (the CRDs may be absent): not part of deploy/.
    assert.doesNotMatch(read('deploy/kustomization.yaml'), /monitoring/);
    const overlay = only('deploy/overlays/monitoring/kustomization.yaml', 'Kustomization');
    assert.deepEqual(overlay.components, ['../../monitoring']);
    assert.equal(overlay.resources, undefined, 'overlays/monitoring is the monitoring objects alone');
  });

  it('kubectl kustomize renders overlays/monitoring (skipped without kubectl)', (t) => {
    const kubectl = process.env.OVERSELL_KUBECTL ?? 'kubectl';
    const r = spawnSync(kubectl, ['kustomize', repo + 'deploy/overlays/monitoring'], { encoding: 'utf8', maxBuffer: 16 << 20 });
    if (r.error) {
      t.skip(`no kubectl (${kubectl})`);
      return;
    }
    assert.equal(r.status, 0, r.stderr);
    const rendered = (loadAllYaml(r.stdout) as unknown[]).map((d) => obj(d, 'rendered'));
    assert.deepEqual(rendered.map((d) => d.kind).sort(), ['ConfigMap', 'PodMonitor', 'PrometheusRule', 'ServiceMonitor']);
    for (const d of rendered) assert.equal(get(d, 'metadata.namespace'), 'oversell');
    const cm = rendered.find((d) => d.kind === 'ConfigMap');
    assert.equal(get(cm, 'metadata.name'), 'oversell-grafana-dashboard');
    assert.equal(get(cm, 'metadata.labels.grafana_dashboard'), '1');
    assert.equal(obj(get(cm, 'data'), 'ConfigMap data')['grafana-dashboard.json'], read(DASHBOARD));
  });
});

describe('docs/metrics.md', () => {
  it('documents every series', () => {
    const doc = read('docs/metrics.md');
    for (const name of [...GATEWAY_SERIES, ...AGENT_SERIES]) assert.ok(doc.includes(`\`${name}\``), `docs/metrics.md lacks ${name}`);
    assert.match(doc, /kubectl apply -k deploy\/overlays\/monitoring/);
    assert.match(doc, /components:\s*(\[|- )[^\]\n]*deploy\/monitoring\b/);
    assert.match(doc, /monitoring\.enabled=true/);
  });
});
