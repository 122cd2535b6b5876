// Exclusive CPUs (issue 45, item 3): on a node whose kubelet runs the static
// CPU manager, only the shared pool of CPU is inflated, as Katalyst's
// controller does: cap = (raw - exclusive) x ratio + exclusive. What an agent
// reports of its CPU manager can only lower its node's CPU grant.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { decide, DEFAULT_POLICY, exclusiveMillicores, type CpuManagerInput, type DecisionInput, type UsageInput } from '../../../gateway/decide/policy.js';
import { decideForNode } from '../../../gateway/decide/node-decision.js';
import { UsageWindow } from '../../../lib/usage/usage-window.js';
import { NodeStore, usageOf } from '../../../gateway/store/node-store.js';
import type { Sample__Output } from '../../../proto/gen/oversell/v1/Sample.js';
import { storeSample } from '../../helpers/store-sample.js';

const GI = 1024 ** 3;
const raw = { cpuMillicores: 8000n, memoryBytes: 16n * BigInt(GI) };

/** An idle node with 6 cores requested: the headroom is far above the cap, so the cap decides. */
function usage(cpuManager?: CpuManagerInput, cpu = 400): UsageInput {
  const points = Array.from({ length: 60 }, (_, i) => ({ timestampMs: (i + 1) * 1000, cpuMillicores: cpu, memoryBytes: 2 * GI, cpuPressure: 0, memoryPressure: 0 }));
  return { ageMs: 1000, window: UsageWindow.of(points), capacityMemoryBytes: 16 * GI, requests: { cpuMillicores: 6000, memoryBytes: 8 * GI, known: true }, ...(cpuManager && { cpuManager }) };
}
const input = (cpuManager?: CpuManagerInput, over: Partial<DecisionInput> = {}): DecisionInput => ({ raw, usage: usage(cpuManager), policy: DEFAULT_POLICY, ...over });
const stat = (exclusiveCpus: number): CpuManagerInput => ({ policy: 'static', exclusiveCpus });

