// The kubelet's CPU manager, from its checkpoint <kubelet root>/cpu_manager_state
// (k8s.io/kubernetes pkg/kubelet/cm/cpumanager/state, format v2):
//
//   {"policyName":"static","defaultCpuSet":"0-1,4-7","entries":{"<pod uid>":{"<container>":"2-3"}},"checksum":123}
//   {"policyName":"none","defaultCpuSet":"","checksum":456}
//
// Only reads. Parsed strictly and within bounds: anything else (no file, a
// file the agent may not read, larger than any real one, not JSON, a field of
// another type, a CPU list outside the kubelet's syntax, the v1 format whose
// entries are keyed by container id, a policy other than none and static) is
// "unknown", which the gateway takes as it took every node before: no field
// sent. Unknown keys are allowed (a newer kubelet may add some); the checksum
// must be a number but is not verified (it hashes Go's in-memory layout).
//
// The kubelet replaces the file by a rename on every change, so the reader
// keeps the last result while the file's inode, size and mtime stay the same,
// and parses again only when one changes.
import { closeSync, fstatSync, openSync, readSync } from 'node:fs';
import { join } from 'node:path';
import { isObject } from '../../lib/json.js';

export const CPU_MANAGER_STATE = 'cpu_manager_state';

export const CPU_MANAGER_BOUNDS = {
  /** A 250-pod node with a few exclusive containers each writes a few KiB. */
  maxBytes: 256 * 1024,
  /** Highest CPU id taken: 100,000 cores is what the gateway takes as capacity at most (gateway/store/sample-check.ts). */
  maxCpuId: 99_999,
  /** As a sample carries at most (wire/agent-bounds.ts). */
  maxPods: 1024,
  maxContainersPerPod: 64,
} as const;

export type CpuManagerReading =
  | { policy: 'static'; exclusiveCpus: number }
  | { policy: 'none' }
  | { policy: 'unknown'; why: string };

/** Inclusive ranges of CPU ids. */
type Ranges = Array<[number, number]>;

const PART = /^(\d{1,6})(?:-(\d{1,6}))?$/;

/**
 * A CPU list as the kubelet writes one (k8s.io/utils/cpuset: "0-3,8,10-11",
 * "" for none), or undefined when it is not one: empty parts, spaces, strides,
 * a range that runs backwards, or an id past maxCpuId.
 */
export function parseCpuList(text: string, maxCpuId: number = CPU_MANAGER_BOUNDS.maxCpuId): Ranges | undefined {
  if (text === '') return [];
  const out: Ranges = [];
  for (const part of text.split(',')) {
    const m = PART.exec(part);
    if (!m) return undefined;
    const from = Number(m[1]);
    const to = m[2] === undefined ? from : Number(m[2]);
    if (from > to || to > maxCpuId) return undefined;
    out.push([from, to]);
  }
  return out;
}

/** How many distinct CPUs the ranges hold together. */
export function countCpus(ranges: Ranges): number {
  const sorted = [...ranges].sort((a, b) => a[0] - b[0]);
  let count = 0;
  let next = 0; // the first id not counted yet
  for (const [from, to] of sorted) {
    const start = Math.max(from, next);
    if (to >= start) count += to - start + 1;
    next = Math.max(next, to + 1);
  }
  return count;
}

const unknown = (why: string): CpuManagerReading => ({ policy: 'unknown', why });

/**
 * The checkpoint's policy and, under static, how many CPUs its entries hold:
 * each CPU once, since an init container's CPUs are handed on to the app
 * containers of the same pod and both entries stay in the file.
 */
