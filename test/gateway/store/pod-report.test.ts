import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { keepPodReport } from '../../../gateway/store/pod-report.js';
import { packageDefinition } from '../../../proto/load.js';
import type { PodUsage__Output } from '../../../proto/gen/oversell/v1/PodUsage.js';

const pod = (uid: string, cpu: number, memory: number, containers: [string, number, number][] = [['a'.repeat(64), cpu, memory]]): PodUsage__Output => ({
  uid, qosClass: 'burstable', cpuUsageMillicores: cpu, memoryWorkingSetBytes: memory, cpuThrottledMicros: cpu * 10,
  containers: containers.map(([containerId, c, m]) => ({ containerId, cpuUsageMillicores: c, memoryWorkingSetBytes: m })),
});

/** A message's fields as the contract declares them. */
const fieldsOf = (message: string) => ((packageDefinition()[`oversell.v1.${message}`] as { type: { field: { name: string }[] } }).type.field.map((f) => f.name)).sort();

describe('a node\'s pod report kept across reports', () => {
  it('the same pods and containers: the kept objects carry the new figures', () => {
    const kept = [pod('u1', 10, 100), pod('u2', 20, 200)];
    const [first, second] = kept;
    const next = [pod('u1', 11, 101), pod('u2', 22, 202)];
    const out = keepPodReport(kept, next);
    assert.equal(out, kept);
    assert.equal(out[0], first);
    assert.equal(out[1], second);
    assert.deepEqual(out, next, 'every figure is the new report\'s');
  });

  it('different pods, order, QoS class or containers: the new report as it came', () => {
    const kept = () => [pod('u1', 10, 100), pod('u2', 20, 200)];
    const cases: [string, PodUsage__Output[]][] = [
      ['a pod more', [pod('u1', 1, 1), pod('u2', 2, 2), pod('u3', 3, 3)]],
      ['a pod gone', [pod('u1', 1, 1)]],
      ['another order', [pod('u2', 2, 2), pod('u1', 1, 1)]],
      ['another pod', [pod('u1', 1, 1), pod('u9', 2, 2)]],
      ['another QoS class', [pod('u1', 1, 1), { ...pod('u2', 2, 2), qosClass: 'guaranteed' }]],
      ['a container restarted', [pod('u1', 1, 1), pod('u2', 2, 2, [['b'.repeat(64), 2, 2]])]],
      ['a container more', [pod('u1', 1, 1), pod('u2', 2, 2, [['a'.repeat(64), 1, 1], ['b'.repeat(64), 1, 1]])]],
    ];
    for (const [what, next] of cases) {
      const before = kept();
      const snapshot = structuredClone(before);
      assert.equal(keepPodReport(before, next), next, what);
      assert.deepEqual(before, snapshot, `${what}: the kept report untouched`);
    }
  });

  it('nothing kept yet: the new report', () => {
    const next = [pod('u1', 1, 1)];
    assert.equal(keepPodReport([], next), next);
  });

  it('copies every figure the contract has: a field added to PodUsage or ContainerUsage must be kept here too', () => {
    // keepPodReport compares the identity fields and copies the figures; anything else would keep the first report's value forever.
    assert.deepEqual(fieldsOf('PodUsage'), ['containers', 'cpuThrottledMicros', 'cpuUsageMillicores', 'memoryWorkingSetBytes', 'qosClass', 'uid']);
    assert.deepEqual(fieldsOf('ContainerUsage'), ['containerId', 'cpuUsageMillicores', 'memoryWorkingSetBytes']);
  });
});
