// OversellPolicy objects (oversell.io/v1alpha1) into the policy the decision
// uses. The API server validates and defaults through the CRD schema; this
// checks again, because a policy read from a cluster whose CRD is older, or
// edited with validation off, must give a clear error and no inflation, never a
// crash or a nonsense grant.
import { parseDuration } from '../../lib/duration.js';
import { DEFAULT_POLICY, type Policy, type ResourcePolicy, type RiskBudget } from '../decide/policy.js';
import { DEFAULT_PROTECT, type ProtectPolicy } from '../decide/tiers.js';
import type { LabelSelector } from '../../lib/label-selector.js';
import type { PolicyEntry } from '../decide/select-policy.js';
import { STATISTICS, type Statistic } from '../../lib/usage/usage-stats.js';
import { kubeletSettableKeys, NODE_RESTRICTION_PREFIX } from './kubelet-labels.js';

/** A selector on labels a node's own kubelet may set lets a node choose its policy: said in the policy's status. */
export function selectorWarnings(selector: LabelSelector): string[] {
  const keys = kubeletSettableKeys(selector);
  if (keys.length === 0) return [];
  return [
    `spec.nodeSelector uses ${keys.map((k) => JSON.stringify(k)).join(', ')}, which a node's own kubelet may set on its Node: ` +
      `a node (or a stolen kubelet credential) can move itself into or out of this policy. Select on labels under ${NODE_RESTRICTION_PREFIX}, ` +
      'which the NodeRestriction admission plugin forbids kubelets to set (docs/policy.md)',
  ];
}

export const POLICY_GROUP = 'oversell.io';
export const POLICY_VERSION = 'v1alpha1';
export const POLICY_PLURAL = 'oversellpolicies';

export interface OversellPolicyObject {
  apiVersion?: string;
  kind?: string;
  metadata?: { name?: string; generation?: number; resourceVersion?: string };
  spec?: Record<string, unknown>;
  status?: Record<string, unknown>;
}

/** The CRD's bound on maxRatio (and learningMaxRatio), checked again here. */
export const MAX_RATIO = 10;

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

function num(obj: Record<string, unknown>, key: string, fallback: number, min: number, max: number, where: string): number {
  const v = obj[key];
  if (v === undefined) return fallback;
  if (typeof v !== 'number' || !Number.isFinite(v) || v < min || v > max) {
    throw new Error(`${where}.${key} must be a number in [${min}, ${max}], got ${JSON.stringify(v)}`);
  }
  return v;
}

function duration(obj: Record<string, unknown>, key: string, fallbackMs: number, where: string, zeroAllowed = false): number {
  const v = obj[key];
  if (v === undefined) return fallbackMs;
  if (typeof v !== 'string') throw new Error(`${where}.${key} must be a duration string like "60s"`);
  const ms = parseDuration(v, `${where}.${key}`);
  if (ms < 0 || (ms === 0 && !zeroAllowed)) throw new Error(`${where}.${key} must be ${zeroAllowed ? 'zero or more' : 'positive'}`);
  return ms;
}

function resource<T extends ResourcePolicy>(spec: Record<string, unknown>, name: 'cpu' | 'memory', defaults: T): T {
  const where = `spec.${name}`;
  const r = spec[name] ?? {};
  if (!isObject(r)) throw new Error(`${where} must be an object`);
  const stat = r.statistic ?? defaults.statistic;
  if (!STATISTICS.includes(stat as Statistic)) throw new Error(`${where}.statistic must be one of ${STATISTICS.join(', ')}`);
  const out = {
    ...defaults,
    maxRatio: num(r, 'maxRatio', defaults.maxRatio, 1, MAX_RATIO, where),
    targetUtilization: num(r, 'targetUtilization', defaults.targetUtilization, 0.01, 1, where),
    minLoadFactor: num(r, 'minLoadFactor', defaults.minLoadFactor, 0.01, 1, where),
    statistic: stat as Statistic,
    pressureThreshold: num(r, 'pressureThreshold', defaults.pressureThreshold, 0, 100, where),
    riskBudget: riskBudget(r, name, defaults.riskBudget, where),
  };
  if (name === 'memory') {
    (out as unknown as Policy['memory']).workingSetThreshold = num(r, 'workingSetThreshold', DEFAULT_POLICY.memory.workingSetThreshold, 0.1, 1, where);
  }
  return out;
}

/**
 * What a risk budget may say: the CRD's bounds, checked again by each reader
 * of one (this parser and the gateway's flags). Memory past its budget evicts
 * pods: at most 1 % of node-time over the prediction, and then with room below
 * the eviction line.
 */
