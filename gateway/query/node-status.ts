// A store record as the query API shows it, with the decision the next kubelet
// write would get (same pure policy the webhook uses).
import type { NodeStatus } from '../../proto/gen/oversell/v1/NodeStatus.js';
import { decideObserved, type PolicyEntryWithHarm } from '../decide/node-decision.js';
import { riskBudgetState } from '../decide/policy.js';
import { summarize, windowStart } from '../../lib/usage/usage-stats.js';
import type { PolicySource } from '../policies/policy-source.js';
import { usageOf, type NodeRecord } from '../store/node-store.js';
import type { NodeRequests } from '../store/bound-requests.js';

export function nodeStatus(record: NodeRecord, policies: PolicySource, nowMs: number, boundRequests?: (node: string) => NodeRequests | undefined): NodeStatus {
  const usage = usageOf(record, nowMs);
  const entry: PolicyEntryWithHarm | undefined = policies.select(record.labels);
  const summary = summarize(record.window, windowStart(record.window, entry?.policy?.windowMs ?? 60_000));
  const status: NodeStatus = {
    name: record.name,
    connected: record.streamId !== undefined,
    instanceId: record.instanceId,
    host: record.host,
    latest: record.latest ?? null,
    receivedAtMs: record.receivedAtMs,
    ageMs: usage?.ageMs ?? 0,
    window: {
      samples: summary.samples,
      spanMs: summary.spanMs,
      cpuP95Millicores: summary.cpuP95Millicores,
      memoryMaxBytes: summary.memoryMaxBytes,
    },
    rawAllocatableKnown: record.raw !== undefined,
    labels: record.labels,
    policy: entry?.name ?? '',
  };
  if (record.raw) {
    status.rawAllocatable = { cpuMillicores: Number(record.raw.cpuMillicores), memoryBytes: Number(record.raw.memoryBytes) };
    const d = decideObserved(record.raw, record, { usage, entry, boundRequests: boundRequests?.(record.name) });
    const pair = (cpu: bigint, memory: bigint) => ({ cpuMillicores: Number(cpu), memoryBytes: Number(memory) });
    status.decision = {
      allocatable: pair(d.cpu.applied, d.memory.applied),
      granted: pair(d.cpu.granted, d.memory.granted),
      floor: pair(d.cpu.floor, d.memory.floor),
      cap: pair(d.cpu.cap, d.memory.cap),
      // Under pressure or stale data no statistic was needed; show the window's anyway.
      usage: { cpuMillicores: Math.round(d.cpu.usage ?? summary.cpuP95Millicores), memoryBytes: Math.round(d.memory.usage ?? summary.memoryMaxBytes) },
      cpuBound: d.cpu.decidedBy,
      memoryBound: d.memory.decidedBy,
      reason: d.reason,
      dryRun: d.dryRun,
    };
    const budget = riskBudgetState(entry?.policy, entry?.harm);
    if (budget) status.decision.budget = budget;
  }
  return status;
}
