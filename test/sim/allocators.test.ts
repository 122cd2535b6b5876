import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { decideForNode } from '../../gateway/decide/node-decision.js';
import { UsageWindow } from '../../lib/usage/usage-window.js';
import {
  katalystAllocator, noneAllocator, oversellAllocator, policyEntry, seaiiiAllocator, staticAllocator, type NodeSample, type NodeShape,
} from '../../sim/allocators.js';
import type { Quantities } from '../../sim/scenario.js';

const GiB = 1024 ** 3;
const MiB = 1024 ** 2;
const shape: NodeShape = { raw: { cpu: 8000, memory: 30 * GiB }, capacity: { cpu: 16_000, memory: 32 * GiB }, systemUsage: { cpu: 200, memory: GiB } };
const shapes = [shape];
const sample = (o: Partial<NodeSample>): NodeSample => ({ tMs: 0, cpu: 0, memory: 0, boundCpu: 0, boundMemory: 0, newestPodAgeMs: Infinity, cpuPressure: 0, memoryPressure: 0, serviceCpu: 0, serviceMemory: 0, ...o });
const allocate = (a: { allocate(n: number, s: NodeSample, out: Quantities): void }, s: NodeSample) => {
  const out = { cpu: -1, memory: -1 };
  a.allocate(0, s, out);
  return out;
};

