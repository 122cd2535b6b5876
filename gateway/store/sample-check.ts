// What an agent may report, checked before a sample is stored. An agent is a
// process on a node anyone with root there controls, or a bug: its numbers
// are inputs, not facts. The rule runs on the sample's row of numbers
// (wire/sample-row.ts), the form the store takes a sample in: the stream
// service (gateway/ingest/agent-stream-service.ts, on either thread) writes
// each decoded sample into a reused row, checks it there, and hands the row
// on. The bounds and why:
//
// - every number finite and non-negative;
// - timestamp at most a day ahead of the gateway's clock: a node's clock may
//   be minutes off (age is measured on the gateway's clock, the window on the
//   agent's), but a timestamp years ahead is a bug or a forgery;
// - capacity at most 100,000 cores and 1 PiB (past the largest machines sold
//   by orders of magnitude, well inside int64 and exact doubles), and present
//   whenever usage is;
// - node usage at most 1.5 x capacity for CPU (a second's CPU time sampled a
//   little late can pass capacity; not by half) and 1.1 x for memory (the
//   working set cannot exceed the memory there is);
// - bound requests, when known, at most 128 x capacity: bound requests stay
//   within the largest cap a node ever had, and no policy the gateway accepts
//   has a maxRatio above 100;
// - PSI averages within 0..100 (they are percentages);
// - the CPU manager, when sent: exclusive CPUs a whole number, at most the
//   node's CPUs, and none under policy none. Within them a lying agent can
//   only lower its own node's CPU grant (gateway/decide/policy.ts);
// - per-pod usage, when sent, within the same bounds as the node's, and so
//   each of its containers' (at most 64 a pod: the kubelet runs a few, and a
//   forged report must not make the store keep thousands; ids 64 hex digits,
//   the runtime's, which the gateway later matches to the pod's status); a
//   pod's uid at most 64 characters, its QoS class at most 16;
// - at most 1,024 pods and 4,096 containers in one sample
//   (wire/agent-bounds.ts says why): the store keeps each node's newest pod
//   report, and a forged one of 20,000 pods grew the heap by about 40 MiB.
//
// A hello is checked by checkHello() (its strings within HELLO_BOUNDS): the
// store keeps its host facts, and every query of the node returns them.
import type { Hello__Output } from '../../proto/gen/oversell/v1/Hello.js';

/** What of a hello is kept and shown: its strings. */
type HelloStrings = Pick<Hello__Output, 'nodeName' | 'instanceId' | 'agentVersion' | 'host'>;
import type { Sample__Output } from '../../proto/gen/oversell/v1/Sample.js';
import { HELLO_BOUNDS, POD_BOUNDS } from '../../wire/agent-bounds.js';
import { sampleRow } from '../../wire/sample-row.js';
import { MAX_SUMMARY_PLANS } from '../../wire/usage-summary.js';
import { MAX_RETAIN_MS } from '../../lib/usage/usage-window.js';
import type { Logger } from '../../lib/log.js';
import { OncePer } from '../../lib/once-per.js';

export type SampleRefusal =
  | 'not-finite' | 'negative' | 'timestamp-implausible' | 'capacity-implausible' | 'no-capacity'
  | 'usage-over-capacity' | 'requests-over-capacity' | 'pressure-out-of-range' | 'pod-usage-invalid' | 'too-many-pods'
  | 'cpu-manager-implausible' | 'summary-implausible';

/** What became of a refused sample: its seq was taken (the agent must not send it again), nothing else was stored. */
export type SampleRefused = `refused-${SampleRefusal}`;

export const SAMPLE_BOUNDS = {
  maxFutureMs: 86_400_000,
  maxCapacityMillicores: 100_000 * 1000,
  maxCapacityBytes: 2 ** 50,
  cpuUsageOverCapacity: 1.5,
  memoryUsageOverCapacity: 1.1,
  requestsOverCapacity: 128,
  maxPressure: 100,
  maxSummaries: MAX_SUMMARY_PLANS,
  /** Points in one summarized window: 10 a second over the longest window kept (MAX_RETAIN_MS); agents sample once a second. */
  maxSummarySamples: (MAX_RETAIN_MS / 1000) * 10 + 1,
  /** What a summarized window's rates cover: its longest window and one point before it, at the longest sampling interval shedding asks (far less). */
  maxSummarySpanMs: 2 * MAX_RETAIN_MS,
  ...POD_BOUNDS,
} as const;

const CONTAINER_ID = /^[0-9a-f]{64}$/;

interface Layout {
  width: number;
  timestamp: number; cpu: number; memory: number; rootMemory: number; capCpu: number; capMemory: number;
  reqCpu: number; reqMemory: number; reqKnown: number;
  cpuManager: number; staticPolicy: number; exclusiveCpus: number;
  psi: Int32Array;
}

