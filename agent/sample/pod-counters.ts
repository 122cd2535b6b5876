// Cumulative counters of a pod's or a container's cgroup, computed as the
// kubelet (cAdvisor) does for both: CPU from cpu.stat usage_usec (v2) or
// cpuacct.usage (v1), and working set = usage - inactive_file, floored at zero.
import { join } from 'node:path';
import type { CgroupLayout, ContainerCgroup, PodCgroup } from './cgroup-layout.js';
import { flatKeyedValue, readOptional } from './files.js';

export interface PodCounters {
  /** Cumulative CPU time in nanoseconds. */
  cpuNanos: number;
  workingSetBytes: number;
  /** Cumulative CFS throttled time in microseconds; 0 when not read (containers) or unreadable. */
  cpuThrottledMicros: number;
}

/** The files one cgroup's counters come from; worked out once per pod or container, read every pod report. */
export interface PodFiles {
  /** v2: cpu.stat (microseconds); v1: cpuacct.usage (nanoseconds). */
  cpu: string;
  /** v2: memory.current; v1: memory.usage_in_bytes. */
  usage: string;
  memoryStat: string;
  v2: boolean;
  /** v1 only, pods only: the cpu controller's cpu.stat (throttled_time, nanoseconds). On v2 throttling is in `cpu`. */
  throttle?: string;
}

/** withThrottle: also the throttled time (pods: harm is counted per pod; on v1 it is one more file a pod). */
export function podFiles(layout: CgroupLayout, cgroup: Pick<PodCgroup | ContainerCgroup, 'path'>, withThrottle = false): PodFiles {
  const path = cgroup.path;
  if (layout.mode === 'v2') {
    const dir = join(layout.memoryRoot, path);
    return { cpu: join(dir, 'cpu.stat'), usage: join(dir, 'memory.current'), memoryStat: join(dir, 'memory.stat'), v2: true };
  }
  const memDir = join(layout.memoryRoot, path);
  return {
    cpu: join(layout.cpuRoot, path, 'cpuacct.usage'),
    usage: join(memDir, 'memory.usage_in_bytes'),
    memoryStat: join(memDir, 'memory.stat'),
    v2: false,
    ...(withThrottle && { throttle: join(layout.cpuRoot, path, 'cpu.stat') }),
  };
}

/** Undefined when the cgroup vanished between listing and reading (pod deleted, container exited). */
export function readPodFiles(files: PodFiles): PodCounters | undefined {
  const cpu = readOptional(files.cpu);
  const usage = readOptional(files.usage);
  const memStat = readOptional(files.memoryStat);
  if (cpu === undefined || usage === undefined) return undefined;
  if (files.v2) {
    const inactiveFile = memStat ? (flatKeyedValue(memStat, 'inactive_file') ?? 0) : 0;
    return { cpuNanos: (flatKeyedValue(cpu, 'usage_usec') ?? 0) * 1000, workingSetBytes: Math.max(0, Number(usage) - inactiveFile), cpuThrottledMicros: flatKeyedValue(cpu, 'throttled_usec') ?? 0 };
  }
  // total_* includes the pod's containers, which is what the pod-level number
  // means; cAdvisor reads the same key for a container.
  const inactiveFile = memStat ? (flatKeyedValue(memStat, 'total_inactive_file') ?? 0) : 0;
  const throttle = files.throttle === undefined ? undefined : readOptional(files.throttle);
  const throttledNanos = throttle === undefined ? 0 : (flatKeyedValue(throttle, 'throttled_time') ?? 0);
  return { cpuNanos: Number(cpu), workingSetBytes: Math.max(0, Number(usage) - inactiveFile), cpuThrottledMicros: Math.floor(throttledNanos / 1000) };
}

export function readPodCounters(layout: CgroupLayout, pod: PodCgroup): PodCounters | undefined {
  return readPodFiles(podFiles(layout, pod, true));
}

/**
 * cgroup v1 and hybrid: the root memory cgroup's working set, which is the
 * node figure the kubelet's resource metrics report there (cAdvisor's root
 * container). Undefined on v2, where the kubelet's figure is /proc/meminfo's,
 * or when the files cannot be read.
 */
export function readRootCgroupWorkingSet(layout: CgroupLayout): number | undefined {
  if (layout.mode === 'v2') return undefined;
  const usage = readOptional(join(layout.memoryRoot, 'memory.usage_in_bytes'));
  const memStat = readOptional(join(layout.memoryRoot, 'memory.stat'));
  if (usage === undefined || memStat === undefined) return undefined;
  return Math.max(0, Number(usage) - (flatKeyedValue(memStat, 'total_inactive_file') ?? 0));
}
