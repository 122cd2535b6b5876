// Turns the raw files into one node sample per tick. Only reads; keeps just the
// previous cumulative counters it needs to turn them into rates.
import { join } from 'node:path';
import type { PodUsage__Output } from '../../proto/gen/oversell/v1/PodUsage.js';
import type { Pressure__Output } from '../../proto/gen/oversell/v1/Pressure.js';
import type { Sample__Output } from '../../proto/gen/oversell/v1/Sample.js';
import { detectCgroupLayout, listPodCgroups, type CgroupLayout } from './cgroup-layout.js';
import { ContentionMeter } from './cpu-contention.js';
import { readOptional } from './files.js';
import { parseMeminfo } from './meminfo.js';
import { podFiles, readPodFiles, type PodCounters, type PodFiles } from './pod-counters.js';
import { parsePsi } from './pressure.js';
import { cpuMillicoresBetween, parseProcStat, type CpuTimes } from './proc-stat.js';

export interface SamplerOptions {
  procRoot: string;
  cgroupRoot: string;
  /** How often the runnable count is read for CPU contention (cpu-contention.ts); 50 ms unless a test says. */
  contentionEveryMs?: number;
}

/** A sample as read from the host; the stream adds seq and the requests add requests. */
export type UsageReading = Omit<Sample__Output, 'seq' | 'requests'>;

export class NodeSampler {
  readonly #procRoot: string;
  readonly #cgroupRoot: string;
  readonly #psiCpu: string;
  readonly #psiMemory: string;
  readonly #contention: ContentionMeter;
  #layout: CgroupLayout;
  #prevCpu: CpuTimes;
  #prevPods = new Map<string, PodCounters & { atMs: number }>();
  /** By pod cgroup path: the pod set changes rarely, its file paths need not be rebuilt every report. */
  #podFiles = new Map<string, PodFiles>();

  constructor(options: SamplerOptions) {
    this.#procRoot = options.procRoot;
    this.#cgroupRoot = options.cgroupRoot;
    this.#psiCpu = join(this.#procRoot, 'pressure', 'cpu');
    this.#psiMemory = join(this.#procRoot, 'pressure', 'memory');
    this.#layout = detectCgroupLayout(this.#cgroupRoot);
    this.#prevCpu = this.#readCpu();
    this.#contention = new ContentionMeter({ loadavgPath: join(this.#procRoot, 'loadavg'), everyMs: options.contentionEveryMs ?? 50, cpus: () => this.#prevCpu.cpus });
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

  read(nowMs: number, includePods: boolean): UsageReading {
    const cpu = this.#readCpu();
    const cpuUsageMillicores = cpuMillicoresBetween(this.#prevCpu, cpu);
    this.#prevCpu = cpu;
    const memory = parseMeminfo(this.#mustRead('meminfo'));
    return {
      timestampMs: nowMs,
      cpuUsageMillicores,
      memoryWorkingSetBytes: memory.workingSetBytes,
      capacity: { cpuMillicores: cpu.cpus * 1000, memoryBytes: memory.totalBytes },
      pressure: this.#readPressure(nowMs),
      podsIncluded: includePods,
      pods: includePods ? this.#readPods(nowMs) : [],
    };
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

  /** Per-pod rates over the time since the previous pod report; pods seen for the first time wait one report. */
  #readPods(nowMs: number): PodUsage__Output[] {
    // The kubelet may create kubepods after the agent started.
    if (this.#layout.driver === undefined) this.#layout = detectCgroupLayout(this.#cgroupRoot);
    const seen = new Map<string, PodCounters & { atMs: number }>();
    const files = new Map<string, PodFiles>();
    const out: PodUsage__Output[] = [];
    for (const pod of listPodCgroups(this.#layout)) {
      const f = this.#podFiles.get(pod.path) ?? podFiles(this.#layout, pod);
      files.set(pod.path, f);
      const counters = readPodFiles(f);
      if (!counters) continue;
      seen.set(pod.uid, { ...counters, atMs: nowMs });
      const prev = this.#prevPods.get(pod.uid);
      if (!prev || nowMs <= prev.atMs) continue;
      const cpuNanos = Math.max(0, counters.cpuNanos - prev.cpuNanos);
      out.push({
        uid: pod.uid,
        qosClass: pod.qos,
        cpuUsageMillicores: Math.round(cpuNanos / ((nowMs - prev.atMs) * 1000)),
        memoryWorkingSetBytes: counters.workingSetBytes,
      });
    }
    this.#prevPods = seen;
    this.#podFiles = files;
    return out;
  }
}
