// When a sample carries the pod report (agent/sample/pod-report-schedule.ts).
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { PodReportSchedule } from '../../../agent/sample/pod-report-schedule.js';
import { POD_REPORT_ON_MEMORY_MOVE } from '../../../wire/pod-report.js';

const GiB = 1024 ** 3;
const node = (workingSetGiB: number) => ({ workingSetBytes: workingSetGiB * GiB, totalBytes: 24 * GiB });

/** The sample numbers 1..n that carry the report, each reported as it is sent. */
function carrying(s: PodReportSchedule, workingSetGiB: (seq: number) => number, n: number): number[] {
  const out: number[] = [];
  for (let seq = 1; seq <= n; seq++) {
    const m = node(workingSetGiB(seq));
    if (!s.due(seq, m)) continue;
    out.push(seq);
    s.reported(m.workingSetBytes);
  }
  return out;
}

describe('PodReportSchedule', () => {
  it('every Nth sample while the node\'s memory holds still', () => {
    assert.deepEqual(carrying(new PodReportSchedule(10), () => 8, 25), [1, 11, 21]);
    assert.deepEqual(carrying(new PodReportSchedule(1), () => 8, 3), [1, 2, 3]);
    assert.deepEqual(carrying(new PodReportSchedule(0), () => 8, 2), [1, 2], 'at least every sample');
  });

  it('at once when the working set moved by 2 % of memory since the last report, up or down; not for less', () => {
    const step = POD_REPORT_ON_MEMORY_MOVE * 24; // 0.48 GiB
    // Grows from sample 4 by 3 GiB in one second, and drops back at 15.
    const grows = (seq: number) => (seq >= 15 ? 8 : seq >= 4 ? 11 : 8);
    assert.deepEqual(carrying(new PodReportSchedule(10), grows, 25), [1, 4, 11, 15, 21]);
    // Creeps by less than the step a sample: brought forward once the sum passes it.
    assert.deepEqual(carrying(new PodReportSchedule(10), (seq) => 8 + (seq - 1) * (step / 2.9), 10), [1, 4, 7, 10]);
    assert.deepEqual(carrying(new PodReportSchedule(10), (seq) => 8 + (seq % 2) * step * 0.9, 10), [1], 'noise under the step: no extra reports');
  });
});
