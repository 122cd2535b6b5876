// A cgroup made by the benchmark, so a process lives under the CPU and memory
// limits a pod would have (what the kubelet writes for a container's limits):
// a CFS quota and a memory limit, read back as the kernel accounted them
// (CPU used, time throttled, memory peak, OOM kills). cgroup v2 where the host
// has it, else v1 (cpu, cpuacct, memory), nested under this process's own
// cgroup so the host's limits still apply. Needs root.
import { existsSync, mkdirSync, readFileSync, rmdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

export interface CgroupLimits {
  /** CPU quota in cores (CFS quota / period, period 100 ms as the kubelet sets it). */
  cpuCores: number;
  memoryBytes: number;
}

export interface CgroupUsage {
  cpuSeconds: number;
  /** CFS periods in which the group ran out of quota, and the time it then waited. */
  throttledPeriods: number;
  periods: number;
  throttledSeconds: number;
  /** Highest memory charged to the group (RSS and page cache), bytes. */
  memoryPeakBytes: number;
  oomKills: number;
}

export interface BenchCgroup {
  /** The files a process writes its pid into to join (all controllers). */
  procsFiles: string[];
  usage(): CgroupUsage;
  /** Removes the group; its processes must have exited. */
  remove(): void;
  describe: string;
}

const PERIOD_US = 100_000;
const V2_ROOT = '/sys/fs/cgroup';
const read = (file: string) => readFileSync(file, 'utf8');
const keyed = (text: string): Record<string, number> =>
  Object.fromEntries(text.trim().split('\n').map((l) => l.split(/\s+/)).map(([k, v]) => [k, Number(v)]));

/** This process's path in a v1 hierarchy (`memory`, `cpu`, ...) or, for '', in v2. */
function ownPath(controller: string): string {
  for (const line of read('/proc/self/cgroup').trim().split('\n')) {
    const [, controllers, path] = line.split(':');
    if (controllers !== undefined && path !== undefined && controllers.split(',').includes(controller)) return path;
    if (controller === '' && controllers === '') return path ?? '/';
  }
  return '/';
}

function makeV2(name: string, limits: CgroupLimits): BenchCgroup {
  const parent = join(V2_ROOT, ownPath(''));
  // A v2 group with processes cannot give controllers to children ("no internal processes"): use the root's sibling space when ours is busy.
  const base = read(join(parent, 'cgroup.procs')).trim() ? V2_ROOT : parent;
  writeFileSync(join(base, 'cgroup.subtree_control'), '+cpu +memory');
  const dir = join(base, name);
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, 'cpu.max'), `${Math.round(limits.cpuCores * PERIOD_US)} ${PERIOD_US}`);
  writeFileSync(join(dir, 'memory.max'), String(limits.memoryBytes));
  writeFileSync(join(dir, 'memory.swap.max'), '0');
  return {
    procsFiles: [join(dir, 'cgroup.procs')],
    describe: `cgroup v2 ${dir}: cpu.max ${Math.round(limits.cpuCores * PERIOD_US)} ${PERIOD_US}, memory.max ${limits.memoryBytes}`,
    usage() {
      const cpu = keyed(read(join(dir, 'cpu.stat')));
      const events = keyed(read(join(dir, 'memory.events')));
      return {
        cpuSeconds: (cpu.usage_usec ?? NaN) / 1e6,
        throttledPeriods: cpu.nr_throttled ?? NaN,
        periods: cpu.nr_periods ?? NaN,
        throttledSeconds: (cpu.throttled_usec ?? NaN) / 1e6,
        memoryPeakBytes: existsSync(join(dir, 'memory.peak')) ? Number(read(join(dir, 'memory.peak'))) : NaN,
        oomKills: events.oom_kill ?? 0,
      };
    },
    remove: () => rmdirSync(dir),
  };
}

function makeV1(name: string, limits: CgroupLimits): BenchCgroup {
  const dirs = Object.fromEntries((['cpu', 'cpuacct', 'memory'] as const).map((c) => {
    const mount = existsSync(join(V2_ROOT, c)) ? join(V2_ROOT, c) : join(V2_ROOT, 'cpu,cpuacct');
    return [c, join(mount, ownPath(c), name)];
  })) as Record<'cpu' | 'cpuacct' | 'memory', string>;
  for (const dir of new Set(Object.values(dirs))) mkdirSync(dir, { recursive: true });
  writeFileSync(join(dirs.cpu, 'cpu.cfs_period_us'), String(PERIOD_US));
  writeFileSync(join(dirs.cpu, 'cpu.cfs_quota_us'), String(Math.round(limits.cpuCores * PERIOD_US)));
  writeFileSync(join(dirs.memory, 'memory.limit_in_bytes'), String(limits.memoryBytes));
  if (existsSync(join(dirs.memory, 'memory.memsw.limit_in_bytes'))) writeFileSync(join(dirs.memory, 'memory.memsw.limit_in_bytes'), String(limits.memoryBytes));
  return {
    procsFiles: [...new Set(Object.values(dirs))].map((d) => join(d, 'cgroup.procs')),
    describe: `cgroup v1 ${dirs.cpu} (cpu.cfs_quota_us ${Math.round(limits.cpuCores * PERIOD_US)} of ${PERIOD_US}) and ${dirs.memory} (memory.limit_in_bytes ${limits.memoryBytes})`,
    usage() {
      const cpu = keyed(read(join(dirs.cpu, 'cpu.stat')));
      const oom = keyed(read(join(dirs.memory, 'memory.oom_control')));
      return {
        cpuSeconds: Number(read(join(dirs.cpuacct, 'cpuacct.usage'))) / 1e9,
        throttledPeriods: cpu.nr_throttled ?? NaN,
        periods: cpu.nr_periods ?? NaN,
        throttledSeconds: (cpu.throttled_time ?? NaN) / 1e9,
        memoryPeakBytes: Number(read(join(dirs.memory, 'memory.max_usage_in_bytes'))),
        oomKills: oom.oom_kill ?? 0,
      };
    },
    remove() {
      for (const dir of new Set(Object.values(dirs))) rmdirSync(dir);
    },
  };
}

/** A new cgroup with these limits; throws with what to do when the host does not allow it. */
export function benchCgroup(name: string, limits: CgroupLimits): BenchCgroup {
  try {
    return existsSync(join(V2_ROOT, 'cgroup.controllers')) ? makeV2(name, limits) : makeV1(name, limits);
  } catch (err) {
    throw new Error(`cannot make cgroup ${name} with the gateway's limits (${(err as Error).message}): the cluster benchmark needs root and a writable /sys/fs/cgroup`);
  }
}

/**
 * A command that joins the group before it becomes `argv`: the shell writes
 * its own pid into every procs file and execs, so every thread the program
 * starts is inside the limits from its first instruction.
 */
export function inCgroup(group: BenchCgroup, argv: string[]): string[] {
  const join = group.procsFiles.map((f) => `echo $$ > '${f}' || exit 97`).join('; ');
  return ['sh', '-c', `${join}; exec "$@"`, 'sh', ...argv];
}
