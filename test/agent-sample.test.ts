import assert from 'node:assert/strict';
import { cpSync, existsSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { cpus, tmpdir, totalmem } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { detectCgroupLayout, listPodCgroups } from '../agent/sample/cgroup-layout.js';
import { flatKeyedValue } from '../agent/sample/files.js';
import { parseMeminfo } from '../agent/sample/meminfo.js';
import { readPodCounters, readRootCgroupWorkingSet } from '../agent/sample/pod-counters.js';
import { parsePsi } from '../agent/sample/pressure.js';
import { cpuMillicoresBetween, parseProcStat } from '../agent/sample/proc-stat.js';
import { NodeSampler } from '../agent/sample/sampler.js';

const fixtures = fileURLToPath(new URL('./fixtures/', import.meta.url));
const cgroupFixture = (name: string) => join(fixtures, 'cgroup', name);
const procFixture = (name: string) => join(fixtures, 'proc', name);

// The same three pods live in every fixture tree (see test/fixtures/README.md).
const PODS = {
  '4f1f7f8e-2b5c-4c1e-9a57-0d6a4b1c9e01': { qos: 'guaranteed', cpuNanos: 183_455_201_338, workingSet: 536_870_912 - 104_857_600 },
  '8a2d3c4b-6e7f-4a8b-9c0d-1e2f3a4b5c02': { qos: 'burstable', cpuNanos: 92_004_117_902, workingSet: 268_435_456 - 67_108_864 },
  'c3b2a190-8f7e-4d6c-b5a4-938271605f03': { qos: 'besteffort', cpuNanos: 5_120_889_004, workingSet: 33_554_432 - 8_388_608 },
} as const;

describe('cgroup layouts from real host shapes', () => {
  const cases = [
    { tree: 'v2-systemd', mode: 'v2', driver: 'systemd', usecGranularity: true },
    { tree: 'v2-cgroupfs', mode: 'v2', driver: 'cgroupfs', usecGranularity: true },
    { tree: 'v1-cgroupfs', mode: 'v1', driver: 'cgroupfs', usecGranularity: false },
    { tree: 'v1-systemd-hybrid', mode: 'hybrid', driver: 'systemd', usecGranularity: false },
  ] as const;

  for (const c of cases) {
    it(`${c.tree}: detects ${c.mode} + ${c.driver} and reads every pod like the kubelet`, () => {
      const layout = detectCgroupLayout(cgroupFixture(c.tree));
      assert.equal(layout.mode, c.mode);
      assert.equal(layout.driver, c.driver);
      const pods = listPodCgroups(layout);
      assert.deepEqual(pods.map((p) => p.uid).sort(), Object.keys(PODS).sort());
      for (const pod of pods) {
        const want = PODS[pod.uid as keyof typeof PODS];
        assert.equal(pod.qos, want.qos, `${pod.uid} qos`);
        const counters = readPodCounters(layout, pod);
        assert.ok(counters, `${pod.uid} counters`);
        // cpu.stat has microseconds; cpuacct.usage nanoseconds.
        const cpu = c.usecGranularity ? Math.floor(want.cpuNanos / 1000) * 1000 : want.cpuNanos;
        assert.equal(counters.cpuNanos, cpu, `${pod.uid} cpu`);
        assert.equal(counters.workingSetBytes, want.workingSet, `${pod.uid} working set = usage - inactive_file`);
        // v2: cpu.stat's throttled_usec; v1: the cpu controller's cpu.stat throttled_time in ns (the v1 tree has it for the Guaranteed pod only, written in
        // the kernel's format, sched-bwc.rst); no file, 0.
        const throttled = c.mode === 'v2' ? 2_043_117 : c.tree === 'v1-cgroupfs' && want.qos === 'guaranteed' ? 1_500_000 : 0;
        assert.equal(counters.cpuThrottledMicros, throttled, `${pod.uid} throttled time`);
      }
    });
  }

  // Root files copied from a real cgroup v1 host (this project's CI machine) at the same moment.
  it('the node\'s working set as the kubelet reports it: the root memory cgroup\'s on v1 and hybrid, none on v2', () => {
    for (const c of cases) {
      const layout = detectCgroupLayout(cgroupFixture(c.tree));
      const root = readRootCgroupWorkingSet(layout);
      if (c.mode === 'v2') {
        assert.equal(root, undefined, `${c.tree}: the kubelet's figure is /proc/meminfo's`);
        continue;
      }
      assert.equal(root, 2_680_434_688 - 809_754_624, `${c.tree}: memory.usage_in_bytes - total_inactive_file`);
    }
    const v1 = detectCgroupLayout(cgroupFixture('v1-cgroupfs'));
    const reading = new NodeSampler({ procRoot: procFixture('vm-2cpu'), cgroupRoot: cgroupFixture('v1-cgroupfs') }).read(Date.now(), false);
    assert.equal(reading.rootCgroupMemoryWorkingSetBytes, readRootCgroupWorkingSet(v1), 'sent with every sample');
  });

  it('a pod whose cgroup vanished between list and read is skipped, not an error', () => {
    const layout = detectCgroupLayout(cgroupFixture('v2-systemd'));
    assert.equal(readPodCounters(layout, { uid: 'gone', qos: 'burstable', path: 'kubepods.slice/nope.slice' }), undefined);
  });

  it('a host without kubepods has no driver and no pods', () => {
    const dir = mkdtempSync(join(tmpdir(), 'oversell-cg-'));
    after(() => rmSync(dir, { recursive: true, force: true }));
    writeFileSync(join(dir, 'cgroup.controllers'), 'cpu memory\n');
    const layout = detectCgroupLayout(dir);
    assert.equal(layout.mode, 'v2');
    assert.equal(layout.driver, undefined);
    assert.deepEqual(listPodCgroups(layout), []);
  });

  it('refuses a directory that is not a cgroup mount, saying which flag to fix', () => {
    assert.throws(() => detectCgroupLayout(fixtures), /--cgroup-root/);
  });
});

describe('/proc parsers on files copied from a real host', () => {
  it('/proc/stat: aggregate ticks and online CPUs', () => {
    const t = parseProcStat(readFileSync(join(procFixture('vm-2cpu'), 'stat'), 'utf8'));
    assert.equal(t.cpus, 2);
    // cpu  94417 0 12129 31091 394 0 155 752 0 0
    assert.equal(t.busy, 94417 + 0 + 12129 + 0 + 155);
    assert.equal(t.total, t.busy + 31091 + 394 + 752);
  });

  it('cpu rate: busy share of elapsed ticks times CPUs, clamped', () => {
    const a = { busy: 1000, total: 2000, cpus: 4 };
    assert.equal(cpuMillicoresBetween(a, { busy: 1100, total: 2400, cpus: 4 }), 1000);
    assert.equal(cpuMillicoresBetween(a, a), 0);
    assert.equal(cpuMillicoresBetween(a, { busy: 900, total: 2400, cpus: 4 }), 0);
  });

  it('/proc/meminfo: total and working set = total - free - inactive(file)', () => {
    const m = parseMeminfo(readFileSync(join(procFixture('vm-2cpu'), 'meminfo'), 'utf8'));
    assert.equal(m.totalBytes, 24684084 * 1024);
    const text = readFileSync(join(procFixture('vm-2cpu'), 'meminfo'), 'utf8');
    const kib = (k: string) => Number(new RegExp(`^${k.replace(/[()]/g, '\\$&')}:\\s+(\\d+)`, 'm').exec(text)?.[1]);
    assert.equal(m.workingSetBytes, (kib('MemTotal') - kib('MemFree') - kib('Inactive(file)')) * 1024);
  });

  it('PSI lines', () => {
    const p = parsePsi('some avg10=49.19 avg60=61.48 avg300=52.42 total=332817870\nfull avg10=0.50 avg60=0.25 avg300=0.00 total=7\n');
    assert.deepEqual(p, { some: { avg10: 49.19, avg60: 61.48 }, full: { avg10: 0.5, avg60: 0.25 } });
  });

  it('flat keyed files: the value of the line that is exactly the key, not of a longer key containing it', () => {
    const v1 = 'cache 10\ninactive_file 7\ntotal_cache 30\ntotal_inactive_file 21\n';
    assert.equal(flatKeyedValue(v1, 'inactive_file'), 7);
    assert.equal(flatKeyedValue(v1, 'total_inactive_file'), 21);
    assert.equal(flatKeyedValue('usage_usec 123456789012\nuser_usec 1', 'usage_usec'), 123456789012);
    assert.equal(flatKeyedValue('user_usec 1\nusage_usec 42', 'usage_usec'), 42, 'last line without a newline');
    assert.equal(flatKeyedValue('anon_file 3\n', 'file'), undefined);
    assert.equal(flatKeyedValue('file x\n', 'file'), undefined);
    assert.equal(flatKeyedValue('', 'file'), undefined);
  });

  it('/proc/meminfo: keys are whole names (Inactive is not Inactive(file)), the first field is the line\'s first', () => {
    const m = parseMeminfo('MemTotal:       1000 kB\nMemFree:         100 kB\nInactive:        500 kB\nInactive(file):   50 kB\n');
    assert.equal(m.totalBytes, 1000 * 1024);
    assert.equal(m.workingSetBytes, (1000 - 100 - 50) * 1024);
    assert.equal(parseMeminfo('MemTotal: 1000 kB\nMemFree: 100 kB').workingSetBytes, 900 * 1024, 'no Inactive(file): nothing subtracted');
    assert.throws(() => parseMeminfo('MemTotal: 1000 kB\nXMemFree: 100 kB\n'), /MemFree/);
  });

  it('refuses garbage with the flag to check', () => {
    assert.throws(() => parseProcStat('hello'), /--proc-root/);
    assert.throws(() => parseMeminfo('hello'), /--proc-root/);
  });
});

describe('NodeSampler over fixture roots whose counters move', () => {
  const dir = mkdtempSync(join(tmpdir(), 'oversell-sampler-'));
  after(() => rmSync(dir, { recursive: true, force: true }));

  for (const tree of ['v2-systemd', 'v1-cgroupfs'] as const) {
    it(`${tree}: node and per-pod rates over a known interval`, () => {
      const proc = join(dir, tree, 'proc');
      const cg = join(dir, tree, 'cgroup');
      cpSync(procFixture('vm-2cpu'), proc, { recursive: true });
      cpSync(cgroupFixture(tree), cg, { recursive: true, verbatimSymlinks: true });
      const sampler = new NodeSampler({ procRoot: proc, cgroupRoot: cg });
      const first = sampler.read(10_000, true);
      assert.deepEqual(first.pods, [], 'the first pod report only primes the counters');
      assert.equal(first.pressure?.available, true);
      assert.equal(first.capacity?.cpuMillicores, 2000);

      // 1 s later: the node used 150 of 200 ticks over 2 CPUs; the guaranteed pod 250 ms of CPU.
      writeFileSync(join(proc, 'stat'), readFileSync(join(proc, 'stat'), 'utf8').replace(/^cpu {2}94417 0 12129 31091/m, 'cpu  94567 0 12129 31141'));
      const uid = '4f1f7f8e-2b5c-4c1e-9a57-0d6a4b1c9e01';
      if (tree === 'v2-systemd') {
        const f = join(cg, 'kubepods.slice', `kubepods-pod${uid.replaceAll('-', '_')}.slice`, 'cpu.stat');
        writeFileSync(f, readFileSync(f, 'utf8').replace(/^usage_usec (\d+)/m, (_, n: string) => `usage_usec ${Number(n) + 250_000}`));
      } else {
        const f = join(cg, 'cpu,cpuacct', 'kubepods', `pod${uid}`, 'cpuacct.usage');
        writeFileSync(f, `${Number(readFileSync(f, 'utf8')) + 250_000_000}\n`);
      }
      const next = sampler.read(11_000, true);
      assert.equal(next.cpuUsageMillicores, 1500);
      const pod = next.pods.find((p) => p.uid === uid);
      assert.ok(pod);
      assert.equal(pod.cpuUsageMillicores, 250);
      assert.equal(pod.qosClass, 'guaranteed');
      assert.equal(pod.memoryWorkingSetBytes, PODS[uid].workingSet);
      assert.equal(next.pods.length, 3);
      const idle = next.pods.find((p) => p.uid !== uid);
      assert.equal(idle?.cpuUsageMillicores, 0);
    });
  }

  it('pods that go and come back: a deleted pod leaves the report, a new cgroup at the same path waits one report like any new pod', () => {
    const proc = join(dir, 'churn', 'proc');
    const cg = join(dir, 'churn', 'cgroup');
    cpSync(procFixture('vm-2cpu'), proc, { recursive: true });
    cpSync(cgroupFixture('v2-systemd'), cg, { recursive: true, verbatimSymlinks: true });
    const uid = '8a2d3c4b-6e7f-4a8b-9c0d-1e2f3a4b5c02';
    const podDir = join(cg, 'kubepods.slice', 'kubepods-burstable.slice', `kubepods-burstable-pod${uid.replaceAll('-', '_')}.slice`);
    const saved = join(dir, 'churn', 'saved-pod');
    const sampler = new NodeSampler({ procRoot: proc, cgroupRoot: cg });
    sampler.read(10_000, true);
    assert.equal(sampler.read(11_000, true).pods.length, 3);

    cpSync(podDir, saved, { recursive: true });
    rmSync(podDir, { recursive: true });
    const without = sampler.read(12_000, true).pods.map((p) => p.uid);
    assert.equal(without.length, 2);
    assert.ok(!without.includes(uid));

    cpSync(saved, podDir, { recursive: true });
    const cpuStat = join(podDir, 'cpu.stat');
    writeFileSync(cpuStat, readFileSync(cpuStat, 'utf8').replace(/^usage_usec (\d+)/m, (_, n: string) => `usage_usec ${Number(n) + 1_000_000}`));
    assert.ok(!sampler.read(13_000, true).pods.some((p) => p.uid === uid), 'back, but only primed');
    writeFileSync(cpuStat, readFileSync(cpuStat, 'utf8').replace(/^usage_usec (\d+)/m, (_, n: string) => `usage_usec ${Number(n) + 500_000}`));
    const back = sampler.read(14_000, true).pods.find((p) => p.uid === uid);
    assert.equal(back?.cpuUsageMillicores, 500);
    assert.equal(back?.memoryWorkingSetBytes, PODS[uid].workingSet);
  });

  it('a pod that started between two reports is in the next one, with its CPU since its cgroup was made, at most the node\'s CPUs', () => {
    const proc = join(dir, 'new-pod', 'proc');
    const cg = join(dir, 'new-pod', 'cgroup');
    cpSync(procFixture('vm-2cpu'), proc, { recursive: true });
    cpSync(cgroupFixture('v2-systemd'), cg, { recursive: true, verbatimSymlinks: true });
    const uid = '8a2d3c4b-6e7f-4a8b-9c0d-1e2f3a4b5c02';
    const podDir = join(cg, 'kubepods.slice', 'kubepods-burstable.slice', `kubepods-burstable-pod${uid.replaceAll('-', '_')}.slice`);
    const cpuStat = join(podDir, 'cpu.stat');
    writeFileSync(cpuStat, readFileSync(cpuStat, 'utf8').replace(/^usage_usec (\d+)/m, 'usage_usec 2000000')); // 2 s of CPU
    const made = statSync(podDir).ctimeMs;
    const sampler = new NodeSampler({ procRoot: proc, cgroupRoot: cg });
    assert.ok(!sampler.read(made + 500, true).pods.some((p) => p.uid === uid), 'younger than a second: waits for the next report');
    const fresh = new NodeSampler({ procRoot: proc, cgroupRoot: cg });
    const first = fresh.read(made + 4000, true).pods.find((p) => p.uid === uid);
    assert.equal(first?.cpuUsageMillicores, 500, '2 s of CPU over its 4 s');
    assert.equal(first?.memoryWorkingSetBytes, PODS[uid].workingSet);
    writeFileSync(cpuStat, readFileSync(cpuStat, 'utf8').replace(/^usage_usec (\d+)/m, 'usage_usec 900000000')); // 900 s "in" 4 s: a changed directory time
    const capped = new NodeSampler({ procRoot: proc, cgroupRoot: cg }).read(made + 4000, true).pods.find((p) => p.uid === uid);
    assert.equal(capped?.cpuUsageMillicores, 2000, 'at most the node\'s 2 CPUs');
  });

  it('reports PSI as unavailable when the kernel has none', () => {
    const sampler = new NodeSampler({ procRoot: procFixture('no-psi'), cgroupRoot: cgroupFixture('v2-systemd') });
    const s = sampler.read(1, false);
    assert.equal(s.pressure?.available, false);
    assert.equal(s.podsIncluded, false);
    assert.deepEqual(s.pods, []);
  });
});

describe('this machine, for real', () => {
  it('detects the cgroup mode that /proc/mounts shows', () => {
    const layout = detectCgroupLayout('/sys/fs/cgroup');
    const mounts = readFileSync('/proc/mounts', 'utf8');
    const expected = existsSync('/sys/fs/cgroup/cgroup.controllers')
      ? 'v2'
      : /\scgroup2\s/.test(mounts) ? 'hybrid' : 'v1';
    assert.equal(layout.mode, expected);
  });

  it('reads /proc: capacity matches the OS, and a busy loop shows as CPU usage', () => {
    const sampler = new NodeSampler({ procRoot: '/proc', cgroupRoot: '/sys/fs/cgroup' });
    const until = Date.now() + 300;
    let x = 0;
    while (Date.now() < until) x += Math.sqrt(x + 1);
    const s = sampler.read(Date.now(), true);
    assert.equal(s.capacity?.cpuMillicores, cpus().length * 1000);
    assert.equal(s.capacity?.memoryBytes, totalmem());
    assert.ok(s.memoryWorkingSetBytes > 0 && s.memoryWorkingSetBytes < totalmem());
    assert.ok(s.cpuUsageMillicores >= 100, `a 300 ms busy loop used only ${s.cpuUsageMillicores}m (${x})`);
  });
});

describe('FakeHost (the e2e and benchmark stand-in for a node) through the real sampler', () => {
  it('the sampler sees the usage the test set', async () => {
    const { FakeHost } = await import('./helpers/fake-host.js');
    const dir = mkdtempSync(join(tmpdir(), 'oversell-fake-'));
    after(() => rmSync(dir, { recursive: true, force: true }));
    const host = new FakeHost(dir, 4, 16 * 1024 ** 3, { cpuMillicores: 1000, memoryWorkingSetBytes: 4 * 1024 ** 3, memorySomeAvg10: 12.5 }).start(20);
    const sampler = new NodeSampler({ procRoot: host.procRoot, cgroupRoot: host.cgroupRoot });
    await new Promise((r) => setTimeout(r, 300));
    const s = sampler.read(Date.now(), false);
    host.stop();
    assert.ok(Math.abs(s.cpuUsageMillicores - 1000) <= 50, `cpu ${s.cpuUsageMillicores}`);
    assert.equal(s.capacity?.cpuMillicores, 4000);
    assert.equal(s.memoryWorkingSetBytes, 4 * 1024 ** 3);
    assert.equal(s.pressure?.memorySome?.avg10, 12.5);
  });
});
