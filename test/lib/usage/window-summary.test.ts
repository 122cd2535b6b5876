import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { decide, DEFAULT_POLICY, type Policy } from '../../../gateway/decide/policy.js';
import { UsageWindow } from '../../../lib/usage/usage-window.js';
import { NO_USAGE, summarizeWindow, type WindowSummary } from '../../../lib/usage/window-summary.js';

const GI = 1024 ** 3;
// 120 points a second apart: CPU 1000..120000 millicores, memory 1..120 GiB.
const points = Array.from({ length: 120 }, (_, i) => ({ timestampMs: (i + 1) * 1000, cpuMillicores: (i + 1) * 1000, memoryBytes: (i + 1) * GI, cpuPressure: 0, memoryPressure: 0 }));
const policy = (over: Partial<Policy> = {}): Policy => ({ ...DEFAULT_POLICY, ...over });

describe('summarizeWindow: the window as one policy reads it', () => {
  it("takes the policy's statistics over its window only", () => {
    const s = summarizeWindow(UsageWindow.of(points), policy({ windowMs: 60_000 }), 1024 * GI);
    // Points after 120 s - 60 s: 61..120.
    assert.equal(s.samples, 60);
    assert.equal(s.newestMs, 120_000);
    assert.equal(s.cpuMillicores, 117_000, 'p95 by nearest rank of 61..120 thousand: rank 57 of 60');
    assert.equal(s.memoryBytes, 120 * GI, 'memory: the maximum');
    const avg = summarizeWindow(UsageWindow.of(points), policy({ windowMs: 10_000, cpu: { ...DEFAULT_POLICY.cpu, statistic: 'avg' } }), 1024 * GI);
    assert.equal(avg.samples, 10);
    assert.equal(avg.cpuMillicores, 115_500, 'the mean of 111..120 thousand');
  });

  it('says what its CPU rates cover: from the point before its oldest, else the points\' mean spacing', () => {
    assert.equal(summarizeWindow(UsageWindow.of(points), policy({ windowMs: 10_000 }), GI).spanMs, 10_000, 'points 111..120 s, rates from 110 s');
    // Samples 2 s apart (a gateway shedding samples): 10 points in 20 s.
    const sparse = points.filter((p) => p.timestampMs % 2000 === 0);
    assert.equal(summarizeWindow(UsageWindow.of(sparse), policy({ windowMs: 20_000 }), GI).spanMs, 20_000);
    // The whole window from its first point: 2 s apart from 2 s to 120 s, 60 points over 118 s.
    assert.equal(summarizeWindow(UsageWindow.of(sparse), policy({ windowMs: 600_000 }), GI).spanMs, 120_000);
    assert.equal(summarizeWindow(UsageWindow.of(points.slice(0, 1)), policy(), GI).spanMs, 0, 'one point: unknown');
  });

  it('sees pressure within the calm period before the newest point, and none before it', () => {
    const hotAt = (t: number, field: 'cpuPressure' | 'memoryPressure') => UsageWindow.of(points.map((p) => (p.timestampMs === t ? { ...p, [field]: 95 } : p)));
    const p = policy({ calmPeriodMs: 30_000 });
    assert.equal(summarizeWindow(hotAt(90_000, 'cpuPressure'), p, 1024 * GI).cpuPressure, true, '30 s before the newest: within');
    assert.equal(summarizeWindow(hotAt(89_000, 'cpuPressure'), p, 1024 * GI).cpuPressure, false, '31 s before: calm again');
    const memory = summarizeWindow(hotAt(100_000, 'memoryPressure'), p, 1024 * GI);
    assert.deepEqual([memory.cpuPressure, memory.memoryPressure], [false, true]);
    // A working set at 90 % of capacity is memory pressure without PSI.
    assert.equal(summarizeWindow(UsageWindow.of(points), p, 120 * GI).memoryPressure, true);
    assert.equal(summarizeWindow(UsageWindow.of(points), p, 200 * GI).memoryPressure, false);
  });

  it('of no points is no usage; with no policy, only that there are points', () => {
    assert.equal(summarizeWindow(new UsageWindow(), DEFAULT_POLICY, GI), NO_USAGE);
    const none = summarizeWindow(UsageWindow.of(points), undefined, GI);
    assert.deepEqual(none, { newestMs: 120_000, samples: 0, spanMs: 0, cpuMillicores: 0, memoryBytes: 0, cpuPressure: false, memoryPressure: false });
  });

  it('is all a decision needs of usage: a summary with no window decides', () => {
    const usage = { ageMs: 0, capacityMemoryBytes: 64 * GI, requests: { cpuMillicores: 16_000, memoryBytes: 32 * GI, known: true } };
    const raw = { cpuMillicores: 16_000n, memoryBytes: 64n * BigInt(GI) };
    const quiet: WindowSummary = { newestMs: 60_000, samples: 60, spanMs: 60_000, cpuMillicores: 6000, memoryBytes: 8 * GI, cpuPressure: false, memoryPressure: false };
    const calm = decide({ raw, usage: { ...usage, summary: quiet }, policy: DEFAULT_POLICY });
    assert.equal(calm.cpu.decidedBy, 'headroom');
    assert.equal(calm.cpu.usage, 6000);
    assert.equal(calm.cpu.granted, 25_600n, "16000 + (16000 x 0.6 - 6000) / 0.375");
    assert.match(calm.reason, /60 samples in the 60s window/);
    const hot = decide({ raw, usage: { ...usage, summary: { ...quiet, memoryPressure: true } }, policy: DEFAULT_POLICY });
    assert.equal(hot.memory.decidedBy, 'pressure');
    assert.equal(hot.cpu.decidedBy, 'headroom', 'memory pressure does not hold CPU');
    assert.equal(decide({ raw, usage: { ...usage, summary: NO_USAGE }, policy: DEFAULT_POLICY }).cpu.decidedBy, 'no-data');
  });
});