describe('CPU on a static CPU manager node', () => {
  it('inflates only the shared CPUs: (8000m - 6 exclusive) x 2 + 6000m = 10000m, where an unknown or none node gets 16000m', () => {
    const unknown = decide(input());
    assert.equal(unknown.cpu.applied, 16_000n);
    assert.equal(decide(input({ policy: 'none', exclusiveCpus: 0 })).cpu.applied, 16_000n, 'policy none: as before');
    assert.equal(decide(input(stat(0))).cpu.applied, 16_000n, 'static with nothing held exclusively: as before');
    const d = decide(input(stat(6)));
    assert.equal(d.cpu.decidedBy, 'cap');
    assert.equal(d.cpu.cap, 10_000n);
    assert.equal(d.cpu.applied, 10_000n);
    assert.equal(d.cpu.exclusive, 6000n);
    assert.equal(d.memory.applied, unknown.memory.applied, 'memory is not touched');
    assert.equal(d.memory.exclusive, 0n);
  });

  it('says so in the reason', () => {
    const d = decide(input(stat(6)));
    assert.match(d.reason, /cpu 8000m->10000m \(capped at 2x the shared CPUs while learning \(history.learningMaxRatio\); static CPU manager: 6000m held exclusively is not inflated, only the shared 2000m \(cap 10000m = 2000m x 2 \+ 6000m\)/);
    assert.doesNotMatch(decide(input()).reason, /static CPU manager/);
    assert.doesNotMatch(decide(input(stat(0))).reason, /static CPU manager/);
  });

  it('every CPU held exclusively: no CPU inflation at all; a node cap and the learning cap apply to the shared part the same way', () => {
    assert.equal(decide(input(stat(8))).cpu.applied, 8000n);
    // A per-node cap of 1.5x: (8000 - 4000) x 1.5 + 4000.
    assert.equal(decide(input(stat(4), { nodeMaxRatio: { cpu: 1.5 } })).cpu.applied, 10_000n);
  });

  it('keeps the floor at bound requests within the lower cap', () => {
    // 12 cores bound (trusted, all admitted) on 8 raw with 6 exclusive: the cap is 10000m and bound requests above it hold the floor.
    const d = decide(input(stat(6), { boundRequests: { cpuMillicores: 12_000, memoryBytes: 8 * GI } }));
    assert.equal(d.cpu.floor, 12_000n);
    assert.equal(d.cpu.applied, 12_000n);
    assert.equal(d.cpu.requestsOverCap, true);
  });

  it('goes through decideForNode, the one function the webhook, the status writer and the query API call', () => {
    const d = decideForNode({ raw, usage: usage(stat(6)), entry: { name: 'flags', priority: 0, selector: {}, policy: DEFAULT_POLICY } });
    assert.equal(d.cpu.applied, 10_000n);
  });
});

describe('a lying agent moves only its own node, and only down', () => {
  it('exclusive CPUs are taken within [0, raw]: past raw, NaN, infinite, negative or fractional', () => {
    assert.equal(exclusiveMillicores(stat(9e18), 8000n), 8000n);
    assert.equal(exclusiveMillicores(stat(Infinity), 8000n), 8000n);
    assert.equal(exclusiveMillicores(stat(NaN), 8000n), 0n);
    assert.equal(exclusiveMillicores(stat(-3), 8000n), 0n);
    assert.equal(exclusiveMillicores(stat(2.7), 8000n), 2000n);
    assert.equal(exclusiveMillicores({ policy: 'none', exclusiveCpus: 6 }, 8000n), 0n, 'exclusive CPUs count only under static');
    assert.equal(decide(input(stat(9e18))).cpu.applied, 8000n, 'never below raw');
  });

  it('for any report, raw <= CPU grant <= the grant with no report, and the cap is never above raw x ratio', () => {
    fc.assert(
      fc.property(
        fc.oneof(fc.double({ noNaN: false }), fc.integer({ min: 0, max: 200 })),
        fc.boolean(),
        fc.integer({ min: 1, max: 256_000 }),
        fc.integer({ min: 0, max: 300_000 }),
        fc.integer({ min: 0, max: 100_000 }),
        (exclusiveCpus, isStatic, rawCpu, reqCpu, cpu) => {
          const r = { cpuMillicores: BigInt(rawCpu), memoryBytes: raw.memoryBytes };
          const u = (cm?: CpuManagerInput): UsageInput => ({ ...usage(cm, cpu), requests: { cpuMillicores: reqCpu, memoryBytes: 8 * GI, known: true } });
          const without = decide({ raw: r, usage: u(), policy: DEFAULT_POLICY });
          const d = decide({ raw: r, usage: u({ policy: isStatic ? 'static' : 'none', exclusiveCpus }), policy: DEFAULT_POLICY });
          assert.ok(d.cpu.applied >= r.cpuMillicores, `below raw: ${d.reason}`);
          assert.ok(d.cpu.applied <= without.cpu.applied, `raised: ${d.cpu.applied} > ${without.cpu.applied}`);
          assert.ok(d.cpu.cap <= without.cpu.cap && d.cpu.cap >= r.cpuMillicores);
          assert.equal(d.memory.applied, without.memory.applied);
        },
      ),
      { numRuns: 500 },
    );
  });
});

describe('the store hands the newest sample\'s CPU manager to the decision', () => {
  const sample = (seq: number, cpuManager: Sample__Output['cpuManager']): Sample__Output => ({
    seq, timestampMs: seq * 1000, cpuUsageMillicores: 400, memoryWorkingSetBytes: 2 * GI, rootCgroupMemoryWorkingSetBytes: 0, cpuManager,
    capacity: { cpuMillicores: 8000, memoryBytes: 16 * GI }, pressure: null, requests: { cpuMillicores: 6000, memoryBytes: 8 * GI, podCount: 3, known: true }, summaries: [], onBeat: false, podNamesAsBefore: false, podsIncluded: false, pods: [],
  });

  it('static with its exclusive CPUs, none, and unknown from an agent that sends no field', () => {
    const store = new NodeStore({ retainMs: 60_000, forgetAfterMs: 60_000 });
    store.attach('n', 'i', null, 1);
    storeSample(store, 'n', 1, sample(1, { staticPolicy: true, exclusiveCpus: 6 }), 1000);
    assert.deepEqual(store.usage('n', 1000)?.cpuManager, { policy: 'static', exclusiveCpus: 6 });
    storeSample(store, 'n', 1, sample(2, { staticPolicy: false, exclusiveCpus: 0 }), 2000);
    assert.deepEqual(store.usage('n', 2000)?.cpuManager, { policy: 'none', exclusiveCpus: 0 });
    storeSample(store, 'n', 1, sample(3, null), 3000);
    const record = store.get('n');
    assert.ok(record);
    assert.equal(usageOf(record, 3000)?.cpuManager, undefined);
  });
});
