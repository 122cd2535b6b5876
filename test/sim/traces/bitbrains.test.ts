import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, describe, it } from 'node:test';
import { BITBRAINS_HEADER, readBitbrains } from '../../../sim/traces/bitbrains.js';
import { peak, type PublicPod, resample, usageAt } from '../../../sim/traces/public-workload.js';

const GiB = 1024 ** 3;
const T0 = 1376314846;
const fixture = fileURLToPath(new URL('../../fixtures/traces/bitbrains', import.meta.url));
const work = mkdtempSync(join(tmpdir(), 'oversell-bitbrains-'));
after(() => rmSync(work, { recursive: true, force: true }));

let dirs = 0;
/** A directory of VM files with these contents. */
function vmDir(files: Record<string, string>): string {
  const dir = join(work, `case-${dirs++}`);
  mkdirSync(dir);
  for (const [name, text] of Object.entries(files)) writeFileSync(join(dir, name), text);
  return dir;
}
const row = (t: number, cores = 1, capacity = 2000, usage = 1000, memoryKB = 1048576, memoryUsageKB = 524288) =>
  [t, cores, capacity, usage, (usage / capacity) * 100, memoryKB, memoryUsageKB, 0, 0, 0, 0].join(';\t');
const file = (...rows: string[]) => [BITBRAINS_HEADER, ...rows].join('\n') + '\n';
const byId = (pods: PublicPod[], id: string) => {
  const p = pods.find((x) => x.id === id);
  assert.ok(p, `VM ${id} in the workload`);
  return p;
};

