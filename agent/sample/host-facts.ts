// Static facts about the host, read once at start through systeminformation.
// Some of its calls spawn processes (lscpu, uname), which is why this never runs
// on the sampling path. It runs in a short-lived child process: loaded into the
// agent, systeminformation's modules would stay in its memory for good, for
// facts needed once.
import { execFile } from 'node:child_process';
import { createRequire } from 'node:module';
import { pathToFileURL } from 'node:url';
import type { HostFacts__Output } from '../../proto/gen/oversell/v1/HostFacts.js';
import type { CgroupLayout } from './cgroup-layout.js';

/** The few systeminformation fields the agent reports, as the child prints them. */
export interface RawHostFacts {
  cpu: { manufacturer: string; brand: string; cores: number };
  mem: { total: number };
  os: { distro: string; release: string; kernel: string };
}

// Runs in the child: argv[1] is systeminformation's entry, resolved by the agent
// so the child needs no module resolution of its own.
const CHILD = `
const { default: si } = await import(process.argv[1]);
const [cpu, mem, os] = await Promise.all([si.cpu(), si.mem(), si.osInfo()]);
process.stdout.write(JSON.stringify({
  cpu: { manufacturer: cpu.manufacturer, brand: cpu.brand, cores: cpu.cores },
  mem: { total: mem.total },
  os: { distro: os.distro, release: os.release, kernel: os.kernel },
}));
`;

/** Runs systeminformation in a child Node process; rejects if it fails or takes longer than timeoutMs. */
export function readRawHostFacts(timeoutMs = 30_000): Promise<RawHostFacts> {
  const entry = pathToFileURL(createRequire(import.meta.url).resolve('systeminformation')).href;
  return new Promise((resolve, reject) => {
    execFile(process.execPath, ['--input-type=module', '-e', CHILD, entry], { timeout: timeoutMs, maxBuffer: 1 << 20 }, (err, stdout, stderr) => {
      if (err) {
        reject(new Error(`host facts child failed: ${err.message}${stderr ? `: ${stderr.trim().slice(0, 500)}` : ''}`));
        return;
      }
      try {
        resolve(JSON.parse(stdout) as RawHostFacts);
      } catch {
        reject(new Error(`host facts child printed no JSON: ${stdout.slice(0, 200)}`));
      }
    });
  });
}

export function toHostFacts(raw: RawHostFacts, layout: CgroupLayout): HostFacts__Output {
  return {
    cpuModel: `${raw.cpu.manufacturer} ${raw.cpu.brand}`.trim(),
    logicalCpus: raw.cpu.cores,
    memoryTotalBytes: raw.mem.total,
    os: `${raw.os.distro} ${raw.os.release}`.trim(),
    kernel: raw.os.kernel,
    cgroupMode: layout.mode,
    cgroupDriver: layout.driver ?? '',
  };
}

export async function readHostFacts(layout: CgroupLayout): Promise<HostFacts__Output> {
  return toHostFacts(await readRawHostFacts(), layout);
}
