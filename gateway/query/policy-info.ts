// The policies as the query API (and `oversell get policies`) shows them.
import type { PolicyInfo } from '../../proto/gen/oversell/v1/PolicyInfo.js';
import type { LabelSelector } from '../../lib/label-selector.js';
import type { PolicySource } from '../policies/policy-source.js';
import type { NodeRecord } from '../store/node-store.js';

export function selectorText(s: LabelSelector): string {
  const parts = Object.entries(s.matchLabels ?? {}).map(([k, v]) => `${k}=${v}`);
  for (const e of s.matchExpressions ?? []) {
    if (e.operator === 'Exists') parts.push(e.key);
    else if (e.operator === 'DoesNotExist') parts.push(`!${e.key}`);
    else parts.push(`${e.key} ${e.operator.toLowerCase()} (${(e.values ?? []).join(',')})`);
  }
  return parts.join(',');
}

export function policyInfos(policies: PolicySource, nodes: readonly NodeRecord[]): PolicyInfo[] {
  const counts = new Map<string, number>();
  for (const n of nodes) {
    const e = policies.select(n.labels);
    if (e) counts.set(e.name, (counts.get(e.name) ?? 0) + 1);
  }
  return policies.entries().map((e) => ({
    name: e.name,
    priority: e.priority,
    mode: e.policy?.mode ?? '',
    valid: e.policy !== undefined,
    error: e.error ?? '',
    matchedNodes: counts.get(e.name) ?? 0,
    nodeSelector: policies.kind === 'flags' ? '(every node sent to the webhook)' : selectorText(e.selector),
    cpuMaxRatio: e.policy?.cpu.maxRatio ?? 0,
    memoryMaxRatio: e.policy?.memory.maxRatio ?? 0,
    source: policies.kind,
  }));
}
