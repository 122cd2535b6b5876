import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { decide, DEFAULT_POLICY, headroom, type DecisionInput, type Policy, type UsageInput } from '../gateway/decide/policy.js';
import { summarize, windowStart, windowStatistic, type Statistic } from '../lib/usage/usage-stats.js';
import { UsageWindow, type WindowPoint } from '../lib/usage/usage-window.js';
import { summarizeWindow } from '../lib/usage/window-summary.js';
import { planId } from '../lib/usage/summary-plan.js';

// The obvious implementations, as oracles for the copy-free ones the policy uses.
function lastWindow(points: readonly WindowPoint[], windowMs: number): readonly WindowPoint[] {
  const newest = points[points.length - 1]?.timestampMs;
  return newest === undefined ? points : points.filter((p) => p.timestampMs > newest - windowMs);
}
function statistic(values: number[], which: Statistic): number {
  if (values.length === 0) return 0;
  if (which === 'max') return Math.max(...values);
  if (which === 'avg') return values.reduce((a, b) => a + b, 0) / values.length;
  const sorted = [...values].sort((a, b) => a - b);
  const rank = Math.ceil((Number(which.slice(1)) / 100) * sorted.length);
  return sorted[Math.min(sorted.length, Math.max(1, rank)) - 1]!;
}

const GI = 1024 ** 3;
const raw = { cpuMillicores: 7910n, memoryBytes: 3778260n * 1024n };

/** 60 one-second points of constant usage, newest at t = 60 s. */
function points(cpu: number, memory: number, extra: Partial<WindowPoint> = {}, n = 60): WindowPoint[] {
  return Array.from({ length: n }, (_, i) => ({ timestampMs: (i + 1) * 1000, cpuMillicores: cpu, memoryBytes: memory, cpuPressure: 0, memoryPressure: 0, ...extra }));
}

function usage(
  over: { cpu?: number; mem?: number; ageMs?: number; reqCpu?: number; reqMem?: number; known?: boolean; pts?: WindowPoint[] } = {},
): UsageInput {
  return {
    ageMs: over.ageMs ?? 1000,
    window: UsageWindow.of(over.pts ?? points(over.cpu ?? 800, over.mem ?? 1 * GI)),
    capacityMemoryBytes: 4 * GI,
    requests: { cpuMillicores: over.reqCpu ?? 6000, memoryBytes: over.reqMem ?? 3 * GI, known: over.known ?? true },
  };
}

const input = (u: UsageInput | undefined, over: Partial<DecisionInput> = {}): DecisionInput => ({ raw, usage: u, policy: DEFAULT_POLICY, ...over });

