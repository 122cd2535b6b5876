// Turns the raw files into one node sample per tick. Only reads; keeps just the
// previous cumulative counters it needs to turn them into rates.
import { statSync } from 'node:fs';
import { join } from 'node:path';
import type { ContainerUsage__Output } from '../../proto/gen/oversell/v1/ContainerUsage.js';
import type { CpuManager__Output } from '../../proto/gen/oversell/v1/CpuManager.js';
import type { PodUsage__Output } from '../../proto/gen/oversell/v1/PodUsage.js';
import type { Pressure__Output } from '../../proto/gen/oversell/v1/Pressure.js';
import type { Sample__Output } from '../../proto/gen/oversell/v1/Sample.js';
import { detectCgroupLayout, listContainerCgroups, listPodCgroups, type CgroupLayout } from './cgroup-layout.js';
import { ContentionMeter } from './cpu-contention.js';
import { CpuManagerReader, type CpuManagerReading } from './cpu-manager.js';
import { readOptional } from './files.js';
import { parseMeminfo } from './meminfo.js';
import { podFiles, readPodFiles, readRootCgroupWorkingSet, type PodCounters, type PodFiles } from './pod-counters.js';
import { parsePsi } from './pressure.js';
import { cpuMillicoresBetween, parseProcStat, type CpuTimes } from './proc-stat.js';

/**
 * How often the runnable count is read. Each reading wakes the agent: on the
 * 2-core VM of docs/benchmarks.md, reading every 50 ms cost 7 millicores, two
 * thirds of the agent's CPU; every 200 ms reads the same averages within 2
 * points under steady and bursty loads (docs/performance-log.md, 2026-11-29).
 */
const CONTENTION_EVERY_MS = 200;

export interface SamplerOptions {
  procRoot: string;
  cgroupRoot: string;
  /** How often the runnable count is read for CPU contention (cpu-contention.ts); CONTENTION_EVERY_MS unless a test says. */
  contentionEveryMs?: number;
  /** The kubelet's root directory, whose cpu_manager_state is read (cpu-manager.ts); undefined: not read, the CPU manager left unknown. */
  kubeletRoot?: string | undefined;
}

/** A sample as read from the host; the stream adds seq and the requests add requests. */
export type UsageReading = Omit<Sample__Output, 'seq' | 'requests'>;

export class NodeSampler {
  readonly #procRoot: string;
  readonly #cgroupRoot: string;
  readonly #psiCpu: string;
  readonly #psiMemory: string;
  readonly #contention: ContentionMeter;
  readonly #cpuManager: CpuManagerReader | undefined;
  #cpuManagerReading: CpuManagerReading = { policy: 'unknown', why: 'not read' };
  #layout: CgroupLayout;
  #prevCpu: CpuTimes;
  /** By pod uid, and by container id: both are unique on a node. */
  #prevPods = new Map<string, Reading>();
  #prevContainers = new Map<string, Reading>();
  /** By pod or container cgroup path: the set changes rarely, its file paths need not be rebuilt every report. */
  #files = new Map<string, PodFiles>();

  constructor(options: SamplerOptions) {
    this.#procRoot = options.procRoot;
    this.#cgroupRoot = options.cgroupRoot;
    this.#psiCpu = join(this.#procRoot, 'pressure', 'cpu');
    this.#psiMemory = join(this.#procRoot, 'pressure', 'memory');
    this.#layout = detectCgroupLayout(this.#cgroupRoot);
    this.#prevCpu = this.#readCpu();
    this.#cpuManager = options.kubeletRoot === undefined ? undefined : new CpuManagerReader(options.kubeletRoot);
    this.#contention = new ContentionMeter({ loadavgPath: join(this.#procRoot, 'loadavg'), everyMs: options.contentionEveryMs ?? CONTENTION_EVERY_MS, cpus: () => this.#prevCpu.cpus });
  }

  /** Starts reading the runnable count between samples; without it each read() takes one reading. */
  start(): this {
    this.#contention.start();
    return this;
  }

  stop(): void {
    this.#contention.stop();
  }

  get layout(): CgroupLayout {
    return this.#layout;
  }

