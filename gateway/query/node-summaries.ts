// The columns `oversell top` shows, for many nodes in one NodeSummaries
// message (ListNodeSummaries). The numbers are those nodeStatus() gives for
// the same record; what a table does not show (the reason text, the window
// statistics, host facts, labels) is never computed.
import type { NodeSummaries__Output } from '../../proto/gen/oversell/v1/NodeSummaries.js';
import { decideForNode } from '../admit/node-review.js';
import { windowStart } from '../decide/usage-stats.js';
import { DEFAULT_POLICY } from '../decide/policy.js';
import type { PolicyEntry } from '../decide/select-policy.js';
import { usageOf, type NodeRecord } from '../store/node-store.js';

export interface NodeSummaryColumns {
  /** Appends one node; `entry` is the policy governing it (policies.select of its labels). */
  add(record: NodeRecord, entry: PolicyEntry | undefined, nowMs: number): void;
  readonly summaries: NodeSummaries__Output;
}

export function nodeSummaryColumns(): NodeSummaryColumns {
  const s: NodeSummaries__Output = {
    name: [], connected: [], hasSample: [], ageMs: [],
    cpuUsageMillicores: [], memoryWorkingSetBytes: [], capacityCpuMillicores: [], capacityMemoryBytes: [],
    requestsKnown: [], requestsCpuMillicores: [], requestsMemoryBytes: [],
    pressureAvailable: [], cpuPressure: [], memoryPressure: [],
    rawAllocatableKnown: [], rawCpuMillicores: [], rawMemoryBytes: [],
    allocatableCpuMillicores: [], allocatableMemoryBytes: [],
    windowSamples: [], policy: [], cpuBound: [], memoryBound: [],
    texts: [''],
  };
  // A handful of policy and bound names repeat over every node: each is sent once.
  const indexOf = new Map<string, number>([['', 0]]);
  const text = (t: string) => {
    let i = indexOf.get(t);
    if (i === undefined) {
      i = s.texts.push(t) - 1;
      indexOf.set(t, i);
    }
    return i;
  };

  return {
    summaries: s,
    add(record, entry, nowMs) {
      const latest = record.latest;
      const raw = record.raw;
      s.name.push(record.name);
      s.connected.push(record.streamId !== undefined);
      s.hasSample.push(latest !== undefined);
      // usageOf()'s age, without the object it builds for decide(): only nodes with a raw allocatable need that.
      s.ageMs.push(latest ? Math.max(0, nowMs - record.receivedAtMs) : 0);
      s.cpuUsageMillicores.push(latest?.cpuUsageMillicores ?? 0);
      s.memoryWorkingSetBytes.push(latest?.memoryWorkingSetBytes ?? 0);
      s.capacityCpuMillicores.push(latest?.capacity?.cpuMillicores ?? 0);
      s.capacityMemoryBytes.push(latest?.capacity?.memoryBytes ?? 0);
      s.requestsKnown.push(latest?.requests?.known ?? false);
      s.requestsCpuMillicores.push(latest?.requests?.cpuMillicores ?? 0);
      s.requestsMemoryBytes.push(latest?.requests?.memoryBytes ?? 0);
      s.pressureAvailable.push(latest?.pressure?.available ?? false);
      s.cpuPressure.push(latest?.pressure?.cpuSome?.avg10 ?? 0);
      s.memoryPressure.push(latest?.pressure?.memorySome?.avg10 ?? 0);
      s.windowSamples.push(record.window.length - windowStart(record.window, entry?.policy?.windowMs ?? DEFAULT_POLICY.windowMs));
      s.policy.push(text(entry?.name ?? ''));
      s.rawAllocatableKnown.push(raw !== undefined);
      s.rawCpuMillicores.push(raw ? Number(raw.cpuMillicores) : 0);
      s.rawMemoryBytes.push(raw ? Number(raw.memoryBytes) : 0);
      if (raw) {
        const d = decideForNode(raw, undefined, usageOf(record, nowMs), entry);
        s.allocatableCpuMillicores.push(Number(d.cpu.applied));
        s.allocatableMemoryBytes.push(Number(d.memory.applied));
        s.cpuBound.push(text(d.cpu.bound));
        s.memoryBound.push(text(d.memory.bound));
      } else {
        s.allocatableCpuMillicores.push(0);
        s.allocatableMemoryBytes.push(0);
        s.cpuBound.push(0);
        s.memoryBound.push(0);
      }
    },
  };
}
