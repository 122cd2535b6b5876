import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { LoadHistory } from '../../../gateway/decide/load-history.js';
import { decide, DEFAULT_POLICY, type DecisionInput, type Policy, type UsageInput } from '../../../gateway/decide/policy.js';
import { UsageWindow } from '../../../lib/usage/usage-window.js';
import { toPolicyEntry } from '../../../gateway/policies/policy-spec.js';

const GI = 1024 ** 3;
const HOUR = 3_600_000;
const raw = { cpuMillicores: 16_000n, memoryBytes: 64n * 1024n ** 3n };

/** A history of `hours` at the given factors (one record per 10 s), with a `peak` factor for its last `peakSeconds`. */
function history(hours: number, cpu: number, memory: number, peak?: { cpu: number; memory: number; seconds: number }): LoadHistory {
  const h = new LoadHistory(24 * HOUR);
  const n = (hours * HOUR) / 10_000;
  for (let i = 0; i <= n; i++) {
    const atPeak = peak !== undefined && (n - i) * 10 < peak.seconds;
    h.record(i * 10_000, atPeak ? peak.cpu : cpu, atPeak ? peak.memory : memory);
  }
  return h;
}

function usage(h: LoadHistory | undefined, o: { cpu?: number; memory?: number; reqCpu?: number; reqMemory?: number; known?: boolean } = {}): UsageInput {
  const points = Array.from({ length: 60 }, (_, i) => ({ timestampMs: (i + 1) * 1000, cpuMillicores: o.cpu ?? 8000, memoryBytes: o.memory ?? 30 * GI, cpuPressure: 0, memoryPressure: 0 }));
  return {
    ageMs: 1000,
    window: UsageWindow.of(points),
    capacityMemoryBytes: 68 * GI,
    requests: { cpuMillicores: o.reqCpu ?? 20_000, memoryBytes: o.reqMemory ?? 60 * GI, known: o.known ?? true },
    history: h,
  };
}

const input = (u: UsageInput, policy: Policy = DEFAULT_POLICY, over: Partial<DecisionInput> = {}): DecisionInput => ({ raw, usage: u, policy, ...over });

