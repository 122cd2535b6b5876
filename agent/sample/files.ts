import { closeSync, openSync, readFileSync, readSync, readdirSync, statSync } from 'node:fs';

// Sync reads on purpose: these are tiny kernel files, and a sync read costs a
// fraction of what a promise round-trip costs on the 1 s sampling path.

// One buffer for every read: readFileSync stats each file and, as cgroup and
// proc files say they are empty, reads it in growing chunks. Open, read into
// this, close takes 15-25 % less CPU a file (a v1 memory.stat 39.5 -> 30.2 µs,
// memory.usage_in_bytes 19.7 -> 16.6: docs/performance-log.md), and a pod
// report reads three files a pod and three a container.
const buffer = Buffer.allocUnsafe(64 * 1024);

/** The file's text, or undefined if it does not exist or the kernel refuses it (e.g. PSI disabled). */
export function readOptional(path: string): string | undefined {
  try {
    const fd = openSync(path, 'r');
    let n = 0;
    try {
      let r: number;
      while (n < buffer.length && (r = readSync(fd, buffer, n, buffer.length - n, null)) > 0) n += r;
    } finally {
      closeSync(fd);
    }
    // Kernel files are ASCII; one larger than the buffer is not one the agent reads, but read it whole all the same.
    return n < buffer.length ? buffer.toString('latin1', 0, n) : readFileSync(path, 'utf8');
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'ENOENT' || code === 'ENOTDIR' || code === 'EOPNOTSUPP' || code === 'ENOTSUP' || code === 'EINVAL') {
      return undefined;
    }
    throw err;
  }
}

export function isDirectory(path: string): boolean {
  try {
    return statSync(path).isDirectory();
  } catch {
    return false;
  }
}

export function isFile(path: string): boolean {
  try {
    return statSync(path).isFile();
  } catch {
    return false;
  }
}

/** Names of the sub-directories of path; empty if path is missing. */
export function subdirectories(path: string): string[] {
  try {
    return readdirSync(path, { withFileTypes: true })
      .filter((e) => e.isDirectory())
      .map((e) => e.name);
  } catch {
    return [];
  }
}

/**
 * The number after `key ` on the line that starts with key, in "key value"
 * files (cpu.stat, memory.stat); undefined if there is no such line or its
 * value is not a number. Looks up the one key instead of parsing the ~50 lines
 * of a memory.stat: the agent reads one per pod.
 */
export function flatKeyedValue(text: string, key: string): number | undefined {
  const prefix = `${key} `;
  let at = 0;
  if (!text.startsWith(prefix)) {
    const newline = text.indexOf(`\n${prefix}`);
    if (newline < 0) return undefined;
    at = newline + 1;
  }
  at += prefix.length;
  const end = text.indexOf('\n', at);
  const n = Number(text.slice(at, end < 0 ? undefined : end));
  return Number.isFinite(n) ? n : undefined;
}
