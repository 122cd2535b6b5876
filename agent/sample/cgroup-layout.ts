// Where the kubelet put the pod cgroups on this host, for every layout in use:
// cgroup v2 (unified), v1 and hybrid (v1 controllers plus a v2 mount at unified/),
// and the systemd ("kubepods.slice/kubepods-burstable.slice/...") or cgroupfs
// ("kubepods/burstable/pod<uid>") driver.
import { join } from 'node:path';
import { isDirectory, isFile, subdirectories } from './files.js';

export type CgroupMode = 'v2' | 'v1' | 'hybrid';
export type CgroupDriver = 'systemd' | 'cgroupfs';
export type QosClass = 'guaranteed' | 'burstable' | 'besteffort';

export interface CgroupLayout {
  mode: CgroupMode;
  /** Undefined when this host has no kubepods cgroup (no kubelet, or not yet started). */
  driver: CgroupDriver | undefined;
  /** Directory holding the kubepods cgroup for CPU accounting. */
  cpuRoot: string;
  /** Directory holding the kubepods cgroup for memory. */
  memoryRoot: string;
}

export interface PodCgroup {
  uid: string;
  qos: QosClass;
  /** Path below cpuRoot / memoryRoot. */
  path: string;
}

export function detectCgroupLayout(cgroupRoot: string): CgroupLayout {
  let mode: CgroupMode;
  let cpuRoot: string;
  let memoryRoot: string;
  if (isFile(join(cgroupRoot, 'cgroup.controllers'))) {
    mode = 'v2';
    cpuRoot = memoryRoot = cgroupRoot;
  } else if (isDirectory(join(cgroupRoot, 'memory'))) {
    mode = isFile(join(cgroupRoot, 'unified', 'cgroup.controllers')) ? 'hybrid' : 'v1';
    memoryRoot = join(cgroupRoot, 'memory');
    // Distributions mount cpuacct alone, or co-mounted with cpu under either name order.
    const candidates = ['cpu,cpuacct', 'cpuacct,cpu', 'cpuacct'].map((d) => join(cgroupRoot, d));
    cpuRoot = candidates.find(isDirectory) ?? join(cgroupRoot, 'cpuacct');
  } else {
    throw new Error(
      `${cgroupRoot} is neither a cgroup v2 mount (no cgroup.controllers) nor a v1 hierarchy (no memory/); ` +
        'pass --cgroup-root pointing at the host /sys/fs/cgroup',
    );
  }
  let driver: CgroupDriver | undefined;
  if (isDirectory(join(memoryRoot, 'kubepods.slice'))) driver = 'systemd';
  else if (isDirectory(join(memoryRoot, 'kubepods'))) driver = 'cgroupfs';
  return { mode, driver, cpuRoot, memoryRoot };
}

const SYSTEMD_POD = /^kubepods(?:-(burstable|besteffort))?-pod([0-9a-f_]+)\.slice$/;
const CGROUPFS_POD = /^pod([0-9a-f-]+)$/;

export interface ContainerCgroup {
  /** The runtime's id (64 hex digits), as the pod's status names it after "containerd://" and the like. */
  id: string;
  /** Path below cpuRoot / memoryRoot. */
  path: string;
}

// systemd driver: a scope per container, named by the runtime (containerd,
// CRI-O, Docker). CRI-O's conmon sits beside its container as
// crio-conmon-<id>.scope (or crio-conmon-<id> under cgroupfs): not a container.
const SYSTEMD_CONTAINER = /^(?:cri-containerd|crio|docker)-([0-9a-f]{64})\.scope$/;
// cgroupfs driver: the bare id (containerd, Docker) or crio-<id>.
const CGROUPFS_CONTAINER = /^(?:crio-)?([0-9a-f]{64})$/;

/**
 * The container cgroups under a pod's, the sandbox (pause) container among
 * them: nothing in the cgroup tree tells it apart (see PodUsage.containers).
 */
export function listContainerCgroups(layout: CgroupLayout, pod: PodCgroup): ContainerCgroup[] {
  const pattern = layout.driver === 'systemd' ? SYSTEMD_CONTAINER : CGROUPFS_CONTAINER;
  const out: ContainerCgroup[] = [];
  for (const name of subdirectories(join(layout.memoryRoot, pod.path))) {
    const m = pattern.exec(name);
    if (m?.[1]) out.push({ id: m[1], path: join(pod.path, name) });
  }
  return out;
}

/** Every pod cgroup under kubepods, with its QoS class from where it sits. */
export function listPodCgroups(layout: CgroupLayout): PodCgroup[] {
  const pods: PodCgroup[] = [];
  if (layout.driver === 'systemd') {
    const top = 'kubepods.slice';
    const scan = (dir: string, qos: QosClass) => {
      for (const name of subdirectories(join(layout.memoryRoot, dir))) {
        const m = SYSTEMD_POD.exec(name);
        if (m?.[2] && (m[1] ?? 'guaranteed') === qos) {
          pods.push({ uid: m[2].replaceAll('_', '-'), qos, path: join(dir, name) });
        }
      }
    };
    scan(top, 'guaranteed');
    scan(join(top, 'kubepods-burstable.slice'), 'burstable');
    scan(join(top, 'kubepods-besteffort.slice'), 'besteffort');
  } else if (layout.driver === 'cgroupfs') {
    const scan = (dir: string, qos: QosClass) => {
      for (const name of subdirectories(join(layout.memoryRoot, dir))) {
        const m = CGROUPFS_POD.exec(name);
        if (m?.[1]) pods.push({ uid: m[1], qos, path: join(dir, name) });
      }
    };
    scan('kubepods', 'guaranteed');
    scan(join('kubepods', 'burstable'), 'burstable');
    scan(join('kubepods', 'besteffort'), 'besteffort');
  }
  return pods;
}
