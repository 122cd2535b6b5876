// CPU contention on the PSI scale from the runnable count (agent/sample/cpu-contention.ts):
// the arithmetic, the meter over a loadavg file the test writes, and what a node
// sample carries from it. The same meter against a real kernel, where the
// kernel's PSI counts throttling, is test/e2e/simulate-vs-real-node.
import assert from 'node:assert/strict';
import { cpSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { ContentionMeter, decayed, jitteredDelayMs, runnableTasks, waitingShare } from '../../../agent/sample/cpu-contention.js';
import { NodeSampler } from '../../../agent/sample/sampler.js';

const fixtures = new URL('../../fixtures/', import.meta.url).pathname;
const dir = mkdtempSync(join(tmpdir(), 'oversell-contention-'));
after(() => rmSync(dir, { recursive: true, force: true }));
const loadavg = (running: number) => `0.52 1.24 1.56 ${running}/345 12345\n`;

describe('CPU contention from the runnable count', () => {
  it('reads the runnable count of /proc/loadavg and refuses other text', () => {
    assert.equal(runnableTasks(loadavg(7)), 7);
    assert.equal(runnableTasks('0.00 0.01 0.05 1/123 4567'), 1);
    assert.equal(runnableTasks('MemTotal: 1 kB'), undefined);
    assert.equal(runnableTasks(''), undefined);
  });

  it('counts the share of CPUs with a task waiting: none up to the CPU count, all at twice it', () => {
    assert.equal(waitingShare(0, 2), 0);
    assert.equal(waitingShare(2, 2), 0);
    assert.equal(waitingShare(3, 2), 0.5);
    assert.equal(waitingShare(4, 2), 1);
    assert.equal(waitingShare(40, 2), 1);
    assert.equal(waitingShare(5, 0), 0);
  });

  it('averages like PSI: 10 s at full contention from calm gives avg10 1 - 1/e, avg60 far less', () => {
    const after10s = decayed({ avg10: 0, avg60: 0 }, 1, 10_000);
    assert.ok(Math.abs(after10s.avg10 - 100 * (1 - Math.exp(-1))) < 1e-9, String(after10s.avg10));
    assert.ok(Math.abs(after10s.avg60 - 100 * (1 - Math.exp(-1 / 6))) < 1e-9, String(after10s.avg60));
    // One step of 10 s equals ten steps of 1 s.
    let stepped = { avg10: 0, avg60: 0 };
    for (let i = 0; i < 10; i++) stepped = decayed(stepped, 1, 1000);
    assert.ok(Math.abs(stepped.avg10 - after10s.avg10) < 1e-9);
  });

  it('the meter rises while tasks wait beyond the CPUs and falls back when they do not; the reading thread itself is not counted', () => {
    const path = join(dir, 'loadavg');
    const meter = new ContentionMeter({ loadavgPath: path, everyMs: 50, cpus: () => 2 });
    // 2 CPUs, 3 runnable besides the reader: half the CPUs have a task waiting.
    writeFileSync(path, loadavg(4));
    let line = meter.take(0);
    for (let t = 1; t <= 60; t++) line = meter.take(t * 1000);
    assert.ok(line && line.avg10 > 48 && line.avg10 <= 50, JSON.stringify(line));
    // Only the reader and two tasks: the CPUs are busy, nothing waits.
    writeFileSync(path, loadavg(3));
    for (let t = 61; t <= 90; t++) line = meter.take(t * 1000);
    assert.ok(line && line.avg10 < 3, JSON.stringify(line));
    assert.ok(line && line.avg60 > line.avg10, 'the 60 s average falls slower');
    meter.stop();
  });

  it('the meter is unavailable where the file is missing or not /proc/loadavg', () => {
    assert.equal(new ContentionMeter({ loadavgPath: join(dir, 'nope'), everyMs: 50, cpus: () => 2 }).take(0), undefined);
    const bad = join(dir, 'bad');
    writeFileSync(bad, 'not a loadavg\n');
    assert.equal(new ContentionMeter({ loadavgPath: bad, everyMs: 50, cpus: () => 2 }).take(0), undefined);
  });

  it('a started meter reads between samples: its readings are what take() averages', async () => {
    const path = join(dir, 'loadavg-started');
    writeFileSync(path, loadavg(5)); // 4 runnable on 2 CPUs: all wait
    const meter = new ContentionMeter({ loadavgPath: path, everyMs: 10, cpus: () => 2 }).start();
    try {
      await new Promise((r) => setTimeout(r, 120));
      writeFileSync(path, loadavg(1));
      // The readings taken while the file said 5 are in the first take, whatever it says now.
      const line = meter.take(1000);
      assert.ok(line && line.avg10 > 9, JSON.stringify(line));
    } finally {
      meter.stop();
    }
  });

  it('readings come at uneven intervals around the period, so a periodic load cannot line up with them', () => {
    assert.equal(jitteredDelayMs(200, 0), 100);
    assert.equal(jitteredDelayMs(200, 0.5), 200);
    assert.ok(jitteredDelayMs(200, 0.999) > 299 && jitteredDelayMs(200, 0.999) < 300);
  });

  it('a stopped meter reads no more: its timer does not come back', async () => {
    const path = join(dir, 'loadavg-stopped');
    writeFileSync(path, loadavg(1));
    const meter = new ContentionMeter({ loadavgPath: path, everyMs: 5, cpus: () => 2 }).start();
    await new Promise((r) => setTimeout(r, 30));
    assert.equal(meter.take(1000)?.avg10, 0);
    meter.stop();
    // Busy while stopped, calm again before the take: a meter still reading would average the busy spell in.
    writeFileSync(path, loadavg(5));
    await new Promise((r) => setTimeout(r, 60));
    writeFileSync(path, loadavg(1));
    assert.equal(meter.take(2000)?.avg10, 0);
  });

  it('a node sample carries the contention line beside the kernel PSI, and none where loadavg is missing', () => {
    const proc = join(dir, 'proc');
    cpSync(join(fixtures, 'proc', 'vm-2cpu'), proc, { recursive: true });
    const cgroup = join(fixtures, 'cgroup', 'v2-systemd');
    writeFileSync(join(proc, 'loadavg'), loadavg(5));
    const sampler = new NodeSampler({ procRoot: proc, cgroupRoot: cgroup });
    sampler.read(0, false);
    const s = sampler.read(10_000, false);
    assert.ok(s.pressure?.cpuContention && s.pressure.cpuContention.avg10 > 60, JSON.stringify(s.pressure));
    // The kernel's line is reported as read.
    assert.equal(s.pressure?.available, true);
    rmSync(join(proc, 'loadavg'));
    const without = new NodeSampler({ procRoot: proc, cgroupRoot: cgroup }).read(0, false);
    assert.equal(without.pressure?.cpuContention, null);
  });
});