let layout: Layout | undefined;
function at(): Layout {
  if (!layout) {
    const r = sampleRow();
    layout = {
      width: r.width,
      timestamp: r.offsetOf('timestampMs'),
      cpu: r.offsetOf('cpuUsageMillicores'),
      memory: r.offsetOf('memoryWorkingSetBytes'),
      rootMemory: r.offsetOf('rootCgroupMemoryWorkingSetBytes'),
      capCpu: r.offsetOf('capacity.cpuMillicores'),
      capMemory: r.offsetOf('capacity.memoryBytes'),
      reqCpu: r.offsetOf('requests.cpuMillicores'),
      reqMemory: r.offsetOf('requests.memoryBytes'),
      reqKnown: r.offsetOf('requests.known'),
      cpuManager: r.offsetOf('cpuManager'),
      staticPolicy: r.offsetOf('cpuManager.staticPolicy'),
      exclusiveCpus: r.offsetOf('cpuManager.exclusiveCpus'),
      psi: Int32Array.from(['cpuSome', 'cpuFull', 'memorySome', 'memoryFull', 'cpuContention'].flatMap((line) => ['avg10', 'avg60'].map((avg) => r.offsetOf(`pressure.${line}.${avg}`)))),
    };
  }
  return layout;
}

/**
 * Why the sample in row[base .. base + width) must not be stored, or
 * undefined when it may. nowMs: the gateway's clock when it arrived.
 */
export function checkSampleRow(row: Float64Array, base: number, nowMs: number): SampleRefusal | undefined {
  const o = layout ?? at();
  const end = base + o.width;
  for (let i = base; i < end; i++) {
    const v = row[i]!;
    // One comparison pair for the common case; NaN fails both.
    if (!(v >= 0 && v < Infinity)) return v < 0 && v > -Infinity ? 'negative' : 'not-finite';
  }
  if (row[base + o.timestamp]! > nowMs + SAMPLE_BOUNDS.maxFutureMs) return 'timestamp-implausible';
  const capCpu = row[base + o.capCpu]!;
  const capMemory = row[base + o.capMemory]!;
  if (capCpu > SAMPLE_BOUNDS.maxCapacityMillicores || capMemory > SAMPLE_BOUNDS.maxCapacityBytes) return 'capacity-implausible';
  const cpu = row[base + o.cpu]!;
  const memory = Math.max(row[base + o.memory]!, row[base + o.rootMemory]!);
  if ((cpu > 0 && capCpu === 0) || (memory > 0 && capMemory === 0)) return 'no-capacity';
  if (cpu > SAMPLE_BOUNDS.cpuUsageOverCapacity * capCpu || memory > SAMPLE_BOUNDS.memoryUsageOverCapacity * capMemory) return 'usage-over-capacity';
  if (row[base + o.reqKnown] === 1 &&
    (row[base + o.reqCpu]! > SAMPLE_BOUNDS.requestsOverCapacity * capCpu || row[base + o.reqMemory]! > SAMPLE_BOUNDS.requestsOverCapacity * capMemory)) {
    return 'requests-over-capacity';
  }
  const psi = o.psi;
  for (let i = 0; i < psi.length; i++) if (row[base + psi[i]!]! > SAMPLE_BOUNDS.maxPressure) return 'pressure-out-of-range';
  if (row[base + o.cpuManager] === 1) {
    const exclusive = row[base + o.exclusiveCpus]!;
    if (!Number.isInteger(exclusive) || exclusive * 1000 > capCpu || (row[base + o.staticPolicy] !== 1 && exclusive > 0)) return 'cpu-manager-implausible';
  }
  return undefined;
}

/** Why a sample's pods must not be stored (checked against its node's capacity), or undefined. */
export function checkPods(sample: Sample__Output): SampleRefusal | undefined {
  const capCpu = sample.capacity?.cpuMillicores ?? 0;
  const capMemory = sample.capacity?.memoryBytes ?? 0;
  const maxCpu = SAMPLE_BOUNDS.cpuUsageOverCapacity * capCpu;
  const maxMemory = SAMPLE_BOUNDS.memoryUsageOverCapacity * capMemory;
  // Written so NaN fails too.
  const within = (u: { cpuUsageMillicores: number; memoryWorkingSetBytes: number }) => {
    const cpu = Number(u.cpuUsageMillicores);
    const memory = Number(u.memoryWorkingSetBytes);
    return cpu >= 0 && memory >= 0 && cpu <= maxCpu && memory <= maxMemory;
  };
  // Counted before anything is read of them: a forged report may hold tens of thousands.
  if (sample.pods.length > SAMPLE_BOUNDS.maxPodsPerSample) return 'too-many-pods';
  let containerCount = 0;
  for (const pod of sample.pods) containerCount += pod.containers?.length ?? 0;
  if (containerCount > SAMPLE_BOUNDS.maxContainersPerSample) return 'too-many-pods';
  for (const pod of sample.pods) {
    if (!within(pod)) return 'pod-usage-invalid';
    // A cumulative count of microseconds: never negative, never past what a double holds exactly (the harm meter bounds each rise by time x CPUs).
    const throttled = Number(pod.cpuThrottledMicros ?? 0);
    if (!(throttled >= 0 && throttled <= Number.MAX_SAFE_INTEGER)) return 'pod-usage-invalid';
    // Strings: every byte of them is kept, and shown by every query of the node.
    if ((pod.uid ?? '').length > SAMPLE_BOUNDS.maxPodUidLength || (pod.qosClass ?? '').length > SAMPLE_BOUNDS.maxQosClassLength) return 'pod-usage-invalid';
    // A container is part of its pod's usage: refused under the pod's reason.
    const containers = pod.containers ?? [];
    if (containers.length > SAMPLE_BOUNDS.maxContainersPerPod) return 'pod-usage-invalid';
    for (const c of containers) {
      // A report without names (pod_names_as_before) names its containers by place.
      if ((!sample.podNamesAsBefore && !CONTAINER_ID.test(c.containerId)) || !within(c)) return 'pod-usage-invalid';
    }
  }
  return undefined;
}

