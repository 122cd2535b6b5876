import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { decide, DEFAULT_POLICY, headroom, type UsageInput } from '../gateway/decide/policy.js';
import { percentile, summarize } from '../gateway/decide/usage-stats.js';

const GI = 1024n ** 3n;
const raw = { cpuMillicores: 7910n, memoryBytes: 3778260n * 1024n };

function usage(over: Partial<UsageInput> & { reqCpu?: number; reqMem?: number; known?: boolean } = {}): UsageInput {
  return {
    ageMs: 1000,
    samples: 60,
    spanMs: 59_000,
    cpuMillicores: 800,
    memoryBytes: 1 * 1024 ** 3,
    ...over,
    requests: { cpuMillicores: over.reqCpu ?? 6000, memoryBytes: over.reqMem ?? 3 * 1024 ** 3, known: over.known ?? true },
  };
}

describe('decide', () => {
  it('applies the Katalyst headroom formula when it is below the cap', () => {
    // A=7910, R=6000, U=3000: L = 0.5, headroom = 6000 + (4746 - 3000)/0.5 = 9492
    const d = decide(raw, usage({ cpuMillicores: 3000 }), DEFAULT_POLICY);
    assert.equal(d.cpu.bound, 'headroom');
    assert.equal(d.cpu.granted, 9492n);
    assert.equal(headroom(7910, 6000, 3000, DEFAULT_POLICY.cpu), 9492);
  });

  it('caps at raw * maxRatio (cpu 2x, memory 1.25x by default)', () => {
    const d = decide(raw, usage({ cpuMillicores: 100, memoryBytes: 100 * 1024 ** 2 }), DEFAULT_POLICY);
    assert.equal(d.cpu.bound, 'cap');
    assert.equal(d.cpu.granted, 15820n);
    assert.equal(d.memory.bound, 'cap');
    // 1.25 * 3778260Ki = 4722825Ki exactly
    assert.equal(d.memory.granted, 4722825n * 1024n);
    assert.match(d.reason, /cpu 7910m->15820m \(capped at 2x raw/);
  });

  it('never goes below raw allocatable when the node is busy', () => {
    const d = decide(raw, usage({ cpuMillicores: 7500, memoryBytes: Number(3n * GI) }), DEFAULT_POLICY);
    assert.equal(d.cpu.granted, raw.cpuMillicores);
    assert.equal(d.cpu.bound, 'floor-raw');
    assert.equal(d.memory.granted, raw.memoryBytes);
  });

  it('never goes below the requests already bound, even above the cap', () => {
    const d = decide(raw, usage({ cpuMillicores: 7900, reqCpu: 20000 }), DEFAULT_POLICY);
    assert.equal(d.cpu.granted, 20000n);
    assert.equal(d.cpu.bound, 'floor-requests');
  });

  it('does not inflate on stale data, but keeps the floor at bound requests', () => {
    const stale = usage({ ageMs: 41_000, cpuMillicores: 100, reqCpu: 9000 });
    const d = decide(raw, stale, DEFAULT_POLICY);
    assert.equal(d.cpu.bound, 'stale');
    assert.equal(d.cpu.granted, 9000n);
    assert.equal(d.memory.bound, 'stale');
    assert.equal(d.memory.granted, raw.memoryBytes);
    assert.match(d.reason, /41s old \(staleAfter 40s\)/);
  });

  it('is exactly at the staleness limit still fresh', () => {
    const d = decide(raw, usage({ ageMs: 40_000, cpuMillicores: 100 }), DEFAULT_POLICY);
    assert.equal(d.cpu.bound, 'cap');
  });

  it('reports no-data and keeps raw when there is no usage', () => {
    const d = decide(raw, undefined, DEFAULT_POLICY);
    assert.equal(d.cpu.bound, 'no-data');
    assert.equal(d.cpu.granted, raw.cpuMillicores);
    assert.equal(d.memory.granted, raw.memoryBytes);
    assert.match(d.reason, /no usage data/);
  });

  it('with unknown requests, does not use them as a floor and grants no more than raw*target headroom', () => {
    const d = decide(raw, usage({ cpuMillicores: 100, known: false, reqCpu: 99999 }), DEFAULT_POLICY);
    // R treated as 0: headroom = A*T - U = 4646 < raw
    assert.equal(d.cpu.granted, raw.cpuMillicores);
    assert.equal(d.cpu.floor, raw.cpuMillicores);
    assert.match(d.reason, /requests unknown/);
  });

  it('rounds memory down to whole KiB so the API server keeps our string', () => {
    // raw 1024007 B; 1.25x = 1280008.75 B -> 1250 KiB exactly
    const d = decide({ cpuMillicores: 1000n, memoryBytes: 1000n * 1024n + 7n }, usage({ memoryBytes: 1, reqMem: 900 * 1024 }), DEFAULT_POLICY);
    assert.equal(d.memory.bound, 'cap');
    assert.equal(d.memory.granted, 1250n * 1024n);
  });

  it('explains every resource in the reason', () => {
    const d = decide(raw, usage(), DEFAULT_POLICY);
    assert.match(d.reason, /^cpu 7910m->\d+m \(/);
    assert.match(d.reason, /memory [\d.]+GiB->[\d.]+GiB/);
    assert.match(d.reason, /p95 usage 800m, requests 6000m, target 60%/);
    assert.match(d.reason, /window 60 samples over 59s$/);
  });
});

describe('decide: properties over random inputs', () => {
  const arbRaw = fc.record({
    cpuMillicores: fc.bigInt({ min: 1n, max: 512_000n }),
    memoryBytes: fc.bigInt({ min: 1024n, max: 4n * 1024n ** 4n }),
  });
  const arbUsage = fc.record({
    ageMs: fc.integer({ min: 0, max: 120_000 }),
    samples: fc.integer({ min: 1, max: 60 }),
    spanMs: fc.constant(59_000),
    cpuMillicores: fc.integer({ min: 0, max: 1_000_000 }),
    memoryBytes: fc.integer({ min: 0, max: 2 ** 43 }),
    requests: fc.record({
      cpuMillicores: fc.integer({ min: 0, max: 1_000_000 }),
      memoryBytes: fc.integer({ min: 0, max: 2 ** 43 }),
      known: fc.boolean(),
    }),
  });
  const arbPolicy = fc.record({
    cpu: fc.record({ maxRatio: fc.double({ min: 1, max: 10, noNaN: true }), targetUtilization: fc.double({ min: 0.05, max: 1, noNaN: true }), minLoadFactor: fc.double({ min: 0.01, max: 1, noNaN: true }) }),
    memory: fc.record({ maxRatio: fc.double({ min: 1, max: 10, noNaN: true }), targetUtilization: fc.double({ min: 0.05, max: 1, noNaN: true }), minLoadFactor: fc.double({ min: 0.01, max: 1, noNaN: true }) }),
    staleAfterMs: fc.integer({ min: 1000, max: 60_000 }),
  });

  it('granted is never below max(raw, bound requests) nor above max(cap, bound requests)', () => {
    fc.assert(
      fc.property(arbRaw, arbUsage, arbPolicy, (r, u, p) => {
        const d = decide(r, u, p);
        for (const [res, rawV, req] of [
          [d.cpu, r.cpuMillicores, BigInt(u.requests.cpuMillicores)],
          [d.memory, r.memoryBytes, BigInt(u.requests.memoryBytes)],
        ] as const) {
          const bound = u.requests.known ? req : 0n;
          const floor = rawV > bound ? rawV : bound;
          assert.ok(res.granted >= floor, `granted ${res.granted} < floor ${floor}`);
          const ceiling = res.cap > floor ? res.cap : floor;
          assert.ok(res.granted <= ceiling, `granted ${res.granted} > ceiling ${ceiling}`);
          assert.ok(res.cap >= rawV);
        }
      }),
      { numRuns: 3000 },
    );
  });

  it('more usage never yields a larger grant', () => {
    fc.assert(
      fc.property(arbRaw, arbUsage, arbPolicy, fc.integer({ min: 0, max: 500_000 }), fc.integer({ min: 0, max: 2 ** 40 }), (r, u, p, dc, dm) => {
        const more = { ...u, cpuMillicores: u.cpuMillicores + dc, memoryBytes: u.memoryBytes + dm };
        const a = decide(r, u, p);
        const b = decide(r, more, p);
        assert.ok(b.cpu.granted <= a.cpu.granted, `cpu ${a.cpu.granted} -> ${b.cpu.granted} when usage rose`);
        assert.ok(b.memory.granted <= a.memory.granted, `memory ${a.memory.granted} -> ${b.memory.granted} when usage rose`);
      }),
      { numRuns: 3000 },
    );
  });

  it('stale data never inflates above the floor', () => {
    fc.assert(
      fc.property(arbRaw, arbUsage, arbPolicy, (r, u, p) => {
        const d = decide(r, { ...u, ageMs: p.staleAfterMs + 1 }, p);
        assert.equal(d.cpu.granted, d.cpu.floor);
        assert.equal(d.memory.granted, d.memory.floor);
      }),
      { numRuns: 1000 },
    );
  });

  it('is deterministic: same input, same output and reason', () => {
    fc.assert(
      fc.property(arbRaw, arbUsage, arbPolicy, (r, u, p) => {
        assert.deepEqual(decide(r, u, p), decide(r, u, p));
      }),
      { numRuns: 300 },
    );
  });
});

describe('usage statistics', () => {
  it('p95 ignores a single spike in a 60-sample window', () => {
    const w = Array.from({ length: 60 }, (_, i) => ({ timestampMs: i * 1000, cpuMillicores: i === 30 ? 8000 : 500, memoryBytes: 100 }));
    assert.equal(summarize(w).cpuP95Millicores, 500);
  });

  it('p95 follows sustained load (more than 5% of the window)', () => {
    const w = Array.from({ length: 60 }, (_, i) => ({ timestampMs: i * 1000, cpuMillicores: i < 10 ? 4000 : 500, memoryBytes: 100 }));
    assert.equal(summarize(w).cpuP95Millicores, 4000);
  });

  it('memory takes the peak of the window', () => {
    const w = [100, 900, 300].map((m, i) => ({ timestampMs: i, cpuMillicores: 0, memoryBytes: m }));
    const s = summarize(w);
    assert.equal(s.memoryMaxBytes, 900);
    assert.equal(s.samples, 3);
    assert.equal(s.spanMs, 2);
  });

  it('percentile uses nearest rank', () => {
    assert.equal(percentile([1, 2, 3, 4, 5, 6, 7, 8, 9, 10], 95), 10);
    assert.equal(percentile([1, 2, 3, 4, 5, 6, 7, 8, 9, 10], 50), 5);
    assert.equal(percentile([], 95), 0);
    assert.equal(percentile([7], 95), 7);
  });
});
