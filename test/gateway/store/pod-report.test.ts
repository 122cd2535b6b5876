import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { keepPodReport, NO_PODS_KEY, type KeptPods } from '../../../gateway/store/pod-report.js';
import { copyPodFigures, figuresLength, fitsLayout, layoutOf, namesKey, podFigures, podsFrom, writePodFigures } from '../../../wire/pod-figures.js';
import { packageDefinition } from '../../../proto/load.js';
import type { PodUsage__Output } from '../../../proto/gen/oversell/v1/PodUsage.js';

const pod = (uid: string, cpu: number, memory: number, containers: [string, number, number][] = [['a'.repeat(64), cpu, memory]]): PodUsage__Output => ({
  uid, qosClass: 'burstable', cpuUsageMillicores: cpu, memoryWorkingSetBytes: memory, cpuThrottledMicros: cpu * 10,
  containers: containers.map(([containerId, c, m]) => ({ containerId, cpuUsageMillicores: c, memoryWorkingSetBytes: m })),
});

/** A message's fields as the contract declares them. */
const fieldsOf = (message: string) => ((packageDefinition()[`oversell.v1.${message}`] as { type: { field: { name: string }[] } }).type.field.map((f) => f.name)).sort();

const kept = (pods: PodUsage__Output[]): KeptPods => {
  const report = podFigures(pods);
  return { pods: podsFrom(report), podNamesKey: report.key };
};

describe('a pod report as names and figures', () => {
  it('comes back as the pods it was made from, whatever their ids hold', () => {
    const pods = [pod('u1', 10, 100), pod('"quoted",\\ uid', 20, 200, [['c1', 1, 2], ['c2', 3, 4]]), pod('u3', 0, 0, [])];
    assert.deepEqual(podsFrom(podFigures(pods)), pods);
    assert.equal(podFigures(pods).figures.length, figuresLength(pods));
    assert.equal(figuresLength(pods), 3 * 3 + 2 * (1 + 2));
  });

  it('writes at an offset of a shared array, leaving the rest alone', () => {
    const pods = [pod('u1', 10, 100)];
    const into = new Float64Array(2 + figuresLength(pods) + 1).fill(-1);
    const { names, key } = writePodFigures(pods, into, 2);
    assert.deepEqual([into[0], into[1], into[into.length - 1]], [-1, -1, -1]);
    assert.deepEqual(podsFrom({ names, figures: into.subarray(2) }), pods);
    assert.equal(key, namesKey(names));
  });

  it('carries every figure and name the contract has: a field added to PodUsage or ContainerUsage must be carried here too', () => {
    assert.deepEqual(fieldsOf('PodUsage'), ['containers', 'cpuThrottledMicros', 'cpuUsageMillicores', 'memoryWorkingSetBytes', 'qosClass', 'uid']);
    assert.deepEqual(fieldsOf('ContainerUsage'), ['containerId', 'cpuUsageMillicores', 'memoryWorkingSetBytes']);
  });

  it('copies figures into pods of the same names', () => {
    const into = podsFrom(podFigures([pod('u1', 1, 1), pod('u2', 2, 2)]));
    const next = [pod('u1', 11, 101), pod('u2', 22, 202)];
    assert.equal(copyPodFigures(podFigures(next).figures, into), true);
    assert.deepEqual(into, next);
  });

  it('copies nothing when the figures are not as many as the pods take', () => {
    const into = podsFrom(podFigures([pod('u1', 1, 1)]));
    const snapshot = structuredClone(into);
    const { figures } = podFigures([pod('u1', 5, 5, [['c1', 1, 1], ['c2', 2, 2]])]);
    assert.equal(copyPodFigures(figures, into), false);
    assert.equal(copyPodFigures(figures.subarray(0, 4), into), false);
    assert.deepEqual(into, snapshot);
  });

  it('keys names apart: within 53 bits, and different for near-identical names', () => {
    const keys = new Set<number>();
    for (let i = 0; i < 10_000; i++) {
      const key = podFigures([pod(`uid-${i}`, 1, 1)]).key;
      assert.ok(Number.isSafeInteger(key) && key >= 0, `${key}`);
      keys.add(key);
    }
    assert.equal(keys.size, 10_000);
    assert.notEqual(namesKey('[["a","b",[]]]'), namesKey('[["b","a",[]]]'));
  });
});

