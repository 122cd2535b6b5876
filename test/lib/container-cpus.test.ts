// The ingest's default thread count (--ingest-threads): the container's CPU
// limit rounded up, never past the CPUs the process may run on, at least 1.
// The trees under test/fixtures/container-cpu are the files as a container
// sees them: cgroup v2's cpu.max at the mount's root, v1's CFS pair in the cpu
// controller's directory (cpu or cpu,cpuacct, as runtimes name it).
import assert from 'node:assert/strict';
import { availableParallelism } from 'node:os';
import { fileURLToPath } from 'node:url';
import { describe, it } from 'node:test';
import { availableCpus, containerCpus, quotaCpus, readCpuQuotaFiles } from '../../lib/container-cpus.js';

const fixture = (name: string) => fileURLToPath(new URL(`../fixtures/container-cpu/${name}`, import.meta.url));

describe('container CPUs', () => {
  it('reads the quota of each cgroup layout', () => {
    const rows: Array<[tree: string, quota: number | undefined]> = [
      ['v2-limited', 2],
      ['v2-fraction', 1.5],
      ['v2-unlimited', undefined],
      ['v1-limited', 3],
      ['v1-unlimited', undefined],
      ['none', undefined],
    ];
    for (const [tree, quota] of rows) assert.equal(quotaCpus(readCpuQuotaFiles(fixture(tree))), quota, tree);
  });

  it('sizes to the quota rounded up, at most the CPUs the process may run on, at least 1', () => {
    const rows: Array<[tree: string, parallelism: number, cpus: number]> = [
      ['v2-limited', 64, 2], // a 2-CPU limit on a 64-core node: 2 threads, not 64
      ['v2-fraction', 64, 2], // 1.5 CPUs keep two threads busy part of the time
      ['v2-limited', 1, 1], // pinned to one CPU: the quota cannot add any
      ['v2-unlimited', 8, 8],
      ['v1-limited', 16, 3],
      ['v1-unlimited', 4, 4],
      ['none', 6, 6],
    ];
    for (const [tree, parallelism, cpus] of rows) assert.equal(containerCpus(readCpuQuotaFiles(fixture(tree)), parallelism), cpus, `${tree} on ${parallelism} CPUs`);
  });

  it('a tiny, zero or garbled quota still gives one thread; garbage reads as no quota', () => {
    assert.equal(containerCpus({ cpuMax: '10000 100000' }, 8), 1, '100m');
    assert.equal(containerCpus({ cpuMax: 'max 100000' }, 0), 1, 'no CPU reported');
    assert.equal(quotaCpus({ cpuMax: 'garbage' }), undefined);
    assert.equal(quotaCpus({ cpuMax: '0 100000' }), undefined);
    assert.equal(quotaCpus({ cfsQuotaUs: '50000', cfsPeriodUs: '0' }), undefined);
  });

  it('on this host: at least 1, at most availableParallelism()', () => {
    const n = availableCpus();
    assert.ok(n >= 1 && n <= availableParallelism(), `${n} of ${availableParallelism()}`);
  });
});
