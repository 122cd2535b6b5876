// A pod report as it crosses from the thread that decoded it to the store:
// what names the pods apart from their figures. An agent names the same pods
// report after report while every figure changes, so the names travel as one
// string the store compares with the one it keeps, and the figures as numbers
// that cross a thread by transfer. Cloning the decoded objects instead cost
// the ingest thread most of its hand-over and the main thread 300,000 objects
// every send interval at 10,000 nodes (docs/performance-log.md, 2026-12-06).
import type { PodUsage__Output } from '../proto/gen/oversell/v1/PodUsage.js';

/** A pod's figures, then each of its containers'. */
const POD_FIGURES = 3;
const CONTAINER_FIGURES = 2;

export interface PodFigures {
  /** The pods' uids, QoS classes and container ids, in report order (JSON). Equal strings: the same pods, laid out alike. */
  names: string;
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
export function writePodFigures(pods: readonly PodUsage__Output[], into: Float64Array, at: number): string {
  const names: Names = [];
  let i = at;
  for (const p of pods) {
    into[i++] = p.cpuUsageMillicores;
    into[i++] = p.memoryWorkingSetBytes;
    into[i++] = p.cpuThrottledMicros;
    const ids: string[] = [];
    for (const c of p.containers) {
      into[i++] = c.cpuUsageMillicores;
      into[i++] = c.memoryWorkingSetBytes;
      ids.push(c.containerId);
    }
    names.push([p.uid, p.qosClass, ids]);
  }
  return JSON.stringify(names);
}

/** The report as numbers, on its own. */
export function podFigures(pods: readonly PodUsage__Output[]): PodFigures {
  const figures = new Float64Array(figuresLength(pods));
  return { names: writePodFigures(pods, figures, 0), figures };
}

/** New pod objects from a report. */
export function podsFrom(report: PodFigures): PodUsage__Output[] {
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

/** Copies a report's figures into pods made from a report of the same names (podsFrom). */
export function copyPodFigures(report: PodFigures, into: PodUsage__Output[]): void {
  const { figures } = report;
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
}
