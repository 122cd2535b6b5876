// CPU contention on the PSI scale, without CFS throttling.
//
// The kernel's CPU "some" PSI counts a task that its own cgroup's quota holds
// back as stalled: on kernels of this project's machines, one pod burning
// against a 150m limit puts /proc/pressure/cpu at 84 % on an otherwise idle
// 2-core node, while three unlimited burners on the same two cores (demand
// 1.5x capacity) show 51 % (docs/performance-log.md, 2026-11-28). A pod at its
// own limit is no sign the node is full, so the decision cannot use that line.
//
// Throttled tasks are off the run queues, so the count of runnable tasks
// (/proc/loadavg's "running") leaves them out. Sampled several times a second,
// the share of CPUs that have a task waiting, min(runnable - cpus, cpus) / cpus,
// is what PSI's per-CPU "some" measures for contention, and it is averaged the
// way PSI's avg10 and avg60 are.
import { closeSync, openSync, readSync } from 'node:fs';

export interface ContentionLine {
  avg10: number;
  avg60: number;
}

/** Runnable tasks in /proc/loadavg ("0.52 1.24 1.56 2/345 12345": the 2), or undefined when the text is not that file. */
export function runnableTasks(loadavg: string): number | undefined {
  const m = /^\S+\s+\S+\s+\S+\s+(\d+)\/\d+/.exec(loadavg);
  return m ? Number(m[1]) : undefined;
}

/** The share (0..1) of `cpus` CPUs that have a task waiting when `runnable` tasks are runnable. */
export function waitingShare(runnable: number, cpus: number): number {
  if (cpus <= 0) return 0;
  return Math.min(Math.max(0, runnable - cpus), cpus) / cpus;
}

/** The averages after `elapsedMs` at `share` (0..1) since `prev`, as PSI decays its own (percent). */
export function decayed(prev: ContentionLine, share: number, elapsedMs: number): ContentionLine {
  const toward = (avg: number, windowMs: number) => {
    const keep = Math.exp(-elapsedMs / windowMs);
    return avg * keep + 100 * share * (1 - keep);
  };
  return { avg10: toward(prev.avg10, 10_000), avg60: toward(prev.avg60, 60_000) };
}

/**
 * The wait before the next reading: `everyMs` on average, anywhere from half
 * to one and a half of it, so that a load with a period of its own cannot
 * line up with the readings and be seen always busy or always idle.
 */
export function jitteredDelayMs(everyMs: number, random: number): number {
  return everyMs * (0.5 + random);
}

export interface ContentionMeterOptions {
  /** The host's /proc/loadavg. */
  loadavgPath: string;
  /** How often the runnable count is read. */
  everyMs: number;
  /** Online CPUs of the host. */
  cpus: () => number;
}

/** /proc/loadavg is one short line. */
const LINE = Buffer.allocUnsafe(256);

/**
 * Reads the runnable count every `everyMs` and, at each take(), folds the mean
 * waiting share since the previous take() into the averages. Unavailable (take()
 * returns undefined) when the file cannot be read or parsed; the timer then
 * stops and only take() tries again. The file stays open and is read again from
 * its start (procfs makes the line anew for each read at 0): several times a
 * second, the open and close were most of a read's cost.
 */
export class ContentionMeter {
  readonly #options: ContentionMeterOptions;
  #timer: NodeJS.Timeout | undefined;
  #sum = 0;
  #count = 0;
  #line: ContentionLine = { avg10: 0, avg60: 0 };
  #lastTakeMs: number | undefined;
  #available = false;
  #fd: number | undefined;

  constructor(options: ContentionMeterOptions) {
    this.#options = options;
  }

  start(): this {
    this.#read();
    this.#schedule();
    return this;
  }

  stop(): void {
    clearTimeout(this.#timer);
    this.#timer = undefined;
    if (this.#fd !== undefined) closeSync(this.#fd);
    this.#fd = undefined;
  }

  /** The averages as of nowMs, or undefined when the runnable count cannot be read here. */
  take(nowMs: number): ContentionLine | undefined {
    if (this.#count === 0) this.#read();
    if (!this.#available) return undefined;
    if (this.#count > 0) {
      const elapsedMs = this.#lastTakeMs === undefined ? 1000 : Math.max(0, nowMs - this.#lastTakeMs);
      this.#line = decayed(this.#line, this.#sum / this.#count, elapsedMs);
      this.#lastTakeMs = nowMs;
      this.#sum = 0;
      this.#count = 0;
    }
    return { ...this.#line };
  }

  #readLine(): string | undefined {
    try {
      this.#fd ??= openSync(this.#options.loadavgPath, 'r');
      return LINE.toString('latin1', 0, readSync(this.#fd, LINE, 0, LINE.length, 0));
    } catch {
      return undefined;
    }
  }

  #schedule(): void {
    this.#timer = setTimeout(() => {
      this.#read();
      if (this.#timer !== undefined) this.#schedule();
    }, jitteredDelayMs(this.#options.everyMs, Math.random()));
    this.#timer.unref();
  }

  #read(): void {
    const text = this.#readLine();
    const runnable = text === undefined ? undefined : runnableTasks(text);
    if (runnable === undefined) {
      this.#available = false;
      this.stop();
      return;
    }
    this.#available = true;
    // The reading thread is itself running while it reads.
    this.#sum += waitingShare(runnable - 1, this.#options.cpus());
    this.#count += 1;
  }
}
