// Public traces as the simulator's workload: the fixtures' pods, counted by hand.
import assert from 'node:assert/strict';
import { copyFileSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { publicReplay } from '../../sim/public-replay.js';
import { buildReport, markdown } from '../../sim/report.js';
import { DEFAULT_SCENARIO, type Scenario } from '../../sim/scenario.js';
import { simulate, type PolicyResult, type SimulationResult } from '../../sim/simulate.js';
import { parseTrace, traceHeader, tracePoll, type TraceNode } from '../../sim/trace.js';
import { readPublicTrace } from '../../sim/traces/read.js';
import { recordedAt } from '../../sim/workload.js';

const fixtures = fileURLToPath(new URL('../fixtures/traces/', import.meta.url));
const bitbrains = join(fixtures, 'bitbrains');
const alibaba = join(fixtures, 'alibaba-2018');
const GiB = 1024 ** 3;
const work = mkdtempSync(join(tmpdir(), 'oversell-public-replay-'));
after(() => rmSync(work, { recursive: true, force: true }));

const byName = (r: SimulationResult, name: string): PolicyResult => r.policies.find((p) => p.name === name)!;
const run = async (format: 'bitbrains' | 'alibaba-2018', path: string, s: Partial<Scenario>, demand: 'scenario' | 'saturating' = 'scenario') => {
  const pw = await readPublicTrace(format, path, format === 'alibaba-2018' ? { machineMemoryBytes: 96 * GiB } : {});
  const replay = publicReplay(pw, { ...DEFAULT_SCENARIO, hours: pw.durationSeconds / 3600, ...s });
  return { replay, result: simulate(replay.scenario, undefined, undefined, { demand, publicTrace: replay }) };
};

describe('public traces as the workload', () => {
  it('Bitbrains: each VM is a pod with its provisioned size as request and its recorded usage on the run\'s grid', async () => {
    const { replay } = await run('bitbrains', bitbrains, { nodes: 2 });
    const profiles = replay.workload.trace!.profiles;
    // 4.csv provisions no memory and is skipped: VMs 1, 2 and 3.
    assert.deepEqual(profiles.map((p) => [p.requestCpu, p.requestMemory / GiB]), [[2000, 4], [4000, 64], [1000, 2]]);
    const vm1 = profiles[0]!.recorded!;
    // 300 s samples on 10 s steps: 30 steps a cell. VM 1 used 1300 MHz of 2600 MHz per core, then 2600.
    assert.equal(vm1.stepsPerCell, 30);
    assert.deepEqual([recordedAt(vm1.cpu, vm1, 29), recordedAt(vm1.cpu, vm1, 30)], [500, 1000]);
    assert.deepEqual([recordedAt(vm1.memory, vm1, 29), recordedAt(vm1.memory, vm1, 30)], [1 * GiB, 2 * GiB]);
    // VM 3 starts 600 s after the others and its last sample (1800 s) holds 300 s.
    assert.deepEqual([profiles[2]!.recorded!.startStep, profiles[2]!.recorded!.endStep], [60, 210]);
    assert.equal(replay.shapes.length, 2);
    assert.deepEqual(replay.scenario.classes.map((c) => c.requests.cpu), [1000, 2000, 4000], 'one class per request shape');
  });

  it('Bitbrains, the trace\'s own demand: pods arrive at their start and leave at their end; a VM larger than the node waits', async () => {
    const { result } = await run('bitbrains', bitbrains, { nodes: 2 });
    const none = byName(result, 'none');
    // VM 1 runs all 300 steps, VM 3 steps 60-209; VM 2 (64 GiB) never fits a node's 61.9 GiB of raw allocatable: (300 + 150) / 300.
    assert.equal(none.podsPlaced, 1.5);
    assert.equal(none.series.placed[0], 1);
    assert.equal(none.series.placed[30], 2, 'step 60: VM 3 has arrived');
    assert.equal(none.series.placed[105], 1, 'step 210: VM 3 has left');
    // Under static 1.5x, VM 2 fits from step 0 to its end at step 240: (300 + 150 + 240) / 300.
    assert.equal(byName(result, 'static').podsPlaced, 2.3);
    assert.deepEqual(result.trace && 'format' in result.trace && [result.trace.format, result.trace.pods, result.trace.requestsKnown], ['bitbrains', 3, true]);
  });

  it('Bitbrains, saturating: copies of the running VMs fill the nodes by requests under none; the limit never overloads', async () => {
    const { result } = await run('bitbrains', bitbrains, { nodes: 2 }, 'saturating');
    const none = byName(result, 'none');
    // 15.5 cores of raw allocatable a node: 7 copies of VM 1 (2 cores) each, then VM 3 (1 core) one each while it runs (steps 60-209).
    assert.equal(none.series.placed[0], 14);
    assert.equal(none.series.placed[30], 16);
    assert.equal(none.series.placed[120], 14, 'step 240: the copies of VM 3 left with it');
    assert.equal(none.podsPlaced, 15);
    const limit = byName(result, 'limit');
    assert.ok(limit.podsPlaced > none.podsPlaced, `the limit places ${limit.podsPlaced}, none ${none.podsPlaced}`);
    assert.deepEqual([limit.cpuOverCapacityNodeSeconds, limit.memoryOverloadNodeSeconds, limit.podsHitByMemoryOverload], [0, 0, 0]);
  });

  it('Alibaba: containers on the trace\'s machines with their capacity; the limit never overloads, and a limit no better than none is no reference', async () => {
    const { replay, result } = await run('alibaba-2018', alibaba, {});
    assert.deepEqual(replay.shapes.map((s) => [s.capacity.cpu, s.capacity.memory / GiB]), [[96_000, 96], [64_000, 48]]);
    // c_1 and c_2 (c_3 requests no CPU, c_9 has no meta) run from 10 s to 40 s: steps 1-3 of 4.
    assert.equal(byName(result, 'none').podsPlaced, 1.5);
    // m_1 used 20 % of 96 cores at 1010 s; c_1 used 50 % of its 4 cores of that: 19.2 - 2 cores stay on m_1 as recorded load.
    assert.equal(replay.baseline!.cpu[1 * 2 + 0], 19_200 - 2000);
    const sat = (await run('alibaba-2018', alibaba, {}, 'saturating')).result;
    const limit = byName(sat, 'limit');
    assert.deepEqual([limit.cpuOverCapacityNodeSeconds, limit.memoryOverloadNodeSeconds, limit.podsHitByMemoryOverload], [0, 0, 0]);
    // Copies use up to 150 % of their CPU request: none packs by requests into overload, the limit does not.
    assert.ok(byName(sat, 'none').cpuOverCapacityNodeSeconds > 0);
    assert.ok(limit.podsPlaced < byName(sat, 'none').podsPlaced);
    for (const p of sat.policies) assert.equal(p.gainCaptured, null, `${p.name}: the reference degenerates`);
    assert.match(markdown(buildReport(sat, undefined), false, 'x'), /capturing no share: the limit places no more than none, so the reference degenerates/);
  });

  it('Alibaba without container files: requests unknown, so no density, no share of the limit, no targets, and the page says so', async () => {
    const dir = join(work, 'machines-only');
    mkdirSync(dir);
    copyFileSync(join(alibaba, 'machine_meta.csv'), join(dir, 'machine_meta.csv'));
    copyFileSync(join(alibaba, 'machine_usage.csv'), join(dir, 'machine_usage.csv'));
    const { result } = await run('alibaba-2018', dir, {});
    assert.equal(result.trace && 'format' in result.trace && result.trace.requestsKnown, false);
    for (const p of result.policies) assert.deepEqual([p.name, p.densityVsNone, p.gainCaptured], [p.name, null, null]);
    const report = buildReport(result, undefined);
    assert.deepEqual(report.checks, []);
    const page = markdown(report, false, 'x');
    assert.match(page, /\*\*Requests are unknown: this trace does not say what its pods request, so the policies are not compared on it/);
    assert.doesNotMatch(page, /Against the targets|of the limit's gain over none/);
  });

  it('oversell record replays: a recorded rise of requests that does not fit is the recording\'s, not the policy\'s risk', () => {
    const node = (cpuRequests: number): TraceNode => ({
      name: 'a', capacity: { cpu: 16_000, memory: 64 * GiB }, raw: { cpu: 15_500, memory: 62 * GiB }, usage: { cpu: 1000, memory: 8 * GiB }, requests: { cpu: cpuRequests, memory: 0 },
    });
    const trace = parseTrace(traceHeader(10) + [{ t: 0, nodes: [node(1000)] }, { t: 10, nodes: [node(20_000)] }].map(tracePoll).join(''));
    const r = simulate({ ...DEFAULT_SCENARIO, hours: 0.02 }, undefined, trace);
    const none = byName(r, 'none');
    assert.equal(none.belowRequestsNodeSeconds, 0, 'none never published less than what it placed');
    assert.ok(none.recorded!.requestRisesNotFitting > 0, 'the rise is counted as a recorded fact');
  });
});
