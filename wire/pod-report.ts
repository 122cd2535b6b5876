// When an agent sends its pod report, as both sides rely on it: every Nth
// sample (--pod-report-every, or the gateway's Settings), and at once when
// the node's memory working set has moved by POD_REPORT_ON_MEMORY_MOVE of its
// memory since the last report (agents from issue 45 on). Relief picks its
// victims by each pod's memory, so it reads a report older than that move as
// out of date (gateway/act/relief-actor.ts).

/** The share of the node's memory the working set must move by to bring the pod report forward. */
export const POD_REPORT_ON_MEMORY_MOVE = 0.02;
