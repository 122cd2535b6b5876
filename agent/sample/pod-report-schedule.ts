// When a sample carries the pod report (the rule is wire/pod-report.ts):
// every Nth sample, and at once when the node's memory working set has moved
// by a share of its memory since the last report.
import { POD_REPORT_ON_MEMORY_MOVE } from '../../wire/pod-report.js';

export interface NodeMemory {
  workingSetBytes: number;
  totalBytes: number;
}

export class PodReportSchedule {
  /** Every Nth sample; at least 1. */
  every: number;
  /** The node's working set at the last report (undefined: none yet). */
  #reportedAt: number | undefined;

  constructor(every: number) {
    this.every = Math.max(1, every);
  }

  /** Whether sample number `seq` (from 1) carries the pod report, given the node's memory just read. */
  due(seq: number, memory: NodeMemory): boolean {
    if (this.every === 1 || seq % this.every === 1) return true;
    return this.#reportedAt !== undefined && Math.abs(memory.workingSetBytes - this.#reportedAt) >= POD_REPORT_ON_MEMORY_MOVE * memory.totalBytes;
  }

  /** A sample carried the pod report, with this working set. */
  reported(workingSetBytes: number): void {
    this.#reportedAt = workingSetBytes;
  }
}
