// A fake host root for the real agent: /proc files and a cgroup v2 tree the test
// controls. The agent reads them exactly as it reads a real host; the test sets
// the usage and pressure it should see.
import { cpSync, mkdirSync, renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const fixtures = fileURLToPath(new URL('../fixtures/', import.meta.url));

export interface FakeUsage {
  cpuMillicores: number;
  memoryWorkingSetBytes: number;
  cpuSomeAvg10?: number;
  memorySomeAvg10?: number;
}

/** Like the kernel's files, never seen half-written: write aside, then rename over. */
function writeAtomic(path: string, text: string): void {
  writeFileSync(`${path}.tmp`, text);
  renameSync(`${path}.tmp`, path);
}

export class FakeHost {
  readonly procRoot: string;
  readonly cgroupRoot: string;
  #busy = 0;
  #total = 0;
  #usage: FakeUsage;
  #timer: NodeJS.Timeout | undefined;
  #last = Date.now();

  constructor(
    dir: string,
    readonly cpus: number,
    readonly memoryBytes: number,
    usage: FakeUsage = { cpuMillicores: 0, memoryWorkingSetBytes: 0 },
  ) {
    this.procRoot = join(dir, 'proc');
    this.cgroupRoot = join(dir, 'cgroup');
    mkdirSync(join(this.procRoot, 'pressure'), { recursive: true });
    cpSync(join(fixtures, 'cgroup', 'v2-systemd'), this.cgroupRoot, { recursive: true });
    this.#usage = usage;
    this.#write();
  }

  get usage(): FakeUsage {
    return this.#usage;
  }

  set(usage: FakeUsage): void {
    this.#advance();
    this.#usage = usage;
    this.#write();
  }

  /** Moves the CPU counters forward at the set usage, like a running kernel. */
  start(everyMs = 100): this {
    this.#timer = setInterval(() => {
      this.#advance();
      this.#write();
    }, everyMs);
    this.#timer.unref();
    return this;
  }

  stop(): void {
    clearInterval(this.#timer);
  }

  #advance(): void {
    const now = Date.now();
    const ticks = ((now - this.#last) / 10) * this.cpus; // USER_HZ = 100 per CPU
    this.#last = now;
    this.#total += ticks;
    this.#busy += ticks * Math.min(1, this.#usage.cpuMillicores / (this.cpus * 1000));
  }

  #write(): void {
    const busy = Math.round(this.#busy);
    const idle = Math.max(0, Math.round(this.#total) - busy);
    const perCpu = Array.from({ length: this.cpus }, (_, i) => `cpu${i} ${Math.round(busy / this.cpus)} 0 0 ${Math.round(idle / this.cpus)} 0 0 0 0 0 0`);
    writeAtomic(join(this.procRoot, 'stat'), [`cpu  ${busy} 0 0 ${idle} 0 0 0 0 0 0`, ...perCpu, 'intr 0', 'ctxt 0', 'btime 0', ''].join('\n'));
    const totalKib = Math.floor(this.memoryBytes / 1024);
    const usedKib = Math.floor(this.#usage.memoryWorkingSetBytes / 1024);
    writeAtomic(
      join(this.procRoot, 'meminfo'),
      `MemTotal:       ${totalKib} kB\nMemFree:        ${totalKib - usedKib} kB\nMemAvailable:   ${totalKib - usedKib} kB\nInactive(file):        0 kB\n`,
    );
    const psi = (some = 0) => `some avg10=${some.toFixed(2)} avg60=${some.toFixed(2)} avg300=0.00 total=0\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n`;
    writeAtomic(join(this.procRoot, 'pressure', 'cpu'), psi(this.#usage.cpuSomeAvg10));
    writeAtomic(join(this.procRoot, 'pressure', 'memory'), psi(this.#usage.memorySomeAvg10));
  }
}


/**
 * A private copy of a real host's files (this 2-CPU VM's /proc and a v2
 * systemd cgroup tree) under dir, for agents a test may change the files of.
 */
export function copyFixtureHost(dir: string): { procRoot: string; cgroupRoot: string } {
  const procRoot = join(dir, 'proc');
  const cgroupRoot = join(dir, 'cgroup');
  cpSync(join(fixtures, 'proc', 'vm-2cpu'), procRoot, { recursive: true });
  cpSync(join(fixtures, 'cgroup', 'v2-systemd'), cgroupRoot, { recursive: true });
  return { procRoot, cgroupRoot };
}
