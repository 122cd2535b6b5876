import { readFileSync, readdirSync, statSync } from 'node:fs';

// Sync reads on purpose: these are tiny kernel files, and a sync read costs a
// fraction of what a promise round-trip costs on the 1 s sampling path.

/** The file's text, or undefined if it does not exist or the kernel refuses it (e.g. PSI disabled). */
export function readOptional(path: string): string | undefined {
  try {
    return readFileSync(path, 'utf8');
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

/** Parses "key value" lines (cpu.stat, memory.stat) into numbers. */
export function parseFlatKeyed(text: string): Map<string, number> {
  const out = new Map<string, number>();
  for (const line of text.split('\n')) {
    const space = line.indexOf(' ');
    if (space <= 0) continue;
    const n = Number(line.slice(space + 1));
    if (Number.isFinite(n)) out.set(line.slice(0, space), n);
  }
  return out;
}
