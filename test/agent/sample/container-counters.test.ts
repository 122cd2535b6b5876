// Per-container usage (issue 33): the container cgroups under each pod's, in the
// four fixture layouts (an app and a sandbox container in every pod, files as on
// real hosts), read with the pod's formulas (cAdvisor's), turned into rates by
// the sampler, and what happens as containers come and go.
import assert from 'node:assert/strict';
import { cpSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { detectCgroupLayout, listContainerCgroups, listPodCgroups, type CgroupLayout } from '../../../agent/sample/cgroup-layout.js';
import { podFiles, readPodCounters, readPodFiles } from '../../../agent/sample/pod-counters.js';
import { NodeSampler } from '../../../agent/sample/sampler.js';

const fixtures = new URL('../../fixtures/', import.meta.url).pathname;
const cgroupFixture = (tree: string) => join(fixtures, 'cgroup', tree);
const dir = mkdtempSync(join(tmpdir(), 'oversell-containers-'));
after(() => rmSync(dir, { recursive: true, force: true }));

// The same containers in every tree: an app and the sandbox (pause) in each pod.
const CONTAINERS = {
  '4f1f7f8e-2b5c-4c1e-9a57-0d6a4b1c9e01': { app: '53137a24cd04ca38ccf1ed52053bae270a2763d77d9956198aee55ab313a8990', pause: 'a16cd1a33c3b3800474f09c88222a968d387e46ffa7fd972cd8f2dddace1b7ea' },
  '8a2d3c4b-6e7f-4a8b-9c0d-1e2f3a4b5c02': { app: '6a37451f32e7a64d17e9812b1ecd5c5e2d0bd03adf7aefab5759fe1842de6321', pause: 'e6d6e54fd397976ce109a3ad26e43063f675864a62e41aeff9c3a1fd4a5898ad' },
  'c3b2a190-8f7e-4d6c-b5a4-938271605f03': { app: '222307d3d31b4c709cc212272872d5962c0db2ac1a8f78aa74ce8500d86b80dc', pause: '3b5a9e2da0f209b12a5622f845e48052e57cca637bb38cc62b5f2ec552138369' },
} as const;
type Uid = keyof typeof CONTAINERS;
/** The pause's working set in every pod: 4,000,000 bytes used, 786,432 of them inactive file pages. */
const PAUSE_WORKING_SET = 4_000_000 - 786_432;

const TREES = [
  { tree: 'v2-systemd', v2: true, pauseCpuNanos: 1_000_000 },
  { tree: 'v2-cgroupfs', v2: true, pauseCpuNanos: 1_000_000 },
  { tree: 'v1-cgroupfs', v2: false, pauseCpuNanos: 24_506_746 },
  { tree: 'v1-systemd-hybrid', v2: false, pauseCpuNanos: 24_506_746 },
] as const;

/** The directory of a container's CPU counter (cpu.stat or cpuacct.usage) in a tree. */
function cpuFile(layout: CgroupLayout, path: string, v2: boolean): string {
  return v2 ? join(layout.memoryRoot, path, 'cpu.stat') : join(layout.cpuRoot, path, 'cpuacct.usage');
}

/** Adds CPU time to a counter file, in its own unit. */
function addCpu(file: string, nanos: number): void {
  const text = readFileSync(file, 'utf8');
  if (file.endsWith('cpu.stat')) {
    writeFileSync(file, text.replace(/^usage_usec (\d+)/m, (_, n: string) => `usage_usec ${Number(n) + nanos / 1000}`));
  } else {
    writeFileSync(file, `${Number(text) + nanos}\n`);
  }
}

function copyTree(tree: string, name: string): string {
  const to = join(dir, name);
  cpSync(cgroupFixture(tree), to, { recursive: true, verbatimSymlinks: true });
  return to;
}

const procRoot = (name: string) => {
  const to = join(dir, `${name}-proc`);
  cpSync(join(fixtures, 'proc', 'vm-2cpu'), to, { recursive: true });
  return to;
};

describe('container cgroups in real host layouts', () => {
  for (const t of TREES) {
    it(`${t.tree}: every pod's containers by runtime id, the sandbox among them; counters as the pod's, summing to it`, () => {
      const layout = detectCgroupLayout(cgroupFixture(t.tree));
      for (const pod of listPodCgroups(layout)) {
        const want = CONTAINERS[pod.uid as Uid];
        const containers = listContainerCgroups(layout, pod);
        assert.deepEqual(containers.map((c) => c.id).sort(), [want.app, want.pause].sort(), `${t.tree} ${pod.uid}`);
        const podCounters = readPodCounters(layout, pod)!;
        const byId = new Map(containers.map((c) => [c.id, readPodFiles(podFiles(layout, c))!]));
        const pause = byId.get(want.pause)!;
        const app = byId.get(want.app)!;
        assert.equal(pause.cpuNanos, t.pauseCpuNanos, 'the pause container\'s CPU counter');
        assert.equal(pause.workingSetBytes, PAUSE_WORKING_SET, 'working set = usage - inactive_file');
        // The fixture's containers hold all of the pod's usage: the formulas agree with the pod's.
        assert.equal(app.cpuNanos + pause.cpuNanos, podCounters.cpuNanos, 'CPU');
        assert.equal(app.workingSetBytes + pause.workingSetBytes, podCounters.workingSetBytes, 'working set');
      }
    });
  }

  it('names: containerd, CRI-O and Docker scopes under systemd, bare ids and crio-<id> under cgroupfs; CRI-O\'s conmon and anything else are not containers', () => {
    const id = (n: number) => n.toString(16).padStart(64, '0');
    const systemd = join(dir, 'names-systemd');
    const podPath = 'kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod11111111_2222_3333_4444_555555555555.slice';
    for (const name of [`cri-containerd-${id(1)}.scope`, `crio-${id(2)}.scope`, `docker-${id(3)}.scope`, `crio-conmon-${id(4)}.scope`, `cri-containerd-${id(5).slice(1)}.scope`, `cri-containerd-${id(6)}`, 'system.slice']) {
      mkdirSync(join(systemd, podPath, name), { recursive: true });
    }
    writeFileSync(join(systemd, 'cgroup.controllers'), 'cpu memory\n');
    const sd = detectCgroupLayout(systemd);
    const sdPod = listPodCgroups(sd)[0]!;
    assert.deepEqual(listContainerCgroups(sd, sdPod).map((c) => c.id).sort(), [id(1), id(2), id(3)]);
    assert.equal(listContainerCgroups(sd, sdPod).find((c) => c.id === id(2))?.path, `${podPath}/crio-${id(2)}.scope`);

    const cgroupfs = join(dir, 'names-cgroupfs');
    for (const name of [id(7), `crio-${id(8)}`, `crio-conmon-${id(9)}`, id(10).toUpperCase(), `${id(11)}.scope`]) {
      mkdirSync(join(cgroupfs, 'kubepods/besteffort/pod11111111-2222-3333-4444-555555555555', name), { recursive: true });
    }
    writeFileSync(join(cgroupfs, 'cgroup.controllers'), 'cpu memory\n');
    const cf = detectCgroupLayout(cgroupfs);
    assert.deepEqual(listContainerCgroups(cf, listPodCgroups(cf)[0]!).map((c) => c.id).sort(), [id(7), id(8)]);
  });
});

describe('per-container rates from the sampler', () => {
  for (const t of TREES) {
    it(`${t.tree}: CPU as a rate since the previous pod report, working set, for every container; the sandbox reported by its id`, () => {
      const cg = copyTree(t.tree, `rates-${t.tree}`);
      const sampler = new NodeSampler({ procRoot: procRoot(`rates-${t.tree}`), cgroupRoot: cg });
      assert.deepEqual(sampler.read(10_000, true).pods, [], 'the first report only primes');
      const layout = sampler.layout;
      const uid: Uid = '8a2d3c4b-6e7f-4a8b-9c0d-1e2f3a4b5c02';
      const pod = listPodCgroups(layout).find((p) => p.uid === uid)!;
      const app = listContainerCgroups(layout, pod).find((c) => c.id === CONTAINERS[uid].app)!;
      // 2 s later the app container has used 700 ms of CPU (so has its pod): 350 millicores.
      addCpu(cpuFile(layout, app.path, t.v2), 700_000_000);
      addCpu(cpuFile(layout, pod.path, t.v2), 700_000_000);
      const next = sampler.read(12_000, true);
      assert.equal(next.pods.length, 3);
      for (const p of next.pods) {
        const want = CONTAINERS[p.uid as Uid];
        assert.deepEqual(p.containers.map((c) => c.containerId).sort(), [want.app, want.pause].sort(), `${p.uid}: both containers`);
        const pause = p.containers.find((c) => c.containerId === want.pause)!;
        assert.deepEqual(pause, { containerId: want.pause, cpuUsageMillicores: 0, memoryWorkingSetBytes: PAUSE_WORKING_SET });
      }
      const burstable = next.pods.find((p) => p.uid === uid)!;
      assert.equal(burstable.cpuUsageMillicores, 350);
      const appUsage = burstable.containers.find((c) => c.containerId === CONTAINERS[uid].app)!;
      assert.equal(appUsage.cpuUsageMillicores, 350);
      assert.equal(appUsage.memoryWorkingSetBytes, burstable.memoryWorkingSetBytes - PAUSE_WORKING_SET);
    });
  }

  it('a container whose cgroup is gone when its files are read (listed, then removed) is left out; its pod and the other container are still reported', () => {
    for (const t of TREES) {
      const cg = copyTree(t.tree, `vanish-${t.tree}`);
      const sampler = new NodeSampler({ procRoot: procRoot(`vanish-${t.tree}`), cgroupRoot: cg });
      sampler.read(10_000, true);
      const layout = sampler.layout;
      const uid: Uid = '4f1f7f8e-2b5c-4c1e-9a57-0d6a4b1c9e01';
      const pod = listPodCgroups(layout).find((p) => p.uid === uid)!;
      const app = listContainerCgroups(layout, pod).find((c) => c.id === CONTAINERS[uid].app)!;
      // The listing still finds the directory (the memory hierarchy's, where
      // containers are listed) but its files are gone: what a read racing the
      // runtime's rmdir sees, ENOENT.
      const memDir = join(layout.memoryRoot, app.path);
      for (const f of readdirSync(memDir)) rmSync(join(memDir, f));
      if (!t.v2) rmSync(join(layout.cpuRoot, app.path), { recursive: true });
      assert.ok(listContainerCgroups(layout, pod).some((c) => c.id === CONTAINERS[uid].app), 'still listed');
      const next = sampler.read(11_000, true);
      const p = next.pods.find((x) => x.uid === uid);
      assert.ok(p, `${t.tree}: the pod is reported`);
      assert.deepEqual(p.containers.map((c) => c.containerId), [CONTAINERS[uid].pause], `${t.tree}: only the container that is still there`);
    }
  });

  it('containers that go and come: an exited one leaves the report, a restarted one (a new id) waits one report like a new pod', () => {
    const cg = copyTree('v2-systemd', 'churn');
    const sampler = new NodeSampler({ procRoot: procRoot('churn'), cgroupRoot: cg });
    sampler.read(10_000, true);
    const layout = sampler.layout;
    const uid: Uid = 'c3b2a190-8f7e-4d6c-b5a4-938271605f03';
    const pod = listPodCgroups(layout).find((p) => p.uid === uid)!;
    const oldDir = join(layout.memoryRoot, listContainerCgroups(layout, pod).find((c) => c.id === CONTAINERS[uid].app)!.path);
    const restarted = 'f'.repeat(64);
    const newDir = join(layout.memoryRoot, pod.path, `cri-containerd-${restarted}.scope`);
    cpSync(oldDir, newDir, { recursive: true });
    rmSync(oldDir, { recursive: true });
    const ids = (s: ReturnType<NodeSampler['read']>) => s.pods.find((p) => p.uid === uid)!.containers.map((c) => c.containerId);
    assert.deepEqual(ids(sampler.read(11_000, true)), [CONTAINERS[uid].pause], 'the exited container is gone; the new one only primed');
    addCpu(join(newDir, 'cpu.stat'), 100_000_000);
    const next = sampler.read(12_000, true);
    assert.deepEqual(ids(next).sort(), [CONTAINERS[uid].pause, restarted].sort());
    assert.equal(next.pods.find((p) => p.uid === uid)!.containers.find((c) => c.containerId === restarted)?.cpuUsageMillicores, 100);
  });
});
