// /proc/meminfo, reduced to what the kubelet's memory.available signal uses.

export interface NodeMemory {
  totalBytes: number;
  /** usage minus inactive file pages: the kubelet's working set, applied to the whole node. */
  workingSetBytes: number;
}

const KIB = /[ \t]+(\d+)/y;

/** The kB number on the line "key:   123 kB", looked up rather than parsing all ~50 lines every second. */
function kib(text: string, key: string): number | undefined {
  const prefix = `${key}:`;
  let at = 0;
  if (!text.startsWith(prefix)) {
    const newline = text.indexOf(`\n${prefix}`);
    if (newline < 0) return undefined;
    at = newline + 1;
  }
  KIB.lastIndex = at + prefix.length;
  const m = KIB.exec(text);
  return m?.[1] === undefined ? undefined : Number(m[1]);
}

export function parseMeminfo(text: string): NodeMemory {
  const total = kib(text, 'MemTotal');
  const free = kib(text, 'MemFree');
  if (total === undefined || free === undefined) {
    throw new Error('/proc/meminfo lacks MemTotal or MemFree; is --proc-root pointing at a procfs?');
  }
  const inactiveFile = kib(text, 'Inactive(file)') ?? 0;
  const usage = total - free;
  return {
    totalBytes: total * 1024,
    workingSetBytes: Math.max(0, usage - inactiveFile) * 1024,
  };
}
