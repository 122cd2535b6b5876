// Cumulative per-pod counters from the pod's cgroup, computed as the kubelet
// (cAdvisor) does: CPU from cpu.stat usage_usec (v2) or cpuacct.usage (v1), and
// working set = usage - inactive_file, floored at zero.
import { join } from 'node:path';
import type { CgroupLayout, PodCgroup } from './cgroup-layout.js';
import { parseFlatKeyed, readOptional } from './files.js';

export interface PodCounters {
  /** Cumulative CPU time in nanoseconds. */
  cpuNanos: number;
  workingSetBytes: number;
}

/** Undefined when the pod's cgroup vanished between listing and reading (pod deleted). */
export function readPodCounters(layout: CgroupLayout, pod: PodCgroup): PodCounters | undefined {
  if (layout.mode === 'v2') {
    const dir = join(layout.memoryRoot, pod.path);
    const cpuStat = readOptional(join(dir, 'cpu.stat'));
    const current = readOptional(join(dir, 'memory.current'));
    const memStat = readOptional(join(dir, 'memory.stat'));
    if (cpuStat === undefined || current === undefined) return undefined;
    const usageUsec = parseFlatKeyed(cpuStat).get('usage_usec') ?? 0;
    const inactiveFile = memStat ? (parseFlatKeyed(memStat).get('inactive_file') ?? 0) : 0;
    return { cpuNanos: usageUsec * 1000, workingSetBytes: Math.max(0, Number(current) - inactiveFile) };
  }
  const cpuUsage = readOptional(join(layout.cpuRoot, pod.path, 'cpuacct.usage'));
  const memDir = join(layout.memoryRoot, pod.path);
  const usage = readOptional(join(memDir, 'memory.usage_in_bytes'));
  const memStat = readOptional(join(memDir, 'memory.stat'));
  if (cpuUsage === undefined || usage === undefined) return undefined;
  // total_* includes the pod's containers, which is what the pod-level number means.
  const inactiveFile = memStat ? (parseFlatKeyed(memStat).get('total_inactive_file') ?? 0) : 0;
  return { cpuNanos: Number(cpuUsage), workingSetBytes: Math.max(0, Number(usage) - inactiveFile) };
}
