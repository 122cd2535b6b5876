// A review decided from older data says so in its reason (issue 32, item 1):
// agents slowed by load shedding send every 10-20 s, and an operator reading
// oversell.io/reason must see that the grant rests on data that old. Past the
// policy's staleAfter the data is stale and the grant is raw, as before.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { decide, DEFAULT_POLICY, type UsageInput } from '../../../gateway/decide/policy.js';
import { UsageWindow } from '../../../lib/usage/usage-window.js';

const GI = 1024 ** 3;
const raw = { cpuMillicores: 7910n, memoryBytes: 16n * BigInt(GI) };

function usage(ageMs: number): UsageInput {
  const points = Array.from({ length: 60 }, (_, i) => ({ timestampMs: (i + 1) * 1000, cpuMillicores: 800, memoryBytes: 2 * GI, cpuPressure: 0, memoryPressure: 0 }));
  return { ageMs, window: UsageWindow.of(points), capacityMemoryBytes: 16 * GI, requests: { cpuMillicores: 6000, memoryBytes: 8 * GI, known: true } };
}

describe('the data\'s age in the reason', () => {
  // staleAfter 40 s (DEFAULT_POLICY).
  const rows: Array<{ ageMs: number; says: RegExp | undefined; inflated: boolean }> = [
    { ageMs: 1000, says: undefined, inflated: true },
    { ageMs: 5000, says: undefined, inflated: true },
    // A steady agent sends every 20 s (summaries): data that old is as fresh as it comes.
    { ageMs: 20_000, says: undefined, inflated: true },
    { ageMs: 25_000, says: undefined, inflated: true },
    { ageMs: 26_000, says: /; usage 26s old; /, inflated: true },
    { ageMs: 39_600, says: /; usage 40s old; /, inflated: true },
    { ageMs: 41_000, says: /; usage data is 41s old \(staleAfter 40s\): no inflation; /, inflated: false },
  ];
  for (const { ageMs, says, inflated } of rows) {
    it(`${ageMs / 1000}s old: ${says ? 'the age named' : 'no age named'}, ${inflated ? 'inflated' : 'raw'}`, () => {
      const d = decide({ raw, usage: usage(ageMs), policy: DEFAULT_POLICY });
      if (says) assert.match(d.reason, says);
      else assert.doesNotMatch(d.reason, /s old/);
      assert.equal(d.cpu.granted > raw.cpuMillicores, inflated, `cpu ${d.cpu.granted}m from raw ${raw.cpuMillicores}m: ${d.reason}`);
      if (!inflated) {
        assert.equal(d.cpu.decidedBy, 'stale');
        assert.equal(d.cpu.applied, raw.cpuMillicores, 'stale: raw, as the kubelet wrote it');
        assert.doesNotMatch(d.reason, /; usage \d+s old/, 'the stale line says the age once');
      }
    });
  }
});