describe('the risk budget', () => {
  it('grants raw x (1 - margin) / the predicted load factor, once the history spans minSpan', () => {
    // CPU at 0.6 of requests, memory at 0.7; now (U / R) 0.4 and 0.5: the history predicts.
    const d = decide(input(usage(history(25, 0.6, 0.7))));
    const lCpu = Math.ceil(0.6 * 128) / 128;
    const lMem = Math.ceil(0.7 * 128) / 128;
    assert.equal(d.cpu.decidedBy, 'budget');
    assert.equal(d.cpu.loadFactor, lCpu);
    assert.equal(d.cpu.granted, BigInt(Math.floor(16_000 / lCpu)));
    assert.equal(d.memory.decidedBy, 'budget');
    assert.equal(d.memory.loadFactor, lMem);
    const mem = Math.floor((64 * GI * 0.95) / lMem / 1024) * 1024;
    assert.equal(d.memory.granted, BigInt(mem));
    assert.match(d.reason, /memory 64GiB->[\d.]+GiB \(risk budget; headroom [\d.]+GiB: predicted peak at 0\.703 of requests 60GiB \(history 25h, largest; max usage now 30GiB\), margin 5%\)/);
  });

  it('before the history spans minSpan, the targets decide and the reason says how much history there is', () => {
    const d = decide(input(usage(history(5, 0.6, 0.55))));
    assert.equal(d.cpu.decidedBy, 'headroom');
    assert.equal(d.cpu.loadFactor, undefined);
    assert.match(d.reason, /the risk budget once the load history spans 24h \(5h so far; until then it may only lower them\)/);
    // The same history is enough for a policy that asks for less.
    const short = decide(input(usage(history(5, 0.6, 0.55)), { ...DEFAULT_POLICY, history: { ...DEFAULT_POLICY.history, minSpanMs: 4 * HOUR, learning: 'Targets' } }));
    assert.equal(short.cpu.decidedBy, 'budget');
  });

  it('with learning Floor, nothing above the floor until the history spans minSpan; then the budget', () => {
    const floorWhileLearning = { ...DEFAULT_POLICY, history: { ...DEFAULT_POLICY.history, minSpanMs: 24 * HOUR, learning: 'Floor' as const } };
    const learning = decide(input(usage(history(5, 0.6, 0.7)), floorWhileLearning));
    assert.equal(learning.cpu.decidedBy, 'learning');
    assert.equal(learning.cpu.granted, 20_000n, 'the floor: bound requests');
    assert.match(learning.reason, /learning the node: floor until its load history spans 24h \(5h so far\)/);
    assert.equal(decide(input(usage(history(25, 0.6, 0.7)), floorWhileLearning)).cpu.decidedBy, 'budget');
    assert.equal(decide(input(usage(history(5, 0.6, 0.7)))).cpu.decidedBy, 'headroom', 'the default learns under the targets');
  });

  it('while learning with the targets, the history so far may lower them, never raise them', () => {
    // The window shows CPU at 0.4 of requests; the 5 h history has seen 0.7.
    const targets = decide(input(usage(undefined)));
    assert.equal(targets.cpu.decidedBy, 'headroom');
    assert.equal(targets.cpu.granted, 24_000n, 'requests + (0.6 x raw - usage) / 0.4');
    const lowered = decide(input(usage(history(5, 0.7, 0.5))));
    const lf = Math.ceil(0.7 * 128) / 128;
    assert.equal(lowered.cpu.decidedBy, 'budget');
    assert.equal(lowered.cpu.loadFactor, lf);
    assert.equal(lowered.cpu.granted, BigInt(Math.floor(20_000 + (16_000 - lf * 20_000) / lf)));
    assert.ok(lowered.cpu.granted < targets.cpu.granted);
    assert.match(lowered.reason, /history 5h, exceeded 0\.1% of the time.*learning: below the targets, which decide until the history spans 24h/);
    // A quieter history than the window does not lift the targets: it has not seen the daily peak.
    const quiet = decide(input(usage(history(5, 0.2, 0.2))));
    assert.equal(quiet.cpu.decidedBy, 'headroom');
    assert.equal(quiet.cpu.granted, targets.cpu.granted);
  });

  it('while learning with the targets, the caps are at most history.learningMaxRatio', () => {
    // Memory's targets ask for 102.4 GiB: past the 1.5x cap, and past the 1.25x learning cap.
    const learning = decide(input(usage(undefined)));
    assert.equal(learning.memory.decidedBy, 'cap');
    assert.equal(learning.memory.granted, 80n * BigInt(GI), '1.25 x 64 GiB');
    assert.match(learning.reason, /memory 64GiB->80GiB \(capped at 1\.25x raw while learning \(history\.learningMaxRatio\)/);
    const wider = { ...DEFAULT_POLICY, history: { ...DEFAULT_POLICY.history, learningMaxRatio: { cpu: 2, memory: 1.4 } } };
    assert.equal(decide(input(usage(undefined), wider)).memory.granted, BigInt(Math.floor((64 * 1.4 * GI) / 1024) * 1024));
    // Without a budget to learn for, nothing is learning: the policy's own cap (1.5x here, below the targets' ask).
    const noBudget = { ...DEFAULT_POLICY, memory: { ...DEFAULT_POLICY.memory, maxRatio: 1.5, riskBudget: { ...DEFAULT_POLICY.memory.riskBudget, enabled: false } } };
    const capped = decide(input(usage(undefined), noBudget));
    assert.equal(capped.memory.granted, 96n * BigInt(GI), '1.5 x 64 GiB');
    assert.match(capped.reason, /memory 64GiB->96GiB \(capped at 1\.5x raw;/);
    // Learning at the floor: the floor, whatever the learning caps.
    const floor = decide(input(usage(undefined), { ...DEFAULT_POLICY, history: { ...DEFAULT_POLICY.history, learning: 'Floor' } }));
    assert.equal(floor.memory.decidedBy, 'learning');
  });

  it('yesterday\'s peak holds the grant down at night: the history, not the last minute, predicts', () => {
    // A day mostly at 0.4, with two hours at 0.7 (the daily peak); now 0.4.
    const h = history(26, 0.4, 0.4, { cpu: 0.7, memory: 0.7, seconds: 2 * 3600 });
    const night = decide(input(usage(h, { cpu: 8000, memory: 24 * GI })));
    assert.ok(night.memory.loadFactor! >= 0.7, `memory predicted at ${night.memory.loadFactor}`);
    const targets = decide(input(usage(h, { cpu: 8000, memory: 24 * GI }), { ...DEFAULT_POLICY, memory: { ...DEFAULT_POLICY.memory, maxRatio: 1.5, riskBudget: { ...DEFAULT_POLICY.memory.riskBudget, enabled: false } } }));
    assert.equal(targets.memory.decidedBy, 'cap', 'the target alone fills the night to the cap');
    assert.ok(night.memory.granted < targets.memory.granted);
  });

  it('a pod bound but not yet running counts at its requests: the grant falls by what its unseen usage might be', () => {
    const h = history(25, 0.6, 0.7);
    const bound = { cpuMillicores: 20_000, memoryBytes: 60 * GI };
    const running = decide(input(usage(h), DEFAULT_POLICY, { boundRequests: { ...bound, admitted: bound } }));
    const waiting = decide(input(usage(h), DEFAULT_POLICY, { boundRequests: { ...bound, admitted: { cpuMillicores: 16_000, memoryBytes: 50 * GI } } }));
    const lMem = Math.ceil(0.7 * 128) / 128;
    // 10 GiB not running: (1/L - 1) x 10 GiB less.
    const expected = 60 * GI + (64 * GI * 0.95 - lMem * 50 * GI - 10 * GI) / lMem;
    assert.equal(waiting.memory.granted, BigInt(Math.floor(expected / 1024)) * 1024n);
    assert.ok(running.memory.granted - waiting.memory.granted > BigInt(4 * GI));
  });

  it('usage above the history now counts at once: the grant falls', () => {
    const h = history(25, 0.45, 0.5);
    const calm = decide(input(usage(h, { memory: 30 * GI })));
    const busy = decide(input(usage(h, { memory: 45 * GI })));
    assert.equal(busy.memory.loadFactor, 0.75);
    assert.ok(busy.memory.granted < calm.memory.granted);
  });

  it('CPU may be exceeded for overShare of the time; memory by default never (its largest factor)', () => {
    // 0.05 % of the time at 0.9: inside CPU's 0.1 %, not inside memory's 0.
    const h = history(25, 0.45, 0.45, { cpu: 0.9, memory: 0.9, seconds: 45 });
    const d = decide(input(usage(h)));
    assert.ok(d.cpu.loadFactor! < 0.5, `cpu ${d.cpu.loadFactor}`);
    assert.ok(d.memory.loadFactor! > 0.89, `memory ${d.memory.loadFactor}`);
  });

  it('the cap still bounds it, and pressure, unknown requests and a disabled budget fall back as before', () => {
    const idle = decide(input(usage(history(25, 0.01, 0.01), { cpu: 100, memory: GI })));
    assert.equal(idle.cpu.decidedBy, 'cap');
    assert.equal(idle.cpu.granted, 64_000n, '4 x 16 cores');
    assert.equal(idle.memory.granted, (BigInt(Math.floor(64 * GI * 3)) / 1024n) * 1024n, '3 x 64 GiB');
    const u = usage(history(25, 0.45, 0.55));
    const pressured: UsageInput = { ...u, summary: undefined, planned: undefined, window: UsageWindow.of(Array.from({ length: 60 }, (_, i) => ({ timestampMs: (i + 1) * 1000, cpuMillicores: 8000, memoryBytes: 30 * GI, cpuPressure: 90, memoryPressure: 0 }))) };
    assert.equal(decide(input(pressured)).cpu.decidedBy, 'pressure');
    const unknown = decide(input(usage(history(25, 0.45, 0.55), { known: false })));
    assert.equal(unknown.cpu.decidedBy, 'floor-raw');
    assert.match(unknown.reason, /the risk budget needs requests/);
  });

  it('an OversellPolicy sets it; out-of-range values are refused with the field named', () => {
    const spec = (s: Record<string, unknown>) => toPolicyEntry({ metadata: { name: 'p' }, spec: { nodeSelector: { matchLabels: { a: 'b' } }, ...s } });
    const ok = spec({ memory: { riskBudget: { margin: 0.25 } }, history: { minSpan: '2h' } });
    assert.equal(ok.policy?.memory.riskBudget.margin, 0.25);
    assert.equal(ok.policy?.memory.riskBudget.enabled, true);
    assert.equal(ok.policy?.history.minSpanMs, 2 * HOUR);
    assert.equal(ok.policy?.history.learning, 'Targets');
    assert.equal(spec({ history: { learning: 'Floor' } }).policy?.history.learning, 'Floor');
    assert.match(spec({ history: { learning: 'Never' } }).error ?? '', /learning must be Targets or Floor/);
    assert.deepEqual(ok.policy?.history.learningMaxRatio, { cpu: 2, memory: 1.25 });
    assert.deepEqual(spec({ history: { learningMaxRatio: { memory: 1.1 } } }).policy?.history.learningMaxRatio, { cpu: 2, memory: 1.1 });
    assert.match(spec({ history: { learningMaxRatio: { memory: 0.9 } } }).error ?? '', /spec\.history\.learningMaxRatio\.memory must be a number in \[1, 10\], got 0\.9/);
    assert.match(spec({ memory: { riskBudget: { overShare: 0.05 } } }).error ?? '', /spec\.memory\.riskBudget\.overShare must be a number in \[0, 0\.01\]/);
    assert.match(spec({ cpu: { riskBudget: { margin: 0.9 } } }).error ?? '', /spec\.cpu\.riskBudget\.margin/);
    assert.match(spec({ cpu: { riskBudget: { enabled: 'yes' } } }).error ?? '', /enabled must be true or false/);
    assert.match(spec({ history: { minSpan: '200h' } }).error ?? '', /minSpan must be at most 168h/);
    assert.match(spec({ memory: { riskBudget: { overShare: 0.001, margin: 0.01 } } }).error ?? '', /needs a margin of at least 0\.05/);
    assert.equal(spec({ memory: { riskBudget: { overShare: 0.001, margin: 0.05 } } }).error, undefined);
    assert.equal(spec({ cpu: { riskBudget: { enabled: false } } }).policy?.cpu.riskBudget.enabled, false);
  });

  it("counts the pods a rise lets in at the pool's typical peak when it is above the node's own, and never grants more for it", () => {
    const lCpu = Math.ceil(0.6 * 128) / 128;
    const alone = decide(input(usage(history(25, 0.6, 0.7))));
    // Requests 20 cores at 0.6, raw 16 cores, CPU margin 0: room for (16000 - 0.6 x 20000) / 0.8 more at the pool's 0.8.
    const d = decide(input(usage(history(25, 0.6, 0.7)), DEFAULT_POLICY, { poolLoad: { cpu: 0.8, memory: 0.5, nodes: 7 } }));
    assert.equal(d.cpu.decidedBy, 'budget');
    assert.equal(d.cpu.loadFactor, lCpu);
    assert.equal(d.cpu.newLoadFactor, 0.8);
    assert.equal(d.cpu.granted, BigInt(Math.floor(20_000 + (16_000 - lCpu * 20_000) / 0.8)));
    assert.ok(d.cpu.granted < alone.cpu.granted);
    assert.match(d.reason, /cpu 16000m->\d+m \(risk budget; headroom \d+m: predicted peak at 0\.602 of requests 20000m \([^)]*\); pods it lets in at the pool's typical peak 0\.800, margin 0%\)/);
    // Memory: the pool's 0.5 is below the node's 0.7; nothing changes.
    assert.equal(d.memory.newLoadFactor, undefined);
    assert.equal(d.memory.granted, alone.memory.granted);
    for (const cpu of [0, 0.3, lCpu, 0.61, 1, 2.5, Infinity, Number.NaN]) {
      const g = decide(input(usage(history(25, 0.6, 0.7)), DEFAULT_POLICY, { poolLoad: { cpu, memory: cpu, nodes: 3 } }));
      assert.ok(g.cpu.granted <= alone.cpu.granted && g.memory.granted <= alone.memory.granted, `pool load ${cpu} raised a grant`);
      assert.ok(g.cpu.granted >= g.cpu.floor, `pool load ${cpu} went below the floor`);
    }
    // While learning (the targets decide), the pool's peak plays no part.
    const learning = decide(input(usage(history(5, 0.6, 0.55)), DEFAULT_POLICY, { poolLoad: { cpu: 0.9, memory: 0.9, nodes: 3 } }));
    assert.equal(learning.cpu.granted, decide(input(usage(history(5, 0.6, 0.55)))).cpu.granted);
  });
});