describe("a node's pod report kept across reports", () => {
  it('the same pods and containers: the kept objects carry the new figures', () => {
    const k = kept([pod('u1', 10, 100), pod('u2', 20, 200)]);
    const [first, second] = k.pods;
    const before = k.pods;
    const next = [pod('u1', 11, 101), pod('u2', 22, 202)];
    keepPodReport(k, podFigures(next));
    assert.equal(k.pods, before);
    assert.equal(k.pods[0], first);
    assert.equal(k.pods[1], second);
    assert.deepEqual(k.pods, next, 'every figure is the new report\'s');
  });

  it('different pods, order, QoS class or containers: new objects, the kept ones untouched', () => {
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
      const k = kept([pod('u1', 10, 100), pod('u2', 20, 200)]);
      const before = k.pods;
      const snapshot = structuredClone(before);
      keepPodReport(k, podFigures(next));
      assert.notEqual(k.pods, before, what);
      assert.deepEqual(k.pods, next, what);
      assert.deepEqual(before, snapshot, `${what}: the kept report untouched`);
    }
  });

  it('the same key with another count of figures (a crafted or chance collision): new objects', () => {
    const k = kept([pod('u1', 10, 100)]);
    const before = k.pods;
    const next = podFigures([pod('u2', 1, 1, [])]);
    keepPodReport(k, { ...next, key: k.podNamesKey });
    assert.notEqual(k.pods, before);
    assert.deepEqual(k.pods, [pod('u2', 1, 1, [])]);
  });

  it('nothing kept yet: the new report', () => {
    const k: KeptPods = { pods: [], podNamesKey: NO_PODS_KEY };
    keepPodReport(k, podFigures([pod('u1', 1, 1)]));
    assert.deepEqual(k.pods, [pod('u1', 1, 1)]);
  });

  it('a report without names (pod_names_as_before) under the kept key: its figures on the kept pods', () => {
    const k = kept([pod('u1', 10, 100), pod('u2', 20, 200)]);
    const { figures } = podFigures([pod('', 11, 101, [['', 11, 101]]), pod('', 22, 202, [['', 22, 202]])]);
    assert.equal(keepPodReport(k, { key: k.podNamesKey, figures }), true);
    assert.deepEqual(k.pods, [pod('u1', 11, 101), pod('u2', 22, 202)], 'the kept names, the new figures');
  });

  it('a report without names that the kept pods are not (another key, another count, nothing kept): false, nothing changed', () => {
    const k = kept([pod('u1', 10, 100)]);
    const snapshot = structuredClone(k);
    const { figures } = podFigures([pod('', 11, 101, [['', 11, 101]])]);
    assert.equal(keepPodReport(k, { key: NO_PODS_KEY, figures }), false);
    assert.equal(keepPodReport(k, { key: k.podNamesKey, figures: figures.subarray(0, 3) }), false);
    assert.deepEqual(k, snapshot);
    const none: KeptPods = { pods: [], podNamesKey: NO_PODS_KEY };
    assert.equal(keepPodReport(none, { key: NO_PODS_KEY, figures }), false, 'NO_PODS_KEY on a node without pods places no figures');
    assert.deepEqual(none.pods, []);
  });
});

describe('the layout a report without names is placed by', () => {
  it('fits the same count of pods with the same count of containers each, in order', () => {
    const named = [pod('u1', 1, 1, [['a'.repeat(64), 1, 1], ['b'.repeat(64), 1, 1]]), pod('u2', 2, 2)];
    const layout = layoutOf(named, 7);
    assert.equal(layout.key, 7);
    const unnamed = (counts: number[]) => counts.map((n) => pod('', 1, 1, Array.from({ length: n }, (): [string, number, number] => ['', 1, 1])));
    assert.equal(fitsLayout(unnamed([2, 1]), layout), true);
    assert.equal(fitsLayout(unnamed([1, 2]), layout), false, 'the counts in another order');
    assert.equal(fitsLayout(unnamed([2, 1, 1]), layout), false, 'a pod more');
    assert.equal(fitsLayout(unnamed([2]), layout), false, 'a pod fewer');
    assert.equal(fitsLayout(unnamed([2, 2]), layout), false, 'a container more');
  });
});
