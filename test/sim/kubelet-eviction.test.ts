import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { classTier, kubeletEvictionOrder, kubeletMayEvict, oomKillOrder, oomScoreAdj, takeUntil, type MemoryCandidate } from '../../sim/kubelet-eviction.js';
import { DEFAULT_SCENARIO } from '../../sim/scenario.js';

const GiB = 1024 ** 3;
const CAPACITY = 64 * GiB;
const pod = (name: string, usage: number, request: number, priority = 0, qos: MemoryCandidate['qos'] = 'Burstable', order = 0) => ({ name, usage: usage * GiB, request: request * GiB, priority, qos, order });

describe("the kubelet's eviction ranking and the kernel's OOM order", () => {
  it('the kubelet: pods over their requests first, then the lowest priority, then the most above requests', () => {
    const pods = [
      pod('under, priority 0', 1, 2, 0, 'Burstable', 0),
      pod('over by 1, priority 1000', 3, 2, 1000, 'Burstable', 1),
      pod('over by 0.5, priority 0', 2.5, 2, 0, 'Burstable', 2),
      pod('over by 2, priority 0', 4, 2, 0, 'Burstable', 3),
      pod('under by 0.1, priority -10', 1.9, 2, -10, 'Burstable', 4),
      pod('BestEffort, over', 1, 0, 0, 'BestEffort', 5),
    ];
    assert.deepEqual([...pods].sort(kubeletEvictionOrder).map((p) => p.name), [
      'over by 2, priority 0', // the most over its requests among priority 0 over theirs
      'BestEffort, over', // 1 GiB over nothing
      'over by 0.5, priority 0',
      'over by 1, priority 1000', // over, but a higher priority
      'under by 0.1, priority -10', // under its requests: after every pod over, whatever its priority
      'under, priority 0',
    ]);
  });

  it('the kubelet never evicts a pod at system-cluster-critical priority or above', () => {
    assert.deepEqual([0, 1_000_000_000, 1_999_999_999, 2_000_000_000, 2_000_001_000].map((priority) => kubeletMayEvict(pod('p', 1, 1, priority))), [true, true, true, false, false]);
  });

  it('oom_score_adj by QoS: Guaranteed -997, BestEffort 1000, Burstable by its memory request share within [3, 999]', () => {
    const table: [MemoryCandidate['qos'], number, number, number][] = [
      ['Guaranteed', 4, 0, -997],
      ['BestEffort', 0, 0, 1000],
      ['Burstable', 4, 0, 938], // 1000 - floor(1000 x 4 / 64) = 1000 - 62
      ['Burstable', 0.25, 0, 997],
      ['Burstable', 0.001, 0, 999], // 1000 is BestEffort's: one less
      ['Burstable', 64, 0, 3], // never as low as Guaranteed
      ['Burstable', 0.25, 2_000_001_000, -997], // system-node-critical
      ['Burstable', 0.25, 2_000_000_000, 997], // system-cluster-critical: QoS decides
    ];
    for (const [qos, request, priority, adj] of table) assert.equal(oomScoreAdj(qos, request * GiB, CAPACITY, priority), adj, `${qos} requesting ${request} GiB at priority ${priority}`);
  });

  it('the kernel kills the highest badness first: usage plus oom_score_adj thousandths of memory; Guaranteed last', () => {
    const pods = [
      pod('Guaranteed, 8 GiB used', 8, 8, 0, 'Guaranteed', 0),
      pod('Burstable, 1 of 4 GiB', 1, 4, 0, 'Burstable', 1),
      pod('Burstable, 6 of 4 GiB', 6, 4, 0, 'Burstable', 2),
      pod('Burstable, 1 of 0.25 GiB', 1, 0.25, 0, 'Burstable', 3),
      pod('BestEffort, 0.5 GiB', 0.5, 0, 0, 'BestEffort', 4),
    ];
    // Badness in GiB: 6 + 60.032; 1 + 63.808; 0.5 + 64; 1 + 60.032; 8 - 63.808. A Burstable pod far past
    // its request goes before a small BestEffort one; a Burstable pod requesting little is all but BestEffort.
    assert.deepEqual([...pods].sort(oomKillOrder(CAPACITY)).map((p) => p.name), [
      'Burstable, 6 of 4 GiB', 'Burstable, 1 of 0.25 GiB', 'BestEffort, 0.5 GiB', 'Burstable, 1 of 4 GiB', 'Guaranteed, 8 GiB used',
    ]);
  });

  it('takes victims in order until memory is back within the limit, or as many as allowed', () => {
    const ranked = [pod('a', 3, 1), pod('b', 2, 1), pod('c', 5, 1)];
    assert.deepEqual(takeUntil(ranked, 10 * GiB, 6 * GiB).victims.map((p) => p.name), ['a', 'b'], '10 - 3 = 7 is still over 6; - 2 = 5 is within');
    assert.deepEqual(takeUntil(ranked, 10 * GiB, 6 * GiB, 1).victims.map((p) => p.name), ['a'], 'the kubelet: one pod per housekeeping interval');
    assert.deepEqual(takeUntil(ranked, 5 * GiB, 6 * GiB).victims, [], 'within the limit: nobody');
  });

  it("the default scenario's tiers: caches Guaranteed and the system Deployment are protected, the rest not", () => {
    assert.deepEqual(DEFAULT_SCENARIO.classes.map((c) => [c.name, classTier(c).protected]), [
      ['web', false], ['api', false], ['cache', true], ['batch', false], ['etl', false], ['system', true],
    ]);
  });
});
