// A store record as the query API shows it, with the decision the next kubelet
// write would get (same pure policy the webhook uses).
import type { NodeStatus } from '../../proto/gen/oversell/v1/NodeStatus.js';
import { decide, type Policy } from '../decide/policy.js';
import { usageOf, type NodeRecord } from '../store/node-store.js';

export function nodeStatus(record: NodeRecord, policy: Policy, nowMs: number): NodeStatus {
  const usage = usageOf(record, nowMs);
  const status: NodeStatus = {
    name: record.name,
    connected: record.streamId !== undefined,
    instanceId: record.instanceId,
    host: record.host,
    latest: record.latest ?? null,
    receivedAtMs: record.receivedAtMs,
    ageMs: usage?.ageMs ?? 0,
    window: {
      samples: record.summary.samples,
      spanMs: record.summary.spanMs,
      cpuP95Millicores: record.summary.cpuP95Millicores,
      memoryMaxBytes: record.summary.memoryMaxBytes,
    },
    rawAllocatableKnown: record.raw !== undefined,
  };
  if (record.raw) {
    status.rawAllocatable = { cpuMillicores: Number(record.raw.cpuMillicores), memoryBytes: Number(record.raw.memoryBytes) };
    const d = decide(record.raw, usage, policy);
    status.decision = {
      allocatable: { cpuMillicores: Number(d.cpu.granted), memoryBytes: Number(d.memory.granted) },
      cpuBound: d.cpu.bound,
      memoryBound: d.memory.bound,
      reason: d.reason,
    };
  }
  return status;
}
