// What an agent may report, checked before a sample is stored. An agent is a
// process on a node anyone with root there controls, or a bug: its numbers
// are inputs, not facts. The checks run on the sample's row of numbers
// (proto/sample-row.ts), the form both ingest paths have without allocating:
// the ingest thread's rows as they are, a decoded sample written into one
// reused row. The bounds (docs/security.md, invariant 3):
//
// - every number finite and non-negative;
// - capacity at most 100,000 cores and 1 PiB (past the largest machines sold
//   by orders of magnitude, well inside int64 and exact doubles), and present
//   whenever usage is;
// - node usage at most 1.5 x capacity for CPU (a second's CPU time sampled a
//   little late can pass capacity; not by half) and 1.1 x for memory (the
//   working set cannot exceed the memory there is);
// - bound requests, when known, at most 16 x capacity: the largest cap a
//   policy may set is 10 x, so nothing bound legitimately goes further;
// - PSI averages within 0..100 (they are percentages);
// - per-pod usage, when sent, within the same bounds as the node's.
import type { Sample__Output } from '../../proto/gen/oversell/v1/Sample.js';
import { sampleRow } from '../../proto/sample-row.js';
import type { Logger } from '../../lib/log.js';
import { OncePer } from '../../lib/once-per.js';

export type SampleRefusal =
  | 'not-finite' | 'negative' | 'capacity-implausible' | 'no-capacity'
  | 'usage-over-capacity' | 'requests-over-capacity' | 'pressure-out-of-range' | 'pod-usage-invalid';

export const SAMPLE_BOUNDS = {
  maxCapacityMillicores: 100_000 * 1000,
  maxCapacityBytes: 2 ** 50,
  cpuUsageOverCapacity: 1.5,
  memoryUsageOverCapacity: 1.1,
  requestsOverCapacity: 16,
} as const;

interface Offsets {
  cpu: number; memory: number; capCpu: number; capMemory: number;
  reqCpu: number; reqMemory: number; reqKnown: number; psi: number[];
}

let offsets: Offsets | undefined;
function at(): Offsets {
  if (!offsets) {
    const r = sampleRow();
    offsets = {
      cpu: r.offsetOf('cpuUsageMillicores'),
      memory: r.offsetOf('memoryWorkingSetBytes'),
      capCpu: r.offsetOf('capacity.cpuMillicores'),
      capMemory: r.offsetOf('capacity.memoryBytes'),
      reqCpu: r.offsetOf('requests.cpuMillicores'),
      reqMemory: r.offsetOf('requests.memoryBytes'),
      reqKnown: r.offsetOf('requests.known'),
      psi: ['cpuSome', 'cpuFull', 'memorySome', 'memoryFull'].flatMap((line) => ['avg10', 'avg60'].map((avg) => r.offsetOf(`pressure.${line}.${avg}`))),
    };
  }
  return offsets;
}

/** Why the sample in row[base .. base + width) must not be stored, or undefined when it may. */
export function checkSampleRow(row: Float64Array, base: number): SampleRefusal | undefined {
  const width = sampleRow().width;
  for (let i = base; i < base + width; i++) {
    const v = row[i]!;
    if (!Number.isFinite(v)) return 'not-finite';
    if (v < 0) return 'negative';
  }
  const o = at();
  const capCpu = row[base + o.capCpu]!;
  const capMemory = row[base + o.capMemory]!;
  if (capCpu > SAMPLE_BOUNDS.maxCapacityMillicores || capMemory > SAMPLE_BOUNDS.maxCapacityBytes) return 'capacity-implausible';
  const cpu = row[base + o.cpu]!;
  const memory = row[base + o.memory]!;
  if ((cpu > 0 && capCpu === 0) || (memory > 0 && capMemory === 0)) return 'no-capacity';
  if (cpu > SAMPLE_BOUNDS.cpuUsageOverCapacity * capCpu || memory > SAMPLE_BOUNDS.memoryUsageOverCapacity * capMemory) return 'usage-over-capacity';
  if (row[base + o.reqKnown] === 1 &&
    (row[base + o.reqCpu]! > SAMPLE_BOUNDS.requestsOverCapacity * capCpu || row[base + o.reqMemory]! > SAMPLE_BOUNDS.requestsOverCapacity * capMemory)) {
    return 'requests-over-capacity';
  }
  for (const p of o.psi) if (row[base + p]! > 100) return 'pressure-out-of-range';
  return undefined;
}

const scratch = { row: undefined as Float64Array | undefined };

/** checkSampleRow() for a decoded sample, written into one reused row; its pods are checked against the node's capacity. */
export function checkSample(sample: Sample__Output): SampleRefusal | undefined {
  const layout = sampleRow();
  const row = (scratch.row ??= new Float64Array(layout.width));
  // A row holds no repeated field: the pods are checked below, on the object.
  layout.write(sample.pods.length > 0 ? { ...sample, pods: [] } : sample, row, 0);
  const refused = checkSampleRow(row, 0);
  if (refused) return refused;
  const capCpu = sample.capacity?.cpuMillicores ?? 0;
  const capMemory = sample.capacity?.memoryBytes ?? 0;
  for (const pod of sample.pods) {
    const cpu = Number(pod.cpuUsageMillicores);
    const memory = Number(pod.memoryWorkingSetBytes);
    if (!(cpu >= 0 && memory >= 0 && cpu <= SAMPLE_BOUNDS.cpuUsageOverCapacity * capCpu && memory <= SAMPLE_BOUNDS.memoryUsageOverCapacity * capMemory)) {
      return 'pod-usage-invalid';
    }
  }
  return undefined;
}

/**
 * Counts a refused sample by reason and logs it at most once per node and
 * reason every 5 minutes: a broken agent sends one a second.
 */
export function sampleRefusals(log: Logger, metrics: { sampleReceived(result: `refused-${SampleRefusal}`): void }): (node: string, reason: SampleRefusal) => void {
  const once = new OncePer(300_000);
  return (node, reason) => {
    metrics.sampleReceived(`refused-${reason}`);
    if (once.take(`${node}\u0000${reason}`)) {
      log.warn({ node, reason }, 'agent sample refused and not stored (docs/security.md, sane agent data); the stream stays up: check the agent on that node');
    }
  };
}