export function parseCpuManagerState(text: string): CpuManagerReading {
  let doc: unknown;
  try {
    doc = JSON.parse(text);
  } catch {
    return unknown('not JSON');
  }
  if (!isObject(doc)) return unknown('not a JSON object');
  const { policyName, defaultCpuSet, entries, checksum } = doc;
  if (typeof policyName !== 'string') return unknown('policyName is not a string');
  if (typeof checksum !== 'number') return unknown('checksum is not a number');
  if (typeof defaultCpuSet !== 'string' || parseCpuList(defaultCpuSet) === undefined) return unknown('defaultCpuSet is not a CPU list');
  if (policyName === 'none') return entries === undefined || entries === null || (isObject(entries) && Object.keys(entries).length === 0) ? { policy: 'none' } : unknown('entries under policy none');
  if (policyName !== 'static') return unknown(`policy ${JSON.stringify(policyName.slice(0, 32))}`);
  if (entries === undefined || entries === null) return { policy: 'static', exclusiveCpus: 0 };
  if (!isObject(entries)) return unknown('entries is not an object');
  const pods = Object.values(entries);
  if (pods.length > CPU_MANAGER_BOUNDS.maxPods) return unknown(`more than ${CPU_MANAGER_BOUNDS.maxPods} pods in entries`);
  const held: Ranges = [];
  for (const containers of pods) {
    // v1 keyed entries by container id with the CPU list as the value: a kubelet that old is not read.
    if (!isObject(containers)) return unknown('entries are not per pod (checkpoint v1?)');
    const lists = Object.values(containers);
    if (lists.length > CPU_MANAGER_BOUNDS.maxContainersPerPod) return unknown(`more than ${CPU_MANAGER_BOUNDS.maxContainersPerPod} containers in a pod's entries`);
    for (const list of lists) {
      const ranges = typeof list === 'string' ? parseCpuList(list) : undefined;
      if (!ranges) return unknown('an entry is not a CPU list');
      held.push(...ranges);
    }
  }
  return { policy: 'static', exclusiveCpus: countCpus(held) };
}

/** Reads <kubeletRoot>/cpu_manager_state when it changed; never throws. */
export class CpuManagerReader {
  readonly path: string;
  readonly #buffer = Buffer.allocUnsafe(CPU_MANAGER_BOUNDS.maxBytes + 1);
  #key = '';
  #last: CpuManagerReading = unknown('not read yet');

  constructor(kubeletRoot: string) {
    this.path = join(kubeletRoot, CPU_MANAGER_STATE);
  }

  read(): CpuManagerReading {
    let fd: number;
    try {
      fd = openSync(this.path, 'r');
    } catch (err) {
      this.#key = '';
      const code = (err as NodeJS.ErrnoException).code;
      return (this.#last = unknown(code === 'ENOENT' || code === 'ENOTDIR' ? 'no checkpoint (CPU manager never ran, or the kubelet root is not mounted)' : `cannot open it (${code ?? String(err)})`));
    }
    try {
      const st = fstatSync(fd);
      if (!st.isFile()) return this.#remember('', unknown('not a regular file'));
      const key = `${st.ino}:${st.size}:${st.mtimeMs}`;
      if (key === this.#key) return this.#last;
      if (st.size > CPU_MANAGER_BOUNDS.maxBytes) return this.#remember(key, unknown(`larger than ${CPU_MANAGER_BOUNDS.maxBytes} bytes`));
      let n = 0;
      let r: number;
      while (n < this.#buffer.length && (r = readSync(fd, this.#buffer, n, this.#buffer.length - n, null)) > 0) n += r;
      // Grown since fstat: taken at its bound, never read on.
      if (n > CPU_MANAGER_BOUNDS.maxBytes) return this.#remember(key, unknown(`larger than ${CPU_MANAGER_BOUNDS.maxBytes} bytes`));
      return this.#remember(key, parseCpuManagerState(this.#buffer.toString('utf8', 0, n)));
    } catch (err) {
      return this.#remember('', unknown(`cannot read it (${(err as NodeJS.ErrnoException).code ?? String(err)})`));
    } finally {
      closeSync(fd);
    }
  }

  #remember(key: string, reading: CpuManagerReading): CpuManagerReading {
    this.#key = key;
    this.#last = reading;
    return reading;
  }
}
