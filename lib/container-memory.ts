// How much memory this process may use: the smallest memory limit on its
// cgroup's path (cgroup v2 memory.max, v1 memory.limit_in_bytes), read through
// /proc/self/cgroup so it is found in a container (where the path is "/") and
// in a cgroup made around a process on a host alike. Undefined: no limit.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';

/** A file's text, or undefined when it cannot be read. */
const readIfThere = (path: string): string | undefined => {
  try {
    return readFileSync(path, 'utf8');
  } catch {
    return undefined;
  }
};

/** v1's "no limit" is the largest page-aligned long; anything above 2^60 bytes is none. */
const NO_LIMIT = 2 ** 60;

/**
 * The limit in bytes from the process's cgroup lines (the text of
 * /proc/self/cgroup) under a cgroup mount; the smallest of the cgroup's and
 * its ancestors', undefined when none sets one.
 */
export function memoryLimitBytes(procSelfCgroup: string, root = '/sys/fs/cgroup'): number | undefined {
  const lines = procSelfCgroup.split('\n').map((l) => l.split(':'));
  const v1 = lines.find((l) => l[1]?.split(',').includes('memory'));
  const v2 = lines.find((l) => l[0] === '0' && l[1] === '');
  const [dir, file] = v1 ? [join(root, 'memory'), 'memory.limit_in_bytes'] : [root, 'memory.max'];
  const path = (v1 ?? v2)?.slice(2).join(':');
  if (path === undefined) return undefined;
  let least: number | undefined;
  const parts = path.split('/').filter(Boolean);
  for (let depth = parts.length; depth >= 0; depth--) {
    const value = Number(readIfThere(join(dir, ...parts.slice(0, depth), file))?.trim());
    if (Number.isFinite(value) && value > 0 && value < NO_LIMIT) least = Math.min(least ?? value, value);
  }
  return least;
}

/** This process's memory limit (see memoryLimitBytes). */
export function containerMemoryLimit(root?: string): number | undefined {
  const self = readIfThere('/proc/self/cgroup');
  return self === undefined ? undefined : memoryLimitBytes(self, root);
}
