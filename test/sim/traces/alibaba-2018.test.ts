import assert from 'node:assert/strict';
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, describe, it } from 'node:test';
import { readAlibaba2018 } from '../../../sim/traces/alibaba-2018.js';
import { peak, type PublicMachine, usageAt } from '../../../sim/traces/public-workload.js';
import { readPublicTrace } from '../../../sim/traces/read.js';

const GiB = 1024 ** 3;
// The trace's mem_size 100 in these tests.
const machineMemoryBytes = 100 * GiB;
const fixture = fileURLToPath(new URL('../../fixtures/traces/alibaba-2018', import.meta.url));
const work = mkdtempSync(join(tmpdir(), 'oversell-alibaba-'));
after(() => rmSync(work, { recursive: true, force: true }));

const FILES = ['machine_meta', 'machine_usage', 'container_meta', 'container_usage'] as const;
type Name = (typeof FILES)[number];
let dirs = 0;
/** A trace directory: the fixture's files, with some replaced or left out. */
function traceDir(replace: Partial<Record<Name, string | null>> = {}): string {
  const dir = join(work, `case-${dirs++}`);
  mkdirSync(dir);
  for (const name of FILES) {
    const text = replace[name];
    if (text === null) continue;
    if (text === undefined) copyFileSync(join(fixture, `${name}.csv`), join(dir, `${name}.csv`));
    else writeFileSync(join(dir, `${name}.csv`), text);
  }
  return dir;
}
const fixtureText = (name: Name) => readFileSync(join(fixture, `${name}.csv`), 'utf8');
const find = <T extends { id: string }>(xs: T[], id: string): T => {
  const x = xs.find((y) => y.id === id);
  assert.ok(x, `${id} in the workload`);
  return x;
};
const close = (actual: number[], expected: number[]) =>
  assert.ok(actual.length === expected.length && actual.every((a, i) => Math.abs(a - expected[i]!) < 1e-6 * Math.max(1, Math.abs(expected[i]!))), `${actual} is ${expected}`);