export const RISK_BUDGET_BOUNDS = { maxOverShare: { cpu: 0.1, memory: 0.01 }, maxMargin: 0.5, memoryMarginWhenExceeded: 0.05 } as const;

/** The CRD's cross-field rule: why this budget is refused, or undefined. */
export function riskBudgetConflict(resource: 'cpu' | 'memory', b: RiskBudget): string | undefined {
  const least = RISK_BUDGET_BOUNDS.memoryMarginWhenExceeded;
  return resource === 'memory' && b.enabled && b.overShare > 0 && b.margin < least
    ? `a memory budget that may be exceeded (overShare above 0) needs a margin of at least ${least}, or the exceeding is evictions`
    : undefined;
}

function riskBudget(r: Record<string, unknown>, name: 'cpu' | 'memory', defaults: RiskBudget, where: string): RiskBudget {
  const b = r.riskBudget ?? {};
  const at = `${where}.riskBudget`;
  if (!isObject(b)) throw new Error(`${at} must be an object`);
  const enabled = b.enabled ?? defaults.enabled;
  if (typeof enabled !== 'boolean') throw new Error(`${at}.enabled must be true or false`);
  const out = {
    enabled,
    overShare: num(b, 'overShare', defaults.overShare, 0, RISK_BUDGET_BOUNDS.maxOverShare[name], at),
    margin: num(b, 'margin', defaults.margin, 0, RISK_BUDGET_BOUNDS.maxMargin, at),
  };
  const conflict = riskBudgetConflict(name, out);
  if (conflict) throw new Error(`${at}: ${conflict}`);
  return out;
}

function history(spec: Record<string, unknown>): Policy['history'] {
  const h = spec.history ?? {};
  if (!isObject(h)) throw new Error('spec.history must be an object');
  const minSpanMs = duration(h, 'minSpan', DEFAULT_POLICY.history.minSpanMs, 'spec.history', true);
  if (minSpanMs > 7 * 86_400_000) throw new Error('spec.history.minSpan must be at most 168h');
  const learning = h.learning ?? DEFAULT_POLICY.history.learning;
  if (learning !== 'Targets' && learning !== 'Floor') throw new Error('spec.history.learning must be Targets or Floor');
  const caps = h.learningMaxRatio ?? {};
  if (!isObject(caps)) throw new Error('spec.history.learningMaxRatio must be an object');
  const d = DEFAULT_POLICY.history.learningMaxRatio;
  const learningMaxRatio = { cpu: num(caps, 'cpu', d.cpu, 1, MAX_RATIO, 'spec.history.learningMaxRatio'), memory: num(caps, 'memory', d.memory, 1, MAX_RATIO, 'spec.history.learningMaxRatio') };
  return { minSpanMs, learning, learningMaxRatio };
}

/** spec.relief: the lines and rate relief acts at (decide/relief.ts); the CRD's defaults when left out. */
function relief(spec: Record<string, unknown>): Policy['relief'] {
  const r = spec.relief ?? {};
  if (!isObject(r)) throw new Error('spec.relief must be an object');
  const d = DEFAULT_POLICY.relief;
  const enabled = r.enabled ?? d.enabled;
  if (typeof enabled !== 'boolean') throw new Error('spec.relief.enabled must be true or false');
  const memoryLine = num(r, 'memoryLine', d.memoryLine, 0.5, 0.99, 'spec.relief');
  const calmLine = num(r, 'calmLine', d.calmLine, 0.3, 0.99, 'spec.relief');
  if (calmLine >= memoryLine) throw new Error(`spec.relief.calmLine (${calmLine}) must be below memoryLine (${memoryLine}): relief frees memory down to the calm line`);
  const perNodePerMinute = num(r, 'perNodePerMinute', d.perNodePerMinute, 1, 60, 'spec.relief');
  if (!Number.isInteger(perNodePerMinute)) throw new Error('spec.relief.perNodePerMinute must be a whole number');
  return { enabled, memoryLine, calmLine, perNodePerMinute };
}

