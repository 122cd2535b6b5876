// Static facts about the host, read once at start through systeminformation.
// Some of its calls spawn processes (lscpu, uname), which is why this never runs
// on the sampling path.
import si from 'systeminformation';
import type { HostFacts__Output } from '../../proto/gen/oversell/v1/HostFacts.js';
import type { CgroupLayout } from './cgroup-layout.js';

export async function readHostFacts(layout: CgroupLayout): Promise<HostFacts__Output> {
  const [cpu, mem, os] = await Promise.all([si.cpu(), si.mem(), si.osInfo()]);
  return {
    cpuModel: `${cpu.manufacturer} ${cpu.brand}`.trim(),
    logicalCpus: cpu.cores,
    memoryTotalBytes: mem.total,
    os: `${os.distro} ${os.release}`.trim(),
    kernel: os.kernel,
    cgroupMode: layout.mode,
    cgroupDriver: layout.driver ?? '',
  };
}