describe('alibaba-2018 (cluster-trace-v2018)', async () => {
  const w = await readAlibaba2018(fixture, { machineMemoryBytes });
  const machines = w.machines as PublicMachine[];

  it('reads machines with their capacity from machine_meta, memory scaled by the stated machine size', () => {
    assert.equal(w.format, 'alibaba-2018');
    assert.deepEqual(machines.map((m) => [m.id, m.capacity]), [['m_1', { cpu: 96_000, memory: 100 * GiB }], ['m_2', { cpu: 64_000, memory: 50 * GiB }]]);
    assert.ok(w.notes.some((n) => n.includes(`mem_size 100 = ${100 * GiB} bytes, as given`)), w.notes.join('\n'));
  });

  it('reads machine usage as percentages of the machine, skipping rows without a reading and machines not in machine_meta', () => {
    const m1 = find(machines, 'm_1');
    assert.deepEqual([...m1.usage.t], [0, 10, 20, 30], 'trace seconds from the first sample at 1000');
    assert.deepEqual([...m1.usage.cpu], [9600, 19_200, 48_000, 28_800]);
    close([...m1.usage.memory].map((m) => m / GiB), [40, 50, 60, 55]);
    const m2 = find(machines, 'm_2');
    assert.deepEqual([...m2.usage.cpu], [16_000, 16_000, 16_000, 16_000], 'the row at 1040 has no mem_util_percent');
    assert.deepEqual([...m2.usage.memory].map((m) => m / GiB), [25, 25, 25, 25]);
    assert.equal(w.originSeconds, 1000);
    assert.equal(w.sampleSeconds, 10);
    assert.ok(w.notes.includes('1 machine (m_9): in machine_usage.csv but not in machine_meta.csv: skipped (no capacity to scale its percentages by).'), w.notes.join('\n'));
    assert.ok(w.notes.includes('1 machine_usage rows without cpu_util_percent or mem_util_percent: skipped.'), w.notes.join('\n'));
    assert.ok(!w.notes.some((n) => n.includes('capacity changes')), 'm_2\'s second row changes its status only');
  });

  it('reads containers with requests (100 = 1 core) and usage as a percentage of the request', () => {
    assert.equal(w.requestsKnown, true);
    assert.deepEqual(w.pods.map((p) => p.id), ['c_1', 'c_2']);
    const c1 = find(w.pods, 'c_1');
    assert.deepEqual(c1.request, { cpu: 4000, memory: 2 * GiB });
    assert.equal(c1.cpuLimit, 8000);
    assert.equal(c1.machine, 'm_1');
    assert.deepEqual([...c1.usage.t], [10, 20, 30]);
    assert.deepEqual([...c1.usage.cpu], [2000, 4000, 6000], '150 % of the request, under the limit');
    close([...c1.usage.memory].map((m) => m / GiB), [1, 1.5, 2]);
    assert.deepEqual([c1.start, c1.end], [10, 40]);
    assert.equal(peak(c1).cpu, 6000);
    assert.deepEqual(usageAt(c1, 25).cpu, 4000);
    assert.equal(w.durationSeconds, 40);
  });

  it('sorts a container\'s rows and keeps the higher of each reading at a repeated time', () => {
    const c2 = find(w.pods, 'c_2');
    assert.deepEqual([...c2.usage.t], [10, 20, 30]);
    // At 1030: 50 % and 75 % of 2 cores, 40 % and 30 % of 1.5 GiB.
    assert.deepEqual([...c2.usage.cpu], [500, 2000, 1500]);
    close([...c2.usage.memory].map((m) => m / GiB), [0.3, 0.9, 0.6]);
    assert.ok(w.notes.includes('1 machine or container (c_2): rows out of time order: sorted.'), w.notes.join('\n'));
    assert.ok(w.notes.some((n) => n.startsWith('1 machine or container (c_2): rows repeat a time_stamp')), w.notes.join('\n'));
  });

  it('reports and skips a container with a zero request and one not in container_meta', () => {
    assert.ok(w.notes.includes('1 container (c_3): cpu_request or mem_size is 0, so its usage percentages are of nothing: skipped.'), w.notes.join('\n'));
    assert.ok(w.notes.some((n) => n.startsWith('1 container (c_9): in container_usage.csv but not in container_meta.csv')), w.notes.join('\n'));
    assert.ok(w.notes.some((n) => n.startsWith('Container cpu_util_percent is a percentage of the container\'s cpu_request')), w.notes.join('\n'));
  });

  it('without the container files: the machines alone, requests unknown, and says why', async () => {
    const dir = traceDir({ container_meta: null, container_usage: null });
    const m = await readAlibaba2018(dir, { machineMemoryBytes });
    assert.equal(m.requestsKnown, false);
    assert.deepEqual(m.pods, []);
    assert.deepEqual(m.machines!.map((x) => [x.id, [...x.usage.cpu]]), machines.map((x) => [x.id, [...x.usage.cpu]]));
    assert.ok(m.notes.some((n) => n.startsWith(`container_meta.csv and container_usage.csv are not in ${dir}: only the machines' total usage is known`) && n.includes('Requests are unknown')), m.notes.join('\n'));
  });

  it('keeps only the usage rows in a window of trace seconds', async () => {
    const m = await readAlibaba2018(fixture, { machineMemoryBytes, window: { from: 1010, to: 1030 } });
    assert.equal(m.originSeconds, 1010);
    assert.deepEqual([...find(m.machines!, 'm_1').usage.cpu], [19_200, 48_000]);
    assert.deepEqual([...find(m.pods, 'c_1').usage.cpu], [2000, 4000]);
    // One sample per series: the interval must be given.
    const one = await readAlibaba2018(fixture, { machineMemoryBytes, window: { from: 1020, to: 1030 }, sampleSeconds: 10 });
    assert.deepEqual([find(one.pods, 'c_1').start, find(one.pods, 'c_1').end], [0, 10]);
  });

  it('reads time stamps before the trace\'s zero', async () => {
    const m = await readAlibaba2018(traceDir({ machine_usage: 'm_1,-10,10,10,,,,,\nm_1,0,20,10,,,,,\n', container_meta: null, container_usage: null }), { machineMemoryBytes });
    assert.equal(m.originSeconds, -10);
    assert.deepEqual([...find(m.machines!, 'm_1').usage.t], [0, 10]);
  });

  it('reads 200,000 usage rows streaming within seconds', async () => {
    const lines: string[] = [];
    for (let i = 0; i < 200_000; i++) lines.push(`m_${1 + (i % 2)},${1000 + 10 * Math.floor(i / 2)},${i % 97},${i % 89},1,1,1,1,1`);
    const dir = traceDir({ machine_usage: lines.join('\n') + '\n', container_meta: null, container_usage: null });
    const started = performance.now();
    const big = await readAlibaba2018(dir, { machineMemoryBytes });
    const seconds = (performance.now() - started) / 1000;
    assert.equal(find(big.machines!, 'm_1').usage.t.length, 100_000);
    assert.deepEqual(peak(find(big.machines!, 'm_2')), { cpu: 0.96 * 64_000, memory: 0.88 * 50 * GiB });
    // About 1 s when written, on 2 cores; the bound leaves room for a busy machine.
    assert.ok(seconds < 15, `read 200,000 rows in ${seconds.toFixed(1)} s`);
  });

  const refusals: [string, Partial<Record<Name, string | null>>, RegExp][] = [
    ['a row with too few columns', { machine_usage: 'm_1,1000,10,40\n' }, /^alibaba-2018: machine_usage\.csv line 1: expected 9 ,-separated columns, got 4$/],
    ['a header row (the files have none)', { container_meta: 'container_id,machine_id,time_stamp,app_du,status,cpu_request,cpu_limit,mem_size\n' + fixtureText('container_meta') }, /^alibaba-2018: container_meta\.csv line 1: time_stamp \(column 3\): expected a time in seconds, got 'time_stamp' \(these files have no header row\)$/],
    ['a reading that is not a number', { container_usage: 'c_1,m_1,1010,lots,50,1,1,1,1,1,1\n' }, /^alibaba-2018: container_usage\.csv line 1: cpu_util_percent \(column 4\): expected a number >= 0, got 'lots'$/],
    ['a header row in a usage file', { machine_usage: 'machine_id,time_stamp,cpu_util_percent,mem_util_percent,mem_gps,mkpi,net_in,net_out,disk_io_percent\n' }, /^alibaba-2018: machine_usage\.csv line 1: time_stamp \(column 2\): expected a time in seconds, got 'time_stamp' \(these files have no header row\)$/],
    ['a machine mem_size over 100', { machine_meta: 'm_1,0,1,a,96,100,USING\nm_2,0,1,a,96,512,USING\n' }, /^alibaba-2018: machine_meta\.csv line 2: mem_size \(column 6\): expected a normalized size 0-100, got '512'$/],
    ['an empty cpu_request', { container_meta: 'c_1,m_1,0,app_1,started,,800,2\n' }, /^alibaba-2018: container_meta\.csv line 1: cpu_request \(column 6\) is empty: expected a number$/],
    ['container_meta without container_usage', { container_usage: null }, /^alibaba-2018: .* has container_meta\.csv but no container_usage\.csv: container usage is a percentage of the container's request, so both are needed \(or neither, for the machines alone\)$/],
    ['container_usage without container_meta', { container_meta: null }, /has container_usage\.csv but no container_meta\.csv/],
    ['no machine_meta', { machine_meta: null }, /^alibaba-2018: .* has no machine_meta\.csv: the trace's machines come from machine_meta\.csv and machine_usage\.csv$/],
    ['an empty machine_meta', { machine_meta: '' }, /^alibaba-2018: machine_meta\.csv has no rows$/],
    ['usage of no known machine or container', { machine_usage: 'm_9,1000,10,10,1,1,1,1,1\n', container_meta: null, container_usage: null }, /^alibaba-2018: no usage row of a machine in machine_meta\.csv: nothing to replay$/],
  ];
  for (const [what, files, message] of refusals) {
    it(`refuses ${what}, naming the file and line`, async () => {
      await assert.rejects(readAlibaba2018(traceDir(files), { machineMemoryBytes }), (err: Error) => {
        assert.equal(err.name, 'TraceFormatError');
        assert.match(err.message, message);
        return true;
      });
    });
  }

  it('points at the archive when machine_meta is still packed', async () => {
    const dir = traceDir({ machine_meta: null });
    writeFileSync(join(dir, 'machine_meta.tar.gz'), '');
    await assert.rejects(readAlibaba2018(dir, { machineMemoryBytes }), /has no machine_meta\.csv \(extract machine_meta\.tar\.gz there first\)/);
  });

  it('refuses to guess the machines\' memory, and an empty window', async () => {
    await assert.rejects(readAlibaba2018(fixture, { machineMemoryBytes: 0 }), /^TraceFormatError: alibaba-2018: the trace gives memory normalized to 0-100, not in bytes: give machineMemoryBytes, the memory of a machine whose mem_size is 100 \(got 0\)$/);
    await assert.rejects(readPublicTrace('alibaba-2018', fixture), /^TraceFormatError: alibaba-2018: the trace gives memory normalized to 0-100, not in bytes: give the memory of a machine whose mem_size is 100$/);
    await assert.rejects(readAlibaba2018(fixture, { machineMemoryBytes, window: { from: 5, to: 5 } }), /window from 5 to 5: from must be before to/);
    await assert.rejects(readAlibaba2018(fixture, { machineMemoryBytes, window: { from: 0, to: 5 } }), /^TraceFormatError: alibaba-2018: no usage row from 0 to 5 of a machine in machine_meta\.csv or of a container in container_meta\.csv: nothing to replay$/);
  });

  it('is read by format name, with the options each format takes', async () => {
    const viaName = await readPublicTrace('alibaba-2018', fixture, { machineMemoryBytes });
    assert.deepEqual(viaName.pods.map((p) => p.id), ['c_1', 'c_2']);
    await assert.rejects(readPublicTrace('bitbrains', fixture, { machineMemoryBytes }), /machine memory and a window apply to alibaba-2018 only/);
  });
});