/** spec.protect: which pods never depend on oversold capacity (decide/tiers.ts); the CRD's defaults when left out. */
function protect(spec: Record<string, unknown>): ProtectPolicy {
  const p = spec.protect ?? {};
  if (!isObject(p)) throw new Error('spec.protect must be an object');
  const flag = (key: 'guaranteed' | 'exclusiveCpus'): boolean => {
    const v = p[key] ?? DEFAULT_PROTECT[key];
    if (typeof v !== 'boolean') throw new Error(`spec.protect.${key} must be true or false`);
    return v;
  };
  let minPriority = DEFAULT_PROTECT.minPriority;
  if (p.minPriority === null) minPriority = undefined;
  else if (p.minPriority !== undefined) {
    if (typeof p.minPriority !== 'number' || !Number.isInteger(p.minPriority) || p.minPriority < -2_147_483_648 || p.minPriority > 2_147_483_647) {
      throw new Error(`spec.protect.minPriority must be an int32 or null, got ${JSON.stringify(p.minPriority)}`);
    }
    minPriority = p.minPriority;
  }
  const namespaceSelector = p.namespaceSelector === null ? undefined : p.namespaceSelector === undefined ? DEFAULT_PROTECT.namespaceSelector : labelSelector(p.namespaceSelector, 'spec.protect.namespaceSelector');
  return { guaranteed: flag('guaranteed'), exclusiveCpus: flag('exclusiveCpus'), minPriority, namespaceSelector };
}

function labelSelector(s: unknown, where: string): LabelSelector {
  if (!isObject(s)) throw new Error(`${where} must be an object`);
  const matchLabels = s.matchLabels ?? {};
  const matchExpressions = s.matchExpressions ?? [];
  if (!isObject(matchLabels) || !Object.values(matchLabels).every((v) => typeof v === 'string')) {
    throw new Error(`${where}.matchLabels must map strings to strings`);
  }
  if (!Array.isArray(matchExpressions)) throw new Error(`${where}.matchExpressions must be a list`);
  for (const e of matchExpressions) {
    if (!isObject(e) || typeof e.key !== 'string' || !['In', 'NotIn', 'Exists', 'DoesNotExist'].includes(String(e.operator))) {
      throw new Error(`${where}.matchExpressions entries need a key and an operator In, NotIn, Exists or DoesNotExist`);
    }
  }
  const out = { matchLabels: matchLabels as Record<string, string>, matchExpressions: matchExpressions as LabelSelector['matchExpressions'] };
  if (Object.keys(out.matchLabels).length === 0 && (out.matchExpressions?.length ?? 0) === 0) {
    throw new Error(`${where} is empty; it would select everything. Name what it selects, or set it to null for none.`);
  }
  return out;
}

function selector(spec: Record<string, unknown>): LabelSelector {
  const s = spec.nodeSelector;
  if (!isObject(s)) throw new Error('spec.nodeSelector is required');
  try {
    return labelSelector(s, 'spec.nodeSelector');
  } catch (err) {
    // The node pool must be named: an empty selector would govern every node.
    throw new Error((err as Error).message.replace(/it would select everything\. .*$/, 'it would select every node. Name the node pool.'));
  }
}

/** Never throws: an invalid object becomes an entry with no policy and the reason. */
export function toPolicyEntry(obj: OversellPolicyObject): PolicyEntry {
  const name = obj.metadata?.name ?? '(unnamed)';
  const spec = isObject(obj.spec) ? obj.spec : {};
  const priority = typeof spec.priority === 'number' && Number.isInteger(spec.priority) ? spec.priority : 0;
  let sel: LabelSelector = {};
  try {
    sel = selector(spec);
    const mode = spec.mode ?? 'Enforce';
    if (mode !== 'Enforce' && mode !== 'DryRun') throw new Error('spec.mode must be Enforce or DryRun');
    const policy: Policy = {
      name,
      mode,
      cpu: resource(spec, 'cpu', DEFAULT_POLICY.cpu),
      memory: resource(spec, 'memory', DEFAULT_POLICY.memory),
      windowMs: duration(spec, 'window', DEFAULT_POLICY.windowMs, 'spec'),
      staleAfterMs: duration(spec, 'staleAfter', DEFAULT_POLICY.staleAfterMs, 'spec'),
      calmPeriodMs: duration(spec, 'calmPeriod', DEFAULT_POLICY.calmPeriodMs, 'spec', true),
      hysteresis: num(spec, 'hysteresis', DEFAULT_POLICY.hysteresis, 0, 1, 'spec'),
      startupGraceMs: duration(spec, 'startupGrace', DEFAULT_POLICY.startupGraceMs, 'spec', true),
      history: history(spec),
      protect: protect(spec),
      relief: relief(spec),
    };
    const warnings = selectorWarnings(sel);
    return { name, priority, selector: sel, policy, ...(warnings.length > 0 && { warnings }) };
  } catch (err) {
    return { name, priority, selector: sel, policy: undefined, error: (err as Error).message };
  }
}