describe('decide', () => {
  it('applies the Katalyst headroom formula when it is below the cap', () => {
    // A=7910, R=6000, U=3000: L = 0.5, headroom = 6000 + (4746 - 3000)/0.5 = 9492
    const d = decide(input(usage({ cpu: 3000 })));
    assert.equal(d.cpu.decidedBy, 'headroom');
    assert.equal(d.cpu.granted, 9492n);
    assert.equal(d.cpu.applied, 9492n);
    assert.equal(headroom(7910, 6000, 3000, DEFAULT_POLICY.cpu), 9492);
  });

  it('caps at raw * maxRatio (cpu 4x, memory 3x by default; cpu 2x, memory 1.25x while learning)', () => {
    const d = decide(input(usage({ cpu: 100, mem: 100 * 1024 ** 2 })));
    assert.equal(d.cpu.decidedBy, 'cap');
    assert.equal(d.cpu.granted, 15820n);
    assert.equal(d.memory.decidedBy, 'cap');
    assert.equal(d.memory.granted, 4722825n * 1024n); // 1.25 * 3778260Ki exactly: no load history yet
    assert.match(d.reason, /cpu 7910m->15820m \(capped at 2x raw/);
    assert.match(d.reason, /^policy flags; /);
    const learnt = { ...DEFAULT_POLICY, history: { ...DEFAULT_POLICY.history, learningMaxRatio: { cpu: 2, memory: 1.5 } } };
    assert.equal(decide(input(usage({ cpu: 100, mem: 100 * 1024 ** 2 }), { policy: learnt })).memory.granted, 5667390n * 1024n); // 1.5 * 3778260Ki exactly
  });

  it('never goes below raw allocatable when the node is busy (cpu one unit above it, so the kubelet keeps writing)', () => {
    const d = decide(input(usage({ cpu: 7500, mem: 3.4 * GI })));
    assert.equal(d.cpu.granted, raw.cpuMillicores + 1n);
    assert.equal(d.cpu.decidedBy, 'floor-raw');
    assert.equal(d.memory.granted, raw.memoryBytes);
  });

  it('holds the floor at bound requests only up to the cap: a report above it is flagged, never granted', () => {
    // The agent says 20 cores are bound on a 7.91-core node capped at 2x: the floor stops at the cap.
    const d = decide(input(usage({ cpu: 7900, reqCpu: 20000 })));
    assert.equal(d.cpu.cap, 15820n);
    assert.equal(d.cpu.granted, 15820n);
    assert.equal(d.cpu.decidedBy, 'floor-requests');
    assert.equal(d.cpu.requestsOverCap, true);
    assert.equal(d.memory.requestsOverCap, false);
    assert.match(d.reason, /floor at the cap: bound requests reported above it/);
    // An agent reporting 9e18 millicores with CPU pressure gets nothing past the cap either.
    const wild = decide(input(usage({ cpu: 100, reqCpu: 9e18 })));
    assert.equal(wild.cpu.granted, 15820n);
    assert.equal(wild.cpu.requestsOverCap, true);
  });

  it('requests from the API server (the gateway\'s own pod watch) hold the floor even above the cap, and replace the agent\'s', () => {
    // 20 cores really bound on a 7.91-core node capped at 2x: a kubelet restart must re-admit them all.
    const d = decide(input(usage({ cpu: 7900, reqCpu: 100 }), { boundRequests: { cpuMillicores: 20000, memoryBytes: 1 * GI } }));
    assert.equal(d.cpu.granted, 20000n);
    assert.equal(d.cpu.decidedBy, 'floor-requests');
    assert.equal(d.cpu.requestsOverCap, true);
    assert.match(d.reason, /floor at bound requests, above the cap/);
    // The agent claims 9e18 millicores, the API server knows of 3 cores: the agent's number is not used at all.
    const lying = decide(input(usage({ cpu: 7900, reqCpu: 9e18 }), { boundRequests: { cpuMillicores: 3000, memoryBytes: 1 * GI } }));
    assert.equal(lying.cpu.requestsOverCap, false);
    assert.ok(lying.cpu.granted <= lying.cpu.cap);
    assert.match(lying.reason, /requests 3000m/);
    // Stale data keeps the API server's floor too.
    const stale = decide(input(usage({ ageMs: 41_000 }), { boundRequests: { cpuMillicores: 20000, memoryBytes: 1 * GI } }));
    assert.equal(stale.cpu.applied, 20000n);
  });

  it('past the cap only pods the kubelet has admitted count: a pod created with spec.nodeName and huge requests lifts the floor to the cap, no further', () => {
    // 20 cores bound on a 7.91-core node capped at 2x (15.82 cores), of which the kubelet has admitted 4.
    const claim = decide(input(usage({ cpu: 7900, reqCpu: 100 }), { boundRequests: { cpuMillicores: 20000, memoryBytes: 1 * GI, admitted: { cpuMillicores: 4000, memoryBytes: 1 * GI } } }));
    assert.equal(claim.cpu.granted, 15820n, 'the floor stops at the cap');
    assert.equal(claim.cpu.requestsOverCap, true, 'still reported');
    assert.match(claim.reason, /floor at the cap: the requests bound above it include pods the kubelet has not admitted/);
    // Once the kubelet has admitted them (a container status, or running), they hold the floor above the cap.
    const admitted = decide(input(usage({ cpu: 7900, reqCpu: 100 }), { boundRequests: { cpuMillicores: 20000, memoryBytes: 1 * GI, admitted: { cpuMillicores: 20000, memoryBytes: 1 * GI } } }));
    assert.equal(admitted.cpu.granted, 20000n);
    assert.match(admitted.reason, /floor at bound requests, above the cap/);
    // Under the cap, a bound pod counts from its binding whether admitted or not.
    const under = decide(input(usage({ cpu: 7900, reqCpu: 100 }), { boundRequests: { cpuMillicores: 12000, memoryBytes: 1 * GI, admitted: { cpuMillicores: 0, memoryBytes: 0 } } }));
    assert.equal(under.cpu.granted, 12000n);
  });

  it('moves one unit off a value to avoid, down within the floor, else up within the cap, else not at all', () => {
    const base = input(usage({ cpu: 100, mem: 100 * 1024 ** 2 }));
    const capped = decide(base);
    assert.equal(capped.cpu.applied, 15820n);
    const down = decide({ ...base, avoid: { cpuMillicores: 15820n } });
    assert.equal(down.cpu.applied, 15819n);
    assert.equal(down.cpu.granted, 15819n);
    assert.equal(down.cpu.avoided, 15820n);
    assert.match(down.reason, /moved off 15820m/);
    // At the floor (a busy node: raw, nothing bound above it) it cannot go down: up by one unit, within the cap;
    // raw itself is avoided too, so a value to avoid one unit above raw moves up, not down onto raw.
    const idle = input(usage({ cpu: 7900, reqCpu: 100 }));
    const atFloor = decide(idle);
    assert.equal(atFloor.cpu.applied, 7911n);
    assert.equal(decide({ ...idle, avoid: { cpuMillicores: 7911n } }).cpu.applied, 7912n);
    // Memory moves by its unit, 1Ki.
    const mem = decide({ ...base, avoid: { memoryBytes: capped.memory.applied } });
    assert.equal(mem.memory.applied, capped.memory.applied - 1024n);
  });

  it('never goes below the requests already bound while they are under the cap', () => {
    const d = decide(input(usage({ cpu: 7900, reqCpu: 12000 })));
    assert.equal(d.cpu.granted, 12000n);
    assert.equal(d.cpu.decidedBy, 'floor-requests');
    assert.equal(d.cpu.requestsOverCap, false);
  });

  it('does not inflate on stale data, but keeps the floor at bound requests', () => {
    const d = decide(input(usage({ ageMs: 41_000, cpu: 100, reqCpu: 9000 })));
    assert.equal(d.cpu.decidedBy, 'stale');
    assert.equal(d.cpu.granted, 9000n);
    assert.equal(d.memory.decidedBy, 'stale');
    assert.equal(d.memory.granted, raw.memoryBytes);
    assert.match(d.reason, /41s old \(staleAfter 40s\)/);
  });

  it('exactly at the staleness limit, data is still fresh, and the reason agrees', () => {
    const edge = decide(input(usage({ ageMs: 40_000, cpu: 100 })));
    assert.equal(edge.cpu.decidedBy, 'cap');
    assert.doesNotMatch(edge.reason, /staleAfter/);
    assert.match(decide(input(usage({ ageMs: 40_001, cpu: 100 }))).reason, /staleAfter 40s\): no inflation/);
  });

  it('reports no-data and keeps raw when there is no usage', () => {
    const d = decide(input(undefined));
    assert.equal(d.cpu.decidedBy, 'no-data');
    assert.equal(d.cpu.granted, raw.cpuMillicores);
    assert.equal(d.memory.granted, raw.memoryBytes);
    assert.match(d.reason, /no usage data/);
  });

  it('without a policy: no inflation (the cap is raw, so bound requests above raw are flagged), and the reason says so', () => {
    const d = decide(input(usage({ cpu: 100, reqCpu: 9000 }), { policy: undefined }));
    assert.equal(d.cpu.decidedBy, 'no-policy');
    assert.equal(d.cpu.applied, raw.cpuMillicores);
    assert.equal(d.cpu.requestsOverCap, true);
    assert.equal(d.memory.applied, raw.memoryBytes);
    assert.match(d.reason, /no valid OversellPolicy selects this node/);
  });

  it('with unknown requests, does not use them as a floor and grants no more than raw', () => {
    const d = decide(input(usage({ cpu: 100, known: false, reqCpu: 99999 })));
    assert.equal(d.cpu.granted, raw.cpuMillicores + 1n); // R taken as 0: A*T - U < A; one unit above raw
    assert.equal(d.cpu.floor, raw.cpuMillicores);
    assert.match(d.reason, /requests unknown/);
  });

  it('rounds memory down to whole KiB so the API server keeps our string', () => {
    // raw 1024007 B; 1.25x (the learning cap) = 1280008.75 B -> 1250 KiB exactly
    const d = decide({ raw: { cpuMillicores: 1000n, memoryBytes: 1000n * 1024n + 7n }, usage: usage({ mem: 1, reqMem: 900 * 1024 }), policy: DEFAULT_POLICY });
    assert.equal(d.memory.decidedBy, 'cap');
    assert.equal(d.memory.granted, 1250n * 1024n);
  });

  it('uses the policy statistic: p95 ignores one spike, max does not', () => {
    const spiky = points(500, 1 * GI);
    spiky[30] = { ...spiky[30]!, cpuMillicores: 7000 };
    const p95 = decide(input(usage({ pts: spiky, reqCpu: 6000 })));
    const max = decide(input(usage({ pts: spiky, reqCpu: 6000 }), { policy: { ...DEFAULT_POLICY, cpu: { ...DEFAULT_POLICY.cpu, statistic: 'max' } } }));
    assert.equal(p95.cpu.usage, 500);
    assert.equal(max.cpu.usage, 7000);
    assert.ok(max.cpu.granted < p95.cpu.granted);
    assert.match(max.reason, /from max usage 7000m/);
  });

  it('uses only the policy window of the history', () => {
    const history = [...points(7000, 1 * GI, {}, 30), ...points(500, 1 * GI, {}, 30).map((p) => ({ ...p, timestampMs: p.timestampMs + 30_000 }))];
    const d = decide(input(usage({ pts: history }), { policy: { ...DEFAULT_POLICY, windowMs: 20_000 } }));
    assert.equal(d.cpu.usage, 500);
    assert.match(d.reason, /20 samples in the 20s window/);
  });

  it('explains every resource in the reason', () => {
    const d = decide(input(usage()));
    assert.match(d.reason, /cpu 7910m->\d+m \(/);
    assert.match(d.reason, /memory [\d.]+GiB->[\d.]+GiB/);
    assert.match(d.reason, /p95 usage 800m, requests 6000m, target 60%/);
    assert.match(d.reason, /60 samples in the 60s window$/);
  });
});

describe('decide: pressure', () => {
  it('cpu PSI at the threshold drops cpu to the floor at once; memory is unaffected', () => {
    const pts = points(300, 1 * GI);
    pts[59] = { ...pts[59]!, cpuPressure: 40 };
    const d = decide(input(usage({ pts })));
    assert.equal(d.cpu.decidedBy, 'pressure');
    assert.equal(d.cpu.granted, raw.cpuMillicores + 1n);
    assert.equal(d.memory.decidedBy, 'cap');
  });

  it('memory PSI or working set over the threshold drops memory to the floor', () => {
    const psi = points(300, 1 * GI);
    psi[59] = { ...psi[59]!, memoryPressure: 10 };
    assert.equal(decide(input(usage({ pts: psi }))).memory.decidedBy, 'pressure');
    const full = points(300, 3.7 * GI); // 0.925 of 4Gi capacity >= 0.9
    assert.equal(decide(input(usage({ pts: full, reqMem: 0 }))).memory.decidedBy, 'pressure');
  });

  it('under pressure, pods being deleted do not hold the floor up (their replacements get no room); calm, they do', () => {
    const full = points(300, 3.7 * GI); // memory working set past the threshold: pressure
    // 5 GiB bound on a 3.6 GiB-raw node (oversold), 1 GiB of it on its way out (evicted, terminating).
    const bound = { cpuMillicores: 3000, memoryBytes: 5 * GI, leaving: { cpuMillicores: 0, memoryBytes: 1 * GI } };
    const hot = decide(input(usage({ pts: full, reqMem: 0 }), { boundRequests: bound }));
    assert.equal(hot.memory.decidedBy, 'pressure');
    assert.equal(hot.memory.applied, 4n * BigInt(GI), 'the floor is what stays bound: 5 GiB less the 1 GiB leaving');
    const hotRaw = decide(input(usage({ pts: full, reqMem: 0 }), { boundRequests: { ...bound, leaving: { cpuMillicores: 0, memoryBytes: 4.5 * GI } } }));
    assert.equal(hotRaw.memory.applied, raw.memoryBytes, 'never under raw');
    const calmNode = decide(input(usage({ mem: 1 * GI }), { boundRequests: bound }));
    assert.ok(calmNode.memory.applied >= 5n * BigInt(GI), 'calm: every bound pod holds the floor, the leaving ones too');
    const noneLeaving = decide(input(usage({ pts: full, reqMem: 0 }), { boundRequests: { cpuMillicores: 3000, memoryBytes: 5 * GI } }));
    assert.equal(noneLeaving.memory.applied, 5n * BigInt(GI));
  });

  it('the closed loop: harm for lack of memory in the pool spends its memory budget; memory stays at the floor until an hour without one, CPU is untouched, the reason says so', () => {
    const calm = input(usage({ mem: 1 * GI }));
    const free = decide(calm);
    assert.ok(free.memory.granted > raw.memoryBytes, 'inflated without harm');
    const spent = decide({ ...calm, poolHarm: { memoryOverloads: 2, untilMs: Date.parse('2026-12-05T07:00:00Z') } });
    assert.equal(spent.memory.granted, raw.memoryBytes, 'memory: nothing above the floor');
    assert.equal(spent.cpu.granted, free.cpu.granted, 'cpu: its own budget, untouched');
    assert.match(spent.reason, /the pool's risk budget is spent: 2 pod\(s\) evicted by the kubelet or OOM-killed for lack of memory on its nodes in the last hour, so no memory above the floor until an hour without one \(2026-12-05T07:00:00.000Z if none comes\)/);
    const off = { ...DEFAULT_POLICY, memory: { ...DEFAULT_POLICY.memory, riskBudget: { ...DEFAULT_POLICY.memory.riskBudget, enabled: false } } };
    assert.ok(decide({ ...calm, policy: off, poolHarm: { memoryOverloads: 2, untilMs: 0 } }).memory.granted > raw.memoryBytes, 'a policy without a memory risk budget has none to spend');
    const bound = decide({ ...calm, boundRequests: { cpuMillicores: 100, memoryBytes: 5 * GI }, poolHarm: { memoryOverloads: 1, untilMs: 0 } });
    assert.equal(bound.memory.granted, 5n * BigInt(GI), 'never below what is bound');
  });

  it('stays at the floor for the calm period after pressure, then rises again', () => {
    const pts = points(300, 1 * GI, {}, 120).map((p) => ({ ...p, cpuPressure: p.timestampMs === 30_000 ? 80 : 0 }));
    // newest point at 120 s; pressure at 30 s; calm period 60 s -> calm since 90 s ago: inflated
    assert.equal(decide(input(usage({ pts }))).cpu.decidedBy, 'cap');
    // calm period 100 s: pressure at 30 s is still within it
    const d = decide(input(usage({ pts }), { policy: { ...DEFAULT_POLICY, calmPeriodMs: 100_000 } }));
    assert.equal(d.cpu.decidedBy, 'pressure');
    assert.match(d.reason, /pressure: floor until calm/);
  });
});

describe('decide: hysteresis, DryRun, per-node caps', () => {
  it('holds back a rise within the hysteresis fraction', () => {
    // fresh grant 9492m (see the formula test); previous 9100m: +4.3% < 5%
    const held = decide(input(usage({ cpu: 3000 }), { previous: { cpuMillicores: 9100n } }));
    assert.equal(held.cpu.granted, 9100n);
    assert.equal(held.cpu.decidedBy, 'hysteresis');
    // previous 9000m: +5.5% > 5%: the rise goes through
    assert.equal(decide(input(usage({ cpu: 3000 }), { previous: { cpuMillicores: 9000n } })).cpu.granted, 9492n);
  });

  it('holds any rise while a pod bound less than startupGrace ago may not show its usage yet', () => {
    // The bound requests (6000m) include a pod bound 10 s ago whose usage is not in the window yet: headroom says 9492m.
    const bound = (newestPodAgeMs: number) => ({ boundRequests: { cpuMillicores: 6000, memoryBytes: 3 * GI, newestPodAgeMs } });
    const held = decide(input(usage({ cpu: 3000 }), { previous: { cpuMillicores: 8000n }, ...bound(10_000) }));
    assert.equal(held.cpu.granted, 8000n, 'held at the previous grant, though the rise is well past hysteresis');
    assert.equal(held.cpu.decidedBy, 'starting');
    assert.match(held.reason, /cpu 7910m->8000m \(held: a pod bound 10s ago may not show its usage yet \(startupGrace 30s\)/);
    // With no previous grant it holds at the floor.
    const first = decide(input(usage({ cpu: 3000 }), bound(10_000)));
    assert.deepEqual([first.cpu.granted, first.cpu.decidedBy], [7911n, 'starting']);
    // Once the newest pod is older than the grace, the rise goes through; with startupGrace 0 it always does.
    assert.equal(decide(input(usage({ cpu: 3000 }), { previous: { cpuMillicores: 8000n }, ...bound(30_000) })).cpu.granted, 9492n);
    assert.equal(decide(input(usage({ cpu: 3000 }), { previous: { cpuMillicores: 8000n }, policy: { ...DEFAULT_POLICY, startupGraceMs: 0 }, ...bound(0) })).cpu.granted, 9492n);
    // Never a fall: a grant above today's headroom still drops.
    const fall = decide(input(usage({ cpu: 3000 }), { previous: { cpuMillicores: 9600n }, ...bound(1_000) }));
    assert.deepEqual([fall.cpu.granted, fall.cpu.decidedBy], [9492n, 'headroom']);
  });

  it('never delays a fall', () => {
    const d = decide(input(usage({ cpu: 3000 }), { previous: { cpuMillicores: 9600n } }));
    assert.equal(d.cpu.granted, 9492n);
    assert.equal(d.cpu.decidedBy, 'headroom');
  });

  it('a held value is still clamped into today\'s bounds', () => {
    const d = decide(input(usage({ cpu: 3000 }), { previous: { cpuMillicores: 9100n }, nodeMaxRatio: { cpu: 1.1 } }));
    assert.equal(d.cpu.granted, 8701n); // cap 7910 * 1.1
    assert.equal(d.cpu.decidedBy, 'cap');
  });

  it('DryRun: the grant is computed and reported, allocatable stays at the floor', () => {
    const policy: Policy = { ...DEFAULT_POLICY, name: 'pool-a', mode: 'DryRun' };
    const d = decide(input(usage({ cpu: 100 }), { policy }));
    assert.equal(d.dryRun, true);
    assert.equal(d.cpu.granted, 15820n);
    assert.equal(d.cpu.applied, raw.cpuMillicores);
    assert.match(d.reason, /^policy pool-a \(DryRun: allocatable not changed\)/);
  });

  it('a per-node annotation lowers the cap but cannot raise it above the policy', () => {
    assert.equal(decide(input(usage({ cpu: 100 }), { nodeMaxRatio: { cpu: 1.5 } })).cpu.granted, 11865n);
    assert.equal(decide(input(usage({ cpu: 100 }), { nodeMaxRatio: { cpu: 5 } })).cpu.granted, 15820n);
  });
});

describe('decide: never exactly raw while a policy decides, so the kubelet keeps writing', () => {
  // A stored allocatable equal to what the kubelet computes stops its status
  // writes until nodeStatusReportFrequency (5 min): a rise would wait for that.
  const busy = usage({ cpu: 7500, mem: 3.4 * GI });

  it('a grant at raw is written one millicore above it, memory left exact; the reason says why', () => {
    const d = decide(input(busy));
    assert.deepEqual([d.cpu.applied, d.cpu.avoided, d.memory.applied, d.memory.avoided], [7911n, 7910n, raw.memoryBytes, undefined]);
    assert.match(d.reason, /cpu 7910m->7911m \(floor at raw \(no headroom above raw\); one unit above raw, so the kubelet keeps writing/);
  });

  it('a rise within hysteresis of a grant at raw is held one unit above raw, not at raw', () => {
    // The e2e case: the previous grant was raw, the new one 3.7% above it (6000 + (4746 - 3470) / (3470 / 6000) = 8206m).
    const rise = usage({ cpu: 3470 });
    assert.equal(decide(input(rise)).cpu.granted, 8206n);
    const d = decide(input(rise, { previous: { cpuMillicores: 7910n } }));
    assert.equal(d.cpu.decidedBy, 'hysteresis');
    assert.equal(d.cpu.applied, 7911n);
    // And the grant held there is held there again, never back onto raw.
    assert.equal(decide(input(rise, { previous: { cpuMillicores: 7911n } })).cpu.applied, 7911n);
  });

  it('with cpu capped at 1x, memory moves one KiB above raw instead', () => {
    const d = decide(input(busy, { nodeMaxRatio: { cpu: 1 } }));
    assert.deepEqual([d.cpu.applied, d.memory.applied, d.memory.avoided], [raw.cpuMillicores, raw.memoryBytes + 1024n, raw.memoryBytes]);
    // Both capped at 1x: raw, nothing to move within.
    const both = decide(input(busy, { nodeMaxRatio: { cpu: 1, memory: 1 } }));
    assert.deepEqual([both.cpu.applied, both.memory.applied], [raw.cpuMillicores, raw.memoryBytes]);
  });

  it('exactly raw where no policy decides from fresh data: DryRun, stale, no data, no policy', () => {
    const exact = (d: ReturnType<typeof decide>) => [d.cpu.applied, d.memory.applied, d.cpu.avoided, d.memory.avoided];
    const want = [raw.cpuMillicores, raw.memoryBytes, undefined, undefined];
    assert.deepEqual(exact(decide(input(busy, { policy: { ...DEFAULT_POLICY, mode: 'DryRun' } }))), want, 'DryRun');
    assert.deepEqual(exact(decide(input(usage({ ageMs: 41_000, cpu: 7500 })))), want, 'stale');
    assert.deepEqual(exact(decide(input(undefined))), want, 'no data');
    assert.deepEqual(exact(decide(input(busy, { policy: undefined }))), want, 'no policy');
  });
});

describe('decide: properties over random inputs', () => {
  // Mostly real sizes, sometimes up to int64: the cap must never pass what a quantity holds.
  const arbRaw = fc.record({
    cpuMillicores: fc.oneof({ weight: 9, arbitrary: fc.bigInt({ min: 1n, max: 512_000n }) }, { weight: 1, arbitrary: fc.bigInt({ min: 1n, max: 2n ** 63n - 1n }) }),
    memoryBytes: fc.oneof({ weight: 9, arbitrary: fc.bigInt({ min: 1024n, max: 4n * 1024n ** 4n }) }, { weight: 1, arbitrary: fc.bigInt({ min: 1024n, max: 2n ** 63n - 1n }) }),
  });
  // Bound requests as an agent reports them, hostile ones included.
  const arbRequested = (max: number) => fc.oneof(
    { weight: 8, arbitrary: fc.integer({ min: 0, max }) },
    { weight: 2, arbitrary: fc.constantFrom(9e18, 1e300, Infinity, NaN, -1, -Infinity, Number.MAX_VALUE) },
  );
  const arbPoints = fc.array(
    fc.record({
      cpuMillicores: fc.integer({ min: 0, max: 1_000_000 }),
      memoryBytes: fc.integer({ min: 0, max: 2 ** 43 }),
      cpuPressure: fc.oneof(fc.constant(0), fc.double({ min: 0, max: 100, noNaN: true })),
      memoryPressure: fc.oneof(fc.constant(0), fc.double({ min: 0, max: 100, noNaN: true })),
    }),
    { minLength: 1, maxLength: 40 },
  ).map((ps) => ps.map((p, i) => ({ ...p, timestampMs: (i + 1) * 1000 })));
  const arbUsage = fc.record({
    ageMs: fc.integer({ min: 0, max: 120_000 }),
    window: arbPoints.map((ps) => UsageWindow.of(ps)),
    capacityMemoryBytes: fc.integer({ min: 0, max: 2 ** 43 }),
    requests: fc.record({
      cpuMillicores: arbRequested(1_000_000),
      memoryBytes: arbRequested(2 ** 43),
      known: fc.boolean(),
    }),
    // Any history a store could hold, and some it could not (a quantile of NaN or of nothing).
    history: fc.option(
      fc.record({ spanMs: fc.integer({ min: 0, max: 3 * 86_400_000 }), cpu: fc.double({ min: 0, max: 10 }), memory: fc.double({ min: 0, max: 10 }) })
        .map((h) => ({ spanMs: () => h.spanMs, quantile: (r: 'cpu' | 'memory') => h[r] })),
      { nil: undefined },
    ),
  });
  const arbResource = fc.record({
    maxRatio: fc.double({ min: 1, max: 10, noNaN: true }),
    targetUtilization: fc.double({ min: 0.05, max: 1, noNaN: true }),
    minLoadFactor: fc.double({ min: 0.01, max: 1, noNaN: true }),
    statistic: fc.constantFrom('p50', 'p90', 'p95', 'p99', 'max', 'avg' as const),
    pressureThreshold: fc.double({ min: 1, max: 100, noNaN: true }),
    riskBudget: fc.record({ enabled: fc.boolean(), overShare: fc.double({ min: 0, max: 0.1, noNaN: true }), margin: fc.double({ min: 0, max: 0.5, noNaN: true }) }),
  });
  const arbPolicy: fc.Arbitrary<Policy> = fc.record({
    name: fc.constant('p'),
    mode: fc.constantFrom('Enforce', 'DryRun' as const),
    cpu: arbResource,
    memory: arbResource.map((r) => ({ ...r, workingSetThreshold: 0.9 })),
    windowMs: fc.integer({ min: 1000, max: 60_000 }),
    staleAfterMs: fc.integer({ min: 1000, max: 60_000 }),
    calmPeriodMs: fc.integer({ min: 0, max: 60_000 }),
    hysteresis: fc.double({ min: 0, max: 0.5, noNaN: true }),
    startupGraceMs: fc.integer({ min: 0, max: 60_000 }),
    history: fc.record({
      minSpanMs: fc.integer({ min: 0, max: 2 * 86_400_000 }),
      learning: fc.constantFrom('Targets', 'Floor' as const),
      learningMaxRatio: fc.record({ cpu: fc.double({ min: 1, max: 10, noNaN: true }), memory: fc.double({ min: 1, max: 10, noNaN: true }) }),
    }),
    protect: fc.constant(DEFAULT_POLICY.protect),
    relief: fc.constant(DEFAULT_POLICY.relief),
  });
  const arbPrevious = fc.option(fc.record({ cpuMillicores: fc.bigInt({ min: 0n, max: 2_000_000n }), memoryBytes: fc.bigInt({ min: 0n, max: 2n ** 44n }) }), { nil: undefined });
  const arbNodeMax = fc.option(fc.record({ cpu: fc.double({ min: 1, max: 10, noNaN: true }) }), { nil: undefined });
  // From the gateway's own watch: sums of real pods, so finite and non-negative; sometimes far above the cap.
  // Part of it admitted by the kubelet (a share of each sum), or all of it (admitted absent).
  const arbBound = fc.option(
    fc.record({
      cpuMillicores: fc.integer({ min: 0, max: 4_000_000 }), memoryBytes: fc.integer({ min: 0, max: 2 ** 45 }),
      newestPodAgeMs: fc.oneof(fc.integer({ min: 0, max: 120_000 }), fc.constant(Infinity)),
      admittedShare: fc.option(fc.double({ min: 0, max: 1, noNaN: true }), { nil: undefined }),
    }).map(({ admittedShare, ...b }) => ({
      ...b,
      ...(admittedShare !== undefined && { admitted: { cpuMillicores: Math.floor(b.cpuMillicores * admittedShare), memoryBytes: Math.floor(b.memoryBytes * admittedShare) } }),
    })),
    { nil: undefined },
  );
  const arbInput = fc.record({ raw: arbRaw, usage: arbUsage, policy: fc.option(arbPolicy, { nil: undefined }), previous: arbPrevious, nodeMaxRatio: arbNodeMax, boundRequests: arbBound }).map(
    (r) => ({
      raw: r.raw, usage: r.usage, policy: r.policy, ...(r.previous && { previous: r.previous }), ...(r.nodeMaxRatio && { nodeMaxRatio: r.nodeMaxRatio }),
      ...(r.boundRequests && { boundRequests: r.boundRequests }),
    }) as DecisionInput,
  );

  it('applied and granted stay within [max(raw, min(B, cap), Ba), max(raw, cap, Ba)] for requests B from the API server (Ba: the kubelet admitted them), and within [max(raw, min(R, cap)), max(raw, cap)] for an agent\'s R: no report and no unadmitted pod lifts a grant past the cap', () => {
    fc.assert(
      fc.property(arbInput, (i) => {
        const d = decide(i);
        const u = i.usage!;
        const asBound = (n: number) => (!(n > 0) ? 0n : Number.isFinite(n) ? BigInt(Math.ceil(n)) : 2n ** 64n);
        const b = i.boundRequests;
        for (const [res, rawV, req, trusted, admitted] of [
          [d.cpu, i.raw.cpuMillicores, asBound(u.requests.cpuMillicores), b && BigInt(b.cpuMillicores), b && BigInt(b.admitted?.cpuMillicores ?? b.cpuMillicores)],
          [d.memory, i.raw.memoryBytes, asBound(u.requests.memoryBytes), b && BigInt(b.memoryBytes), b && BigInt(b.admitted?.memoryBytes ?? b.memoryBytes)],
        ] as const) {
          const bound = trusted ?? (u.requests.known ? req : 0n);
          const capOrRaw = res.cap > rawV ? res.cap : rawV;
          assert.ok(res.cap <= 2n ** 63n - 1n, `cap ${res.cap} beyond int64`);
          const ceiling = admitted !== undefined && admitted > capOrRaw ? admitted : capOrRaw;
          const clamped = bound < capOrRaw ? bound : capOrRaw;
          const floorOf = rawV > clamped ? rawV : clamped;
          const floor = admitted !== undefined && admitted > floorOf ? admitted : floorOf;
          for (const v of [res.granted, res.applied]) {
            assert.ok(v >= floor, `${v} < floor ${floor} (${res.decidedBy})`);
            assert.ok(v <= ceiling, `${v} > ceiling ${ceiling} (${res.decidedBy})`);
          }
          assert.equal(res.requestsOverCap, bound > res.cap);
          const policyCap = i.policy ? (rawV * BigInt(Math.round(Math.max(1, i.policy.cpu.maxRatio, i.policy.memory.maxRatio) * 1e6))) / 1_000_000n : rawV;
          assert.ok(res.cap <= (policyCap > rawV ? policyCap : rawV));
          if (i.policy?.mode !== 'Enforce') assert.equal(res.applied, res.floor);
        }
      }),
      { numRuns: 3000 },
    );
  });

  it('more usage never yields a larger grant', () => {
    fc.assert(
      fc.property(arbInput, fc.integer({ min: 0, max: 500_000 }), fc.integer({ min: 0, max: 2 ** 40 }), (i, dc, dm) => {
        const more: DecisionInput = {
          ...i,
          usage: { ...i.usage!, summary: undefined, planned: undefined, window: UsageWindow.of(i.usage!.window!.points().map((p) => ({ ...p, cpuMillicores: p.cpuMillicores + dc, memoryBytes: p.memoryBytes + dm }))) },
        };
        const a = decide(i);
        const b = decide(more);
        assert.ok(b.cpu.granted <= a.cpu.granted, `cpu ${a.cpu.granted} -> ${b.cpu.granted} when usage rose`);
        assert.ok(b.memory.granted <= a.memory.granted, `memory ${a.memory.granted} -> ${b.memory.granted} when usage rose`);
      }),
      { numRuns: 3000 },
    );
  });

  it('stale data, pressure and a missing policy never inflate above the floor', () => {
    fc.assert(
      fc.property(arbInput, (i) => {
        const stale = i.policy ? decide({ ...i, usage: { ...i.usage!, ageMs: i.policy.staleAfterMs + 1 } }) : decide(i);
        for (const d of [stale, decide({ ...i, policy: undefined })]) {
          assert.equal(d.cpu.granted, d.cpu.floor);
          assert.equal(d.memory.granted, d.memory.floor);
        }
      }),
      { numRuns: 1000 },
    );
  });

  it('decides from a summary of the window (window-summary.ts) exactly as from the window itself: an agent that sends the summary moves its node as its samples would', () => {
    fc.assert(
      fc.property(arbInput, (i) => {
        const u = i.usage!;
        const fromSummary = decide({ ...i, usage: { ...u, window: undefined, agentSummaries: undefined, planned: undefined, summary: summarizeWindow(u.window!, i.policy, u.capacityMemoryBytes) } });
        const fromWindow = decide(i);
        assert.deepEqual(fromSummary.cpu, fromWindow.cpu);
        assert.deepEqual(fromSummary.memory, fromWindow.memory);
        assert.equal(fromSummary.reason, fromWindow.reason);
      }),
      { numRuns: 1000 },
    );
  });

  it('decides from the summary made under its policy\'s plan among others (another replica\'s view) exactly as from the window; without that plan, as with no usage', () => {
    const other = { ...DEFAULT_POLICY, windowMs: DEFAULT_POLICY.windowMs + 60_000 };
    fc.assert(
      fc.property(arbInput, (i) => {
        const u = i.usage!;
        const policy = i.policy ?? DEFAULT_POLICY;
        const planned = [
          { planId: planId(other), summary: summarizeWindow(u.window!, other, u.capacityMemoryBytes) },
          { planId: planId(policy), summary: summarizeWindow(u.window!, policy, u.capacityMemoryBytes) },
        ];
        const facts = { ...u, window: undefined, agentSummaries: undefined, summary: undefined };
        const fromPlanned = decide({ ...i, policy, usage: { ...facts, planned } });
        const fromWindow = decide({ ...i, policy });
        assert.deepEqual(fromPlanned.cpu, fromWindow.cpu);
        assert.deepEqual(fromPlanned.memory, fromWindow.memory);
        assert.equal(fromPlanned.reason, fromWindow.reason);
        const withoutPlan = decide({ ...i, policy, usage: { ...facts, planned: planned.slice(0, 1) } });
        assert.equal(withoutPlan.cpu.decidedBy, 'no-data');
      }),
      { numRuns: 500 },
    );
  });

  it('is deterministic: same input, same output and reason', () => {
    fc.assert(
      fc.property(arbInput, (i) => {
        assert.deepEqual(decide(i), decide(i));
        assert.equal(decide(i).reason, decide(i).reason);
      }),
      { numRuns: 300 },
    );
  });

  it('the reason, built when first read, is the one of decision time even if the input changed since', () => {
    fc.assert(
      fc.property(arbInput, fc.integer({ min: 0, max: 120_000 }), (i, laterAgeMs) => {
        const expected = decide(i).reason;
        const u = i.usage && { ...i.usage, requests: { ...i.usage.requests } };
        const nodeMax = i.nodeMaxRatio && { ...i.nodeMaxRatio };
        const d = decide({ ...i, usage: u, nodeMaxRatio: nodeMax });
        if (u) {
          u.ageMs = laterAgeMs;
          u.requests.cpuMillicores += 1000;
          u.requests.known = !u.requests.known;
        }
        if (nodeMax) nodeMax.cpu = 1;
        assert.equal(d.reason, expected);
      }),
      { numRuns: 300 },
    );
  });

  it('the window statistic without copies equals the statistic of the window', () => {
    fc.assert(
      fc.property(arbPoints, fc.integer({ min: 1000, max: 60_000 }), fc.constantFrom('p50', 'p90', 'p95', 'p99', 'max', 'avg' as const), (pts, windowMs, which) => {
        const window = UsageWindow.of(pts);
        const from = windowStart(window, windowMs);
        assert.equal(from, pts.length - lastWindow(pts, windowMs).length);
        for (const field of ['cpuMillicores', 'memoryBytes'] as const) {
          assert.equal(windowStatistic(window, from, field, which), statistic(lastWindow(pts, windowMs).map((p) => p[field]), which));
        }
      }),
      { numRuns: 2000 },
    );
  });
});

describe('usage statistics', () => {
  const pt = (timestampMs: number, cpuMillicores: number, memoryBytes = 100): WindowPoint => ({ timestampMs, cpuMillicores, memoryBytes, cpuPressure: 0, memoryPressure: 0 });
  const windowOf = (points: WindowPoint[]) => UsageWindow.of(points);
  const empty = new UsageWindow();

  it('p95 ignores a single spike in a 60-sample window', () => {
    const w = windowOf(Array.from({ length: 60 }, (_, i) => pt(i * 1000, i === 30 ? 8000 : 500)));
    assert.equal(summarize(w).cpuP95Millicores, 500);
  });

  it('p95 follows sustained load (more than 5% of the window)', () => {
    const w = windowOf(Array.from({ length: 60 }, (_, i) => pt(i * 1000, i < 10 ? 4000 : 500)));
    assert.equal(summarize(w).cpuP95Millicores, 4000);
  });

  it('memory takes the peak of the window', () => {
    const s = summarize(windowOf([100, 900, 300].map((m, i) => pt(i, 0, m))));
    assert.equal(s.memoryMaxBytes, 900);
    assert.equal(s.samples, 3);
    assert.equal(s.spanMs, 2);
  });

  it('percentiles use nearest rank; every named statistic is covered', () => {
    const v = windowOf([1, 2, 3, 4, 5, 6, 7, 8, 9, 10].map((m, i) => pt(i, m)));
    assert.equal(windowStatistic(v, 0, 'cpuMillicores', 'p95'), 10);
    assert.equal(windowStatistic(v, 0, 'cpuMillicores', 'p50'), 5);
    assert.equal(windowStatistic(empty, 0, 'cpuMillicores', 'p95'), 0);
    assert.deepEqual(['p50', 'p90', 'p95', 'p99', 'max', 'avg'].map((s) => windowStatistic(v, 0, 'cpuMillicores', s as Statistic)), [5, 9, 10, 10, 10, 5.5]);
  });

  it('the window starts after the newest point minus its length', () => {
    const w = windowOf([pt(1000, 1), pt(2000, 2), pt(3000, 3), pt(4000, 4)]);
    assert.equal(windowStart(w, 2000), 2);
    assert.equal(windowStart(empty, 2000), 0);
    assert.deepEqual(summarize(w, windowStart(w, 2000)), { samples: 2, spanMs: 1000, cpuP95Millicores: 4, memoryMaxBytes: 100 });
  });
});
