// How many CPUs this container may use: what a pool of busy threads should
// be sized to. os.availableParallelism() counts the CPUs of the affinity mask
// (every core of the node, usually), not the CFS quota a Kubernetes CPU limit
// sets: a pod limited to 2 CPUs on a 64-core node would start 64 threads that
// share 2 CPUs' worth of time. The quota is cgroup v2's cpu.max
// ("<quota> <period>" or "max <period>") or v1's cpu.cfs_quota_us and
// cpu.cfs_period_us (-1: none), read where a container sees its own cgroup.
import { readFileSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { join } from 'node:path';

/** The files a quota is read from, as text; undefined when absent. */
export interface CpuQuotaFiles {
  /** cgroup v2 cpu.max. */
  cpuMax?: string | undefined;
  /** cgroup v1 cpu.cfs_quota_us and cpu.cfs_period_us. */
  cfsQuotaUs?: string | undefined;
  cfsPeriodUs?: string | undefined;
}

/** The quota in CPUs (may be fractional), or undefined for none or an unreadable file. */
export function quotaCpus(files: CpuQuotaFiles): number | undefined {
  if (files.cpuMax !== undefined) {
    const [quota, period] = files.cpuMax.trim().split(/\s+/);
    if (quota === 'max') return undefined;
    return ratio(quota, period);
  }
  if (files.cfsQuotaUs !== undefined && files.cfsPeriodUs !== undefined) return ratio(files.cfsQuotaUs.trim(), files.cfsPeriodUs.trim());
  return undefined;
}

function ratio(quota: string | undefined, period: string | undefined): number | undefined {
  const q = Number(quota);
  const p = Number(period);
  // v1 writes -1 for no quota; anything else unparseable is treated as no quota too.
  if (!Number.isFinite(q) || !Number.isFinite(p) || q <= 0 || p <= 0) return undefined;
  return q / p;
}

/**
 * Whole CPUs to size a thread pool to: the quota rounded up (a 1.5-CPU limit
 * can keep two threads busy part of the time), never more than the CPUs the
 * process may run on, at least 1.
 */
export function containerCpus(files: CpuQuotaFiles, parallelism: number): number {
  const quota = quotaCpus(files);
  const cpus = quota === undefined ? parallelism : Math.min(parallelism, Math.ceil(quota));
  return Math.max(1, Math.floor(cpus));
}

/** A file's text, or undefined when it cannot be read. */
export const readIfThere = (path: string): string | undefined => {
  try {
    return readFileSync(path, 'utf8');
  } catch {
    return undefined;
  }
};

/** The quota files under a cgroup mount (default /sys/fs/cgroup): v2 at its root, v1 in its cpu controller's directory. */
export function readCpuQuotaFiles(root = '/sys/fs/cgroup'): CpuQuotaFiles {
  const cpuMax = readIfThere(join(root, 'cpu.max'));
  if (cpuMax !== undefined) return { cpuMax };
  for (const dir of ['cpu', 'cpu,cpuacct']) {
    const cfsQuotaUs = readIfThere(join(root, dir, 'cpu.cfs_quota_us'));
    const cfsPeriodUs = readIfThere(join(root, dir, 'cpu.cfs_period_us'));
    if (cfsQuotaUs !== undefined && cfsPeriodUs !== undefined) return { cfsQuotaUs, cfsPeriodUs };
  }
  return {};
}

/** The CPUs available to this container (see containerCpus). */
export function availableCpus(root?: string): number {
  return containerCpus(readCpuQuotaFiles(root), availableParallelism());
}