/** The snake_case field of each bounded hello string, for the refusal's words. */
const HELLO_FIELDS: ReadonlyArray<[keyof typeof HELLO_BOUNDS, string, (h: HelloStrings) => string | undefined]> = [
  ['instanceId', 'hello.instance_id', (h) => h.instanceId],
  ['agentVersion', 'hello.agent_version', (h) => h.agentVersion],
  ['cpuModel', 'hello.host.cpu_model', (h) => h.host?.cpuModel],
  ['os', 'hello.host.os', (h) => h.host?.os],
  ['kernel', 'hello.host.kernel', (h) => h.host?.kernel],
  ['cgroupMode', 'hello.host.cgroup_mode', (h) => h.host?.cgroupMode],
  ['cgroupDriver', 'hello.host.cgroup_driver', (h) => h.host?.cgroupDriver],
];

/**
 * Why a hello must not be taken (its first string past HELLO_BOUNDS, in
 * words), or undefined when it may. The node name is checked apart (a
 * Kubernetes node name, at most 253 characters).
 */
export function checkHello(hello: HelloStrings): string | undefined {
  for (const [bound, field, read] of HELLO_FIELDS) {
    const length = read(hello)?.length ?? 0;
    if (length > HELLO_BOUNDS[bound]) return `${field} is ${length} characters long; at most ${HELLO_BOUNDS[bound]}`;
  }
  return undefined;
}

let scratch: Float64Array | undefined;

/**
 * Why a sample's summaries (Sample.summaries) must not be stored, or
 * undefined: more than there are plans, a plan id of 0, or figures no window
 * of this node can have (its usage bounds, against the sample's capacity).
 */
export function checkSummaries(sample: Sample__Output): SampleRefusal | undefined {
  const summaries = sample.summaries;
  if (summaries.length > SAMPLE_BOUNDS.maxSummaries) return 'summary-implausible';
  const capCpu = sample.capacity?.cpuMillicores ?? 0;
  const capMemory = sample.capacity?.memoryBytes ?? 0;
  for (const s of summaries) {
    if (!(s.planId > 0) || !Number.isInteger(s.samples) || !(s.samples >= 1 && s.samples <= SAMPLE_BOUNDS.maxSummarySamples)) return 'summary-implausible';
    if (!(s.spanMs >= 0 && s.spanMs <= SAMPLE_BOUNDS.maxSummarySpanMs)) return 'summary-implausible';
    if (!(s.cpuMillicores >= 0 && s.cpuMillicores <= SAMPLE_BOUNDS.cpuUsageOverCapacity * capCpu)) return 'summary-implausible';
    if (!(s.memoryBytes >= 0 && s.memoryBytes <= SAMPLE_BOUNDS.memoryUsageOverCapacity * capMemory)) return 'summary-implausible';
  }
  return undefined;
}

/**
 * Writes a decoded sample into row[at .. at + width) (one reused row by
 * default), the form the store takes it in, and checks it there
 * (checkSampleRow(), then checkPods()).
 */
export function checkSample(sample: Sample__Output, nowMs: number, row: Float64Array = (scratch ??= new Float64Array(sampleRow().width)), at = 0): SampleRefusal | undefined {
  // A row holds no repeated field: the pods are checked on the object.
  sampleRow().write(sample.pods.length > 0 || sample.summaries.length > 0 ? { ...sample, pods: [], summaries: [] } : sample, row, at);
  return checkSampleRow(row, at, nowMs) ?? (sample.pods.length > 0 ? checkPods(sample) : undefined) ?? (sample.summaries.length > 0 ? checkSummaries(sample) : undefined);
}

export function isRefused(result: string): result is SampleRefused {
  return result.startsWith('refused-');
}

/**
 * Logs a refused sample at most once per node and reason every 5 minutes: a
 * broken agent sends one a second, and 10,000 of them would flood the log.
 */
export function refusalLog(log: Logger): (node: string, result: SampleRefused) => void {
  const once = new OncePer(300_000);
  return (node, result) => {
    if (once.take(`${node}\u0000${result}`)) {
      log.warn(
        { node, reason: result.slice('refused-'.length) },
        'agent sample refused and not stored (implausible numbers, or more pods, containers or characters than any node has; docs/security.md, sane agent data); the stream stays up and the sample is acknowledged: check the agent and the clock on that node',
      );
    }
  };
}
