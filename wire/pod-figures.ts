// A pod report as it crosses from the thread that decoded it to the store:
// what names the pods apart from their figures. An agent names the same pods
// report after report while every figure changes, so the names travel as one
// string with a 53-bit key the store compares with the one it keeps, and the
// figures as numbers that cross a thread by transfer. Cloning the decoded
// objects instead cost the main thread 56-63 µs a report against 9-11
// (docs/performance-log.md, 2026-12-06, correction).
import type { PodUsage__Output } from '../proto/gen/oversell/v1/PodUsage.js';

/** A pod's figures, then each of its containers'. */
const POD_FIGURES = 3;
const CONTAINER_FIGURES = 2;

/** What names a report's pods: their uids, QoS classes and container ids, in report order (JSON), and its key. */
export interface PodNames {
  /**
   * Absent when the agent left the names out (Sample.pod_names_as_before):
   * the pods are those `key` names, which the store keeps.
   */
  names?: string;
  /**
   * A 53-bit hash of `names`: equal keys, the same pods, laid out alike (a
   * store keeps the key, not the names). Two reports whose names differ and
   * whose keys agree (2^-53 a change, or an agent that crafts it) put the
   * second's figures on the first's pods, of the same node and agent: nothing
   * a lying agent could not report anyway. A layout that differs is caught
   * by its count of figures (copyPodFigures).
   */
  key: number;
}

export interface PodFigures extends PodNames {
  /** Per pod: CPU millicores, memory working set bytes, CPU throttled micros, then per container: CPU millicores, memory working set bytes. */
  figures: Float64Array;
}

type Names = [uid: string, qosClass: string, containerIds: string[]][];

/** How many numbers the report's figures take. */
export function figuresLength(pods: readonly PodUsage__Output[]): number {
  let n = 0;
  for (const p of pods) n += POD_FIGURES + CONTAINER_FIGURES * p.containers.length;
  return n;
}

/** Writes the report's figures into `into` from `at`; returns its names. */
export function writePodFigures(pods: readonly PodUsage__Output[], into: Float64Array, at: number): Required<PodNames> {
  writeFiguresOnly(pods, into, at);
  const json = podNames(pods);
  return { names: json, key: namesKey(json) };
}

/** What names a report's pods, in order (JSON): equal strings, the same pods and containers laid out alike. */
export function podNames(pods: readonly PodUsage__Output[]): string {
  return JSON.stringify(pods.map((p): Names[number] => [p.uid, p.qosClass, p.containers.map((c) => c.containerId)]));
}

/** Writes the report's figures into `into` from `at`, and nothing of its names. */
export function writeFiguresOnly(pods: readonly PodUsage__Output[], into: Float64Array, at: number): void {
  let i = at;
  for (const p of pods) {
    into[i++] = p.cpuUsageMillicores;
    into[i++] = p.memoryWorkingSetBytes;
    into[i++] = p.cpuThrottledMicros;
    for (const c of p.containers) {
      into[i++] = c.cpuUsageMillicores;
      into[i++] = c.memoryWorkingSetBytes;
    }
  }
}

/**
 * What a stream's last named report laid out: the key of its names and each
 * pod's count of containers. A report sent without names
 * (Sample.pod_names_as_before) is placed on those pods only if it has the
 * same counts.
 */
export interface PodLayout {
  key: number;
  containers: Uint8Array;
}

/** The layout of a named report whose names have `key`. */
export function layoutOf(pods: readonly PodUsage__Output[], key: number): PodLayout {
  return { key, containers: Uint8Array.from(pods, (p) => p.containers.length) };
}

/** Whether a report sent without names has the pods and containers of `layout`. */
export function fitsLayout(pods: readonly PodUsage__Output[], layout: PodLayout): boolean {
  if (pods.length !== layout.containers.length) return false;
  for (let i = 0; i < pods.length; i++) if (pods[i]!.containers.length !== layout.containers[i]) return false;
  return true;
}

/** A 53-bit hash of a string: two 32-bit multiplicative hashes, mixed (the public-domain cyrb53 construction). */
export function namesKey(s: string): number {
  let h1 = 0xdeadbeef;
  let h2 = 0x41c6ce57;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    h1 = Math.imul(h1 ^ c, 2654435761);
    h2 = Math.imul(h2 ^ c, 1597334677);
  }
  h1 = Math.imul(h1 ^ (h1 >>> 16), 2246822507) ^ Math.imul(h2 ^ (h2 >>> 13), 3266489909);
  h2 = Math.imul(h2 ^ (h2 >>> 16), 2246822507) ^ Math.imul(h1 ^ (h1 >>> 13), 3266489909);
  return 4294967296 * (2097151 & h2) + (h1 >>> 0);
}

/** The report as numbers, on its own. */
export function podFigures(pods: readonly PodUsage__Output[]): Required<PodFigures> {
  const figures = new Float64Array(figuresLength(pods));
  return { ...writePodFigures(pods, figures, 0), figures };
}

/** New pod objects from a named report. */
export function podsFrom(report: Pick<Required<PodFigures>, 'names' | 'figures'>): PodUsage__Output[] {
  const { figures } = report;
  let i = 0;
  return (JSON.parse(report.names) as Names).map(([uid, qosClass, ids]) => ({
    uid,
    qosClass,
    cpuUsageMillicores: figures[i++]!,
    memoryWorkingSetBytes: figures[i++]!,
    cpuThrottledMicros: figures[i++]!,
    containers: ids.map((containerId) => ({ containerId, cpuUsageMillicores: figures[i++]!, memoryWorkingSetBytes: figures[i++]! })),
  }));
}

/**
 * Copies a report's figures into pods made from a report of the same names
 * (podsFrom); false, copying nothing, when `figures` holds another count of
 * figures than those pods take.
 */
export function copyPodFigures(figures: Float64Array, into: PodUsage__Output[]): boolean {
  if (figuresLength(into) !== figures.length) return false;
  let i = 0;
  for (const p of into) {
    p.cpuUsageMillicores = figures[i++]!;
    p.memoryWorkingSetBytes = figures[i++]!;
    p.cpuThrottledMicros = figures[i++]!;
    for (const c of p.containers) {
      c.cpuUsageMillicores = figures[i++]!;
      c.memoryWorkingSetBytes = figures[i++]!;
    }
  }
  return true;
}