  /** What the last read() made of the kubelet's CPU manager checkpoint, and where it reads it (undefined: nowhere). */
  get cpuManager(): { reading: CpuManagerReading; path: string | undefined } {
    return { reading: this.#cpuManagerReading, path: this.#cpuManager?.path };
  }

  /** One sample; with the pod report when `includePods` says so (given the node's memory just read). */
  read(nowMs: number, includePods: boolean | ((memory: { workingSetBytes: number; totalBytes: number }) => boolean)): UsageReading {
    const cpu = this.#readCpu();
    const cpuUsageMillicores = cpuMillicoresBetween(this.#prevCpu, cpu);
    this.#prevCpu = cpu;
    const memory = parseMeminfo(this.#mustRead('meminfo'));
    const withPods = typeof includePods === 'function' ? includePods(memory) : includePods;
    return {
      timestampMs: nowMs,
      cpuUsageMillicores,
      memoryWorkingSetBytes: memory.workingSetBytes,
      rootCgroupMemoryWorkingSetBytes: readRootCgroupWorkingSet(this.#layout) ?? 0,
      capacity: { cpuMillicores: cpu.cpus * 1000, memoryBytes: memory.totalBytes },
      pressure: this.#readPressure(nowMs),
      podsIncluded: withPods,
      summaries: [],
      onBeat: false, podNamesAsBefore: false,
      pods: withPods ? this.#readPods(nowMs) : [],
      cpuManager: this.#readCpuManager(cpu.cpus),
    };
  }

  /** The CPU manager as the sample carries it: null when unknown; exclusive CPUs at most the node's (the gateway refuses more). */
  #readCpuManager(cpus: number): CpuManager__Output | null {
    if (!this.#cpuManager) return null;
    const r = (this.#cpuManagerReading = this.#cpuManager.read());
    if (r.policy === 'unknown') return null;
    return { staticPolicy: r.policy === 'static', exclusiveCpus: r.policy === 'static' ? Math.min(r.exclusiveCpus, cpus) : 0 };
  }

  #readCpu(): CpuTimes {
    return parseProcStat(this.#mustRead('stat'));
  }

  #mustRead(name: string): string {
    const path = join(this.#procRoot, name);
    const text = readOptional(path);
    if (text === undefined) throw new Error(`cannot read ${path}; check --proc-root (the host /proc, mounted read-only)`);
    return text;
  }

  #readPressure(nowMs: number): Pressure__Output {
    const cpuContention = this.#contention.take(nowMs) ?? null;
    const cpu = readOptional(this.#psiCpu);
    const memory = readOptional(this.#psiMemory);
    if (cpu === undefined || memory === undefined) {
      const zero = { avg10: 0, avg60: 0 };
      return { available: false, cpuSome: zero, cpuFull: zero, memorySome: zero, memoryFull: zero, cpuContention };
    }
    const c = parsePsi(cpu);
    const m = parsePsi(memory);
    return { available: true, cpuSome: c.some, cpuFull: c.full, memorySome: m.some, memoryFull: m.full, cpuContention };
  }

  /**
   * Per-pod and per-container rates over the time since the previous pod
   * report; a pod or container seen for the first time waits one report.
   */
  #readPods(nowMs: number): PodUsage__Output[] {
    // The kubelet may create kubepods after the agent started.
    if (this.#layout.driver === undefined) this.#layout = detectCgroupLayout(this.#cgroupRoot);
    const seenPods = new Map<string, Reading>();
    const seenContainers = new Map<string, Reading>();
    const files = new Map<string, PodFiles>();
    const read = (path: string, cgroup: { path: string }, withThrottle = false): PodCounters | undefined => {
      const f = this.#files.get(path) ?? podFiles(this.#layout, cgroup, withThrottle);
      files.set(path, f);
      return readPodFiles(f);
    };
    const out: PodUsage__Output[] = [];
    for (const pod of listPodCgroups(this.#layout)) {
      const counters = read(pod.path, pod, true);
      if (!counters) continue;
      seenPods.set(pod.uid, { ...counters, atMs: nowMs });
      const containers: ContainerUsage__Output[] = [];
      for (const c of listContainerCgroups(this.#layout, pod)) {
        // Gone between listing and reading: the container exited, it has no usage to report.
        const cc = read(c.path, c);
        if (!cc) continue;
        seenContainers.set(c.id, { ...cc, atMs: nowMs });
        const rate = rateSince(this.#prevContainers.get(c.id), cc, nowMs) ?? rateSinceCreated(join(this.#layout.memoryRoot, c.path), cc, nowMs, this.#prevCpu.cpus);
        if (rate !== undefined) containers.push({ containerId: c.id, cpuUsageMillicores: rate, memoryWorkingSetBytes: cc.workingSetBytes });
      }
      const rate = rateSince(this.#prevPods.get(pod.uid), counters, nowMs) ?? rateSinceCreated(join(this.#layout.memoryRoot, pod.path), counters, nowMs, this.#prevCpu.cpus);
      if (rate === undefined) continue;
      out.push({ uid: pod.uid, qosClass: pod.qos, cpuUsageMillicores: rate, memoryWorkingSetBytes: counters.workingSetBytes, containers, cpuThrottledMicros: counters.cpuThrottledMicros });
    }
    this.#prevPods = seenPods;
    this.#prevContainers = seenContainers;
    this.#files = files;
    return out;
  }
}

type Reading = PodCounters & { atMs: number };

/**
 * A cgroup seen for the first time: its CPU since it was made (its
 * directory's change time), so a pod that started and grew between two
 * reports is in the next one, with its memory, and relief can see it.
 * Undefined when younger than a second or the time cannot be read; at most
 * the node's CPUs (a directory whose time was changed since must not make a
 * rate the gateway refuses the whole sample for).
 */
function rateSinceCreated(dir: string, now: PodCounters, nowMs: number, cpus: number): number | undefined {
  let createdMs: number;
  try {
    createdMs = statSync(dir).ctimeMs;
  } catch {
    return undefined;
  }
  if (!(nowMs - createdMs >= 1000)) return undefined;
  return Math.min(cpus * 1000, Math.round(Math.max(0, now.cpuNanos) / ((nowMs - createdMs) * 1000)));
}

/** Millicores used since prev, or undefined without a previous reading to measure from. */
function rateSince(prev: Reading | undefined, now: PodCounters, nowMs: number): number | undefined {
  if (!prev || nowMs <= prev.atMs) return undefined;
  const cpuNanos = Math.max(0, now.cpuNanos - prev.cpuNanos);
  return Math.round(cpuNanos / ((nowMs - prev.atMs) * 1000));
}
