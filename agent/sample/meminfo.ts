// /proc/meminfo, reduced to what the kubelet's memory.available signal uses.

export interface NodeMemory {
  totalBytes: number;
  /** usage minus inactive file pages: the kubelet's working set, applied to the whole node. */
  workingSetBytes: number;
}

export function parseMeminfo(text: string): NodeMemory {
  const kib = new Map<string, number>();
  for (const line of text.split('\n')) {
    const m = /^([^:]+):\s+(\d+)/.exec(line);
    if (m && m[1] && m[2]) kib.set(m[1], Number(m[2]));
  }
  const total = kib.get('MemTotal');
  const free = kib.get('MemFree');
  if (total === undefined || free === undefined) {
    throw new Error('/proc/meminfo lacks MemTotal or MemFree; is --proc-root pointing at a procfs?');
  }
  const inactiveFile = kib.get('Inactive(file)') ?? 0;
  const usage = total - free;
  return {
    totalBytes: total * 1024,
    workingSetBytes: Math.max(0, usage - inactiveFile) * 1024,
  };
}