describe('the policies compared', () => {
  it('none keeps raw; static multiplies it', () => {
    assert.deepEqual(allocate(noneAllocator(shapes), sample({ cpu: 1 })), shape.raw);
    assert.deepEqual(allocate(staticAllocator(shapes, { cpu: 1.5, memory: 1.25 }), sample({})), { cpu: 12_000, memory: Math.floor(37.5 * GiB) });
  });

  it('seaiii: capacity - usage above raw, CPU rounded down to whole cores and memory to MiB; raw otherwise', () => {
    assert.deepEqual(allocate(seaiiiAllocator(shapes), sample({ cpu: 5300, memory: 1 * GiB + 1 })), { cpu: 10_000, memory: 31 * GiB - MiB });
    assert.deepEqual(allocate(seaiiiAllocator(shapes), sample({ cpu: 9000, memory: 10 * GiB })), shape.raw);
  });

  it('katalyst: R + (A*T - U)/L on the latest sample, nothing holding it at raw or requests', () => {
    const k = katalystAllocator(shapes, { cpuTarget: 0.6, memoryTarget: 0.8, minLoadFactor: 0.1 });
    // L = 4000/8000 = 0.5: 8000 + (4800 - 4000) / 0.5 = 9600.
    assert.equal(allocate(k, sample({ cpu: 4000, boundCpu: 8000, memory: GiB, boundMemory: GiB })).cpu, 9600);
    // Past target: below bound requests.
    assert.equal(allocate(k, sample({ cpu: 7000, boundCpu: 8000, memory: GiB, boundMemory: GiB })).cpu, 8000 + Math.floor((4800 - 7000) / 0.875));
  });

  it('oversell: the grant is decideForNode on the window the samples built, with the previous grant and bound requests', () => {
    const entry = policyEntry({ name: 'p', spec: { hysteresis: 0 } });
    const a = oversellAllocator(shapes, entry);
    const window = new UsageWindow();
    let previous;
    for (let t = 0; t < 12; t++) {
      const s = sample({ tMs: t * 10_000, cpu: 2000 + 100 * t, memory: 8 * GiB, boundCpu: 6000, boundMemory: 20 * GiB });
      const got = allocate(a, s);
      window.dropThrough(s.tMs - 60_000);
      window.add({ timestampMs: s.tMs, cpuMillicores: s.cpu, memoryBytes: s.memory, cpuPressure: 0, memoryPressure: 0 });
      const bound = { cpuMillicores: 6000, memoryBytes: 20 * GiB };
      const d = decideForNode({
        raw: { cpuMillicores: 8000n, memoryBytes: BigInt(30 * GiB) }, signed: previous, entry, boundRequests: bound,
        usage: { ageMs: 0, window, capacityMemoryBytes: shape.capacity.memory, requests: { ...bound, known: true } },
      });
      previous = { granted: { cpuMillicores: d.cpu.applied, memoryBytes: d.memory.applied }, wouldGrant: undefined };
      assert.deepEqual(got, { cpu: Number(d.cpu.applied), memory: Number(d.memory.applied) }, `step ${t}`);
      assert.ok(got.cpu > shape.raw.cpu, 'usage well under target: inflated');
    }
  });

  it('oversell: a policy capped at 1x grants raw; pressure gives the floor', () => {
    const capped = oversellAllocator(shapes, policyEntry({ name: 'p', spec: { cpu: { maxRatio: 1 }, memory: { maxRatio: 1 } } }));
    const loaded = { cpu: 2000, memory: 4 * GiB, boundCpu: 6000, boundMemory: 10 * GiB };
    assert.deepEqual(allocate(capped, sample(loaded)), shape.raw);
    const p = oversellAllocator(shapes, policyEntry({ name: 'p', spec: {} }));
    assert.ok(allocate(p, sample(loaded)).cpu > shape.raw.cpu);
    const underPressure = allocate(p, sample({ ...loaded, tMs: 10_000, cpuPressure: 90 }));
    assert.equal(underPressure.cpu, shape.raw.cpu + 1, 'CPU pressure: the CPU floor, one millicore above raw (the kubelet keeps writing)');
    assert.ok(underPressure.memory > shape.raw.memory, 'memory is decided on its own');
  });

  it('oversell closes the loop as the gateway does: a pod hurt for lack of memory holds memory at the floor for an hour, CPU untouched', () => {
    const loaded = { cpu: 2000, memory: 4 * GiB, boundCpu: 6000, boundMemory: 10 * GiB };
    const p = oversellAllocator(shapes, policyEntry({ name: 'p', spec: {} }));
    const before = allocate(p, sample(loaded));
    assert.ok(before.memory > shape.raw.memory, 'inflated before any harm');
    p.memoryHarm?.(1, 10_000);
    const spent = allocate(p, sample({ ...loaded, tMs: 20_000 }));
    assert.equal(spent.memory, shape.raw.memory, 'the floor: raw, more than is bound');
    assert.equal(spent.cpu, before.cpu, 'CPU keeps its grant');
    assert.ok(allocate(p, sample({ ...loaded, tMs: 10_000 + 3_600_000 })).memory > shape.raw.memory, 'an hour later: inflated again');
    const other = oversellAllocator(shapes, policyEntry({ name: 'q', spec: { memory: { riskBudget: { enabled: false } } } }));
    other.memoryHarm?.(1, 0);
    assert.ok(allocate(other, sample({ ...loaded, tMs: 10_000 })).memory > shape.raw.memory, 'no budget, none to spend');
  });

  it('oversell weighs CPU over capacity as the gateway does: past 10x the CPU budget of an hour, CPU at the floor', () => {
    const loaded = { cpu: 2000, memory: 4 * GiB, boundCpu: 6000, boundMemory: 10 * GiB };
    const p = oversellAllocator(shapes, policyEntry({ name: 'p', spec: {} }));
    assert.ok(allocate(p, sample(loaded)).cpu > shape.raw.cpu);
    for (let t = 0; t < 360; t++) p.cpuObserved?.(t * 10_000, 10, t < 36 ? 10 : 0);
    const spent = allocate(p, sample({ ...loaded, tMs: 3_600_000 }));
    assert.equal(spent.cpu, shape.raw.cpu, '10 % of the hour over capacity: the floor');
    assert.ok(spent.memory > shape.raw.memory, 'memory keeps its grant');
  });

  it('oversell: no rise while the node\'s newest pod is within the policy\'s startupGrace, as the webhook decides it', () => {
    const loaded = { cpu: 2000, memory: 4 * GiB, boundCpu: 6000, boundMemory: 10 * GiB };
    const p = oversellAllocator(shapes, policyEntry({ name: 'p', spec: {} }));
    assert.deepEqual(allocate(p, sample({ ...loaded, newestPodAgeMs: 10_000 })), { ...shape.raw, cpu: shape.raw.cpu + 1 }, 'no previous grant: the floor (raw: more than is bound), one millicore above raw');
    assert.ok(allocate(p, sample({ ...loaded, tMs: 10_000, newestPodAgeMs: 30_000 })).cpu > shape.raw.cpu, 'past the 30 s grace: inflated');
  });

  it('an invalid OversellPolicy is refused with the parser\'s own message', () => {
    assert.throws(() => policyEntry({ name: 'bad', spec: { cpu: { maxRatio: 0.5 } } }), /OversellPolicy bad: spec\.cpu\.maxRatio must be a number in \[1, \d+\]/);
  });
});