describe('bitbrains (GWA-T-12)', async () => {
  const w = await readBitbrains(fixture);

  it('reads each VM file as a pod whose provisioned size is its request, and skips one with no memory', () => {
    assert.equal(w.format, 'bitbrains');
    assert.equal(w.machines, undefined, 'the trace has no hosts');
    assert.equal(w.requestsKnown, true);
    assert.deepEqual(w.pods.map((p) => p.id), ['1', '2', '3']);
    assert.deepEqual(byId(w.pods, '1').request, { cpu: 2000, memory: 4 * GiB });
    assert.deepEqual(byId(w.pods, '2').request, { cpu: 4000, memory: 64 * GiB }, '6.7108864E7 KB is 64 GiB');
    assert.deepEqual(byId(w.pods, '3').request, { cpu: 1000, memory: 2 * GiB });
    assert.ok(w.notes.some((n) => /^1 VM \(4\): provisioned memory is 0 in every row: skipped/.test(n)), w.notes.join('\n'));
  });

  it('turns MHz into millicores by the VM\'s MHz per core, and KB into bytes', () => {
    const vm1 = byId(w.pods, '1');
    // 2 cores of 2600 MHz: 1300 MHz is half a core.
    assert.deepEqual([...vm1.usage.cpu], [500, 1000, 2000, 1500, 500, 0, 1000, 500, 500, 1000]);
    assert.deepEqual([...vm1.usage.memory].map((m) => m / GiB), [1, 2, 3, 2, 1, 1, 2, 2, 1, 1]);
    assert.deepEqual(peak(vm1), { cpu: 2000, memory: 3 * GiB });
    // Usage above the provisioned size is what the VM used: kept.
    assert.deepEqual(peak(byId(w.pods, '2')), { cpu: 5000, memory: 24 * GiB });
  });

  it('reads the published files\' epoch seconds under a Timestamp [ms] header as seconds, and epoch milliseconds as milliseconds', () => {
    assert.equal(w.originSeconds, T0);
    assert.equal(w.sampleSeconds, 300);
    const vm1 = byId(w.pods, '1');
    assert.deepEqual([vm1.start, vm1.end], [0, 3000], '10 samples of 300 s');
    const vm3 = byId(w.pods, '3');
    assert.deepEqual([...vm3.usage.t], [600, 900, 1200, 1500, 1800], 'milliseconds, 600 s after the first VM');
    assert.deepEqual([...vm3.usage.cpu], [250, 500, 1000, 750, 500]);
    assert.deepEqual([vm3.start, vm3.end], [600, 2100]);
    assert.equal(w.durationSeconds, 3000);
    assert.ok(w.notes.some((n) => n.startsWith('3 files with Timestamp [ms] in the header hold epoch seconds')), w.notes.join('\n'));
    assert.ok(w.notes.some((n) => n.startsWith('1 file with epoch milliseconds')), w.notes.join('\n'));
  });

  it('sorts rows out of time order and keeps one sample per repeated timestamp, the higher of each', () => {
    const vm2 = byId(w.pods, '2');
    assert.deepEqual([...vm2.usage.t], [0, 300, 600, 900, 1200, 1500, 1800, 2100]);
    assert.deepEqual([...vm2.usage.cpu], [1000, 3000, 4000, 5000, 2000, 1000, 1000, 2000]);
    // At 1200 s: 12 GiB and, repeated, 14 GiB with less CPU.
    assert.deepEqual([...vm2.usage.memory].map((m) => m / GiB), [8, 16, 24, 20, 14, 8, 8, 10]);
    assert.ok(w.notes.some((n) => n === '1 VM (2): rows out of time order: sorted.'), w.notes.join('\n'));
    assert.ok(w.notes.some((n) => n.startsWith('1 VM (2): rows repeat a timestamp')), w.notes.join('\n'));
  });

  it('gives usage at a time step-held and on the simulator\'s grid by the peak of each step', () => {
    const vm1 = byId(w.pods, '1');
    assert.deepEqual(usageAt(vm1, 450), { cpu: 1000, memory: 2 * GiB });
    assert.deepEqual(usageAt(vm1, 3000), { cpu: 0, memory: 0 });
    const r = resample(vm1, 0, 600, 5);
    assert.deepEqual([...r.cpu], [1000, 2000, 500, 1000, 1000]);
    assert.deepEqual([...r.memory].map((m) => m / GiB), [2, 3, 1, 2, 1]);
    assert.deepEqual([...resample(byId(w.pods, '3'), 0, 300, 8).cpu], [0, 0, 250, 500, 1000, 750, 500, 0]);
  });

  it('reads a single file, a file without a header, and a line ending in the separator', async () => {
    const one = await readBitbrains(join(fixture, '1.csv'));
    assert.deepEqual(one.pods.map((p) => p.id), ['1']);
    const dir = vmDir({ '7.csv': [row(T0), row(T0 + 300) + ';', row(T0 + 600)].join('\n') });
    const w7 = await readBitbrains(join(dir, '7.csv'));
    assert.deepEqual([...w7.pods[0]!.usage.cpu], [500, 500, 500]);
  });

  it('reads a VM resized during the trace at its largest size, and a row without capacity at the VM\'s MHz per core', async () => {
    const dir = vmDir({ '5.csv': file(row(T0, 1, 2000, 1000, 1048576), row(T0 + 300, 2, 4000, 3000, 2097152), row(T0 + 600, 0, 0, 1000, 2097152)) });
    const w5 = await readBitbrains(dir);
    assert.deepEqual(w5.pods[0]!.request, { cpu: 2000, memory: 2 * GiB });
    assert.deepEqual([...w5.pods[0]!.usage.cpu], [500, 1500, 500]);
    assert.ok(w5.notes.some((n) => n.startsWith('1 VM (5): provisioned size changes during the trace: the request is the largest')), w5.notes.join('\n'));
  });

  it('reads 200,000 rows streaming within seconds', async () => {
    const dir = join(work, 'large');
    mkdirSync(dir);
    const lines = [BITBRAINS_HEADER];
    for (let i = 0; i < 200_000; i++) lines.push(row(T0 + 300 * i, 4, 10000, (i % 1000) * 10, 16777216, 1048576 + (i % 777)));
    writeFileSync(join(dir, '1.csv'), lines.join('\n') + '\n');
    const started = performance.now();
    const big = await readBitbrains(dir);
    const seconds = (performance.now() - started) / 1000;
    const vm = big.pods[0]!;
    assert.equal(vm.usage.t.length, 200_000);
    assert.deepEqual(peak(vm), { cpu: 3996, memory: (1048576 + 776) * 1024 });
    assert.equal(vm.end, 300 * 200_000);
    // About 1.6 s when written, on 2 cores, the file's writing included; the bound leaves room for a busy machine.
    assert.ok(seconds < 15, `read 200,000 rows in ${seconds.toFixed(1)} s`);
  });

  const refusals: [string, Record<string, string>, RegExp][] = [
    ['a row with too few columns', { '12.csv': file(row(T0), row(T0 + 300), '1;\t2;\t3;\t4') }, /^bitbrains: 12\.csv line 4: expected 11 ;-separated columns, got 4$/],
    ['a field that is not a number', { '3.csv': file(row(T0), row(T0 + 300).replace(';\t1;', ';\tfour;')) }, /^bitbrains: 3\.csv line 3: CPU cores \(column 2\): expected a number >= 0, got 'four'$/],
    ['an empty field', { '3.csv': file(row(T0).replace(/;\t524288;/, ';\t;')) }, /^bitbrains: 3\.csv line 2: Memory usage \[KB\] \(column 7\) is empty: expected a number$/],
    ['a negative reading', { '3.csv': file(row(T0, 1, 2000, -5)) }, /^bitbrains: 3\.csv line 2: CPU usage \[MHZ\] \(column 4\): expected a number >= 0, got '-5'$/],
    ['a header that is not Bitbrains\'', { '3.csv': 'time,cpu,mem\n' + row(T0) + '\n' }, /^bitbrains: 3\.csv line 1: expected a header of 11 ;-separated columns starting 'Timestamp' \(Timestamp \[ms\]; CPU cores; CPU capacity provisioned \[MHZ\]; \.\.\.\) or a row of 11 numbers, got 'time,cpu,mem'$/],
    ['seconds and milliseconds in one file', { '3.csv': file(row(T0), row((T0 + 300) * 1000)) }, /^bitbrains: 3\.csv line 3: Timestamp 1376315146000 is in milliseconds since 1970 but the file's first row is in seconds$/],
    ['a file with a header only', { '3.csv': file() }, /^bitbrains: 3\.csv has no rows$/],
    ['a directory of VMs none of which has memory', { '3.csv': file(row(T0, 1, 2000, 1000, 0), row(T0 + 300, 1, 2000, 1000, 0)) }, /^bitbrains: no VM in .* has both provisioned memory and CPU \(1 without memory, 0 without CPU\)$/],
    ['a directory without VM files', { 'README.txt': 'hello' }, /^bitbrains: .* has no \.csv files: give the directory of the VM files \(fastStorage, or one month of Rnd such as Rnd\/2013-7\) or one file$/],
    ['VMs of one sample each', { '3.csv': file(row(T0)) }, /^bitbrains: every series has a single sample, so the sampling interval is unknown: give sampleSeconds$/],
  ];
  for (const [what, files, message] of refusals) {
    it(`refuses ${what}, naming the file and line`, async () => {
      await assert.rejects(readBitbrains(vmDir(files)), (err: Error) => {
        assert.equal(err.name, 'TraceFormatError');
        assert.match(err.message, message);
        return true;
      });
    });
  }

  it('refuses a path that does not exist, saying so', async () => {
    await assert.rejects(readBitbrains(join(work, 'nowhere')), /^TraceFormatError: bitbrains: cannot read .*nowhere: ENOENT/);
  });

  it('reads VMs of one sample each when told the sampling interval', async () => {
    const w1 = await readBitbrains(vmDir({ '3.csv': file(row(T0)) }), { sampleSeconds: 300 });
    assert.deepEqual([w1.pods[0]!.start, w1.pods[0]!.end], [0, 300]);
  });
});
