// `oversell record`: polls the gateway's query API and writes what each node
// reported (usage, capacity, raw allocatable, bound requests) as a trace that
// `oversell simulate --trace` replays. Each poll is appended as it comes, so
// a recording stopped early (Ctrl-C) is still a valid trace.
import { appendFileSync, writeFileSync } from 'node:fs';
import type { NodeStatus__Output } from '../proto/gen/oversell/v1/NodeStatus.js';
import { traceHeader, tracePoll, type TraceNode } from '../sim/trace.js';

export interface RecordOptions {
  intervalMs: number;
  durationMs: number;
  out: string;
}

/** A poll's nodes as the trace keeps them, and how many were left out: no sample yet, or raw allocatable not established. */
export function traceNodes(nodes: readonly NodeStatus__Output[]): { nodes: TraceNode[]; skipped: number; requestsUnknown: number } {
  const out: TraceNode[] = [];
  let requestsUnknown = 0;
  for (const n of nodes) {
    const s = n.latest;
    if (!s?.capacity || !n.rawAllocatableKnown || !n.rawAllocatable) continue;
    // Unknown requests (an agent without cluster access) are recorded as none: the replay's floor is then raw.
    if (!s.requests?.known) requestsUnknown += 1;
    const known = s.requests?.known === true;
    out.push({
      name: n.name,
      capacity: { cpu: Number(s.capacity.cpuMillicores), memory: Number(s.capacity.memoryBytes) },
      raw: { cpu: Number(n.rawAllocatable.cpuMillicores), memory: Number(n.rawAllocatable.memoryBytes) },
      usage: { cpu: Number(s.cpuUsageMillicores), memory: Number(s.memoryWorkingSetBytes) },
      requests: { cpu: known ? Number(s.requests?.cpuMillicores ?? 0) : 0, memory: known ? Number(s.requests?.memoryBytes ?? 0) : 0 },
    });
  }
  out.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  return { nodes: out, skipped: nodes.length - out.length, requestsUnknown };
}

/** Polls until the duration is over or stop() says so; returns the polls written. */
export async function record(
  list: () => Promise<NodeStatus__Output[]>,
  o: RecordOptions,
  say: (line: string) => void,
  stop: () => boolean = () => false,
  now: () => number = Date.now,
): Promise<number> {
  writeFileSync(o.out, traceHeader(o.intervalMs / 1000));
  const start = now();
  let polls = 0;
  while (!stop()) {
    const at = now();
    const { nodes, skipped, requestsUnknown } = traceNodes(await list());
    appendFileSync(o.out, tracePoll({ t: (at - start) / 1000, nodes }));
    polls += 1;
    say(`poll ${polls}: ${nodes.length} nodes${skipped ? `, ${skipped} without a sample or raw allocatable left out` : ''}${requestsUnknown ? `, ${requestsUnknown} with unknown requests recorded as none` : ''}`);
    const next = start + polls * o.intervalMs;
    if (next - start >= o.durationMs) break;
    await new Promise((resolve) => setTimeout(resolve, Math.max(0, next - now())));
  }
  return polls;
}
