// How a sharded replica puts its own and the other replicas' views of the
// nodes together (gateway/query/peer-nodes.ts): each node once, as the view
// with a sample and then the youngest one shows it, in name order.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { NodeStatus } from '../../../proto/gen/oversell/v1/NodeStatus.js';
import type { NodeSummaries__Output } from '../../../proto/gen/oversell/v1/NodeSummaries.js';
import { mergeStatuses, mergeSummaries } from '../../../gateway/query/peer-nodes.js';

const sample = { cpuUsageMillicores: 100 };
const status = (name: string, ageMs: number, withSample: boolean, policy = ''): NodeStatus => ({ name, ageMs, latest: withSample ? sample : null, policy });

describe('mergeStatuses', () => {
  it('one status per node, in name order: a sample beats none, then the younger wins, then the first list', () => {
    const mine = [status('b', 0, false), status('c', 500, true, 'mine'), status('d', 300, true, 'first')];
    const peer = [status('c', 200, true, 'peer'), status('a', 100, true), status('b', 9000, true, 'peer'), status('d', 300, true, 'second')];
    const merged = mergeStatuses([mine, peer]);
    assert.deepEqual(merged.map((s) => s.name), ['a', 'b', 'c', 'd']);
    assert.equal(merged[1]!.policy, 'peer', 'b: an old sample is still more than none');
    assert.equal(merged[2]!.policy, 'peer', 'c: the younger sample');
    assert.equal(merged[3]!.policy, 'first', 'd: a tie keeps the first list\'s (this replica\'s)');
  });
});

/** Summaries of rows given as [name, hasSample, ageMs, cpu, policy text]. */
function summaries(rows: Array<[string, boolean, number, number, string]>): NodeSummaries__Output {
  const texts = [''];
  const index = (t: string) => (texts.includes(t) ? texts.indexOf(t) : texts.push(t) - 1);
  const column = <T>(f: (r: [string, boolean, number, number, string]) => T) => rows.map(f);
  const zeros = column(() => 0);
  const no = column(() => false);
  return {
    name: column((r) => r[0]), connected: column(() => true), hasSample: column((r) => r[1]), ageMs: column((r) => r[2]),
    cpuUsageMillicores: column((r) => r[3]), memoryWorkingSetBytes: zeros, capacityCpuMillicores: zeros, capacityMemoryBytes: zeros,
    requestsKnown: no, requestsCpuMillicores: zeros, requestsMemoryBytes: zeros, pressureAvailable: no, cpuPressure: zeros, memoryPressure: zeros,
    rawAllocatableKnown: no, rawCpuMillicores: zeros, rawMemoryBytes: zeros, allocatableCpuMillicores: zeros, allocatableMemoryBytes: zeros,
    windowSamples: zeros, policy: column((r) => index(r[4])), cpuBound: column((r) => index(r[4] && 'cap')), memoryBound: zeros, texts,
  };
}

describe('mergeSummaries', () => {
  it('one row per node, in name order, the best row of each, with policy and bound names renumbered', () => {
    const mine = summaries([['b', false, 0, 0, 'p-mine'], ['c', true, 500, 1, 'p-mine']]);
    const peer = summaries([['c', true, 200, 2, 'p-peer'], ['a', true, 100, 3, 'p-a'], ['b', true, 50, 4, 'p-peer']]);
    const merged = mergeSummaries([mine, peer]);
    assert.deepEqual(merged.name, ['a', 'b', 'c']);
    assert.deepEqual(merged.cpuUsageMillicores, [3, 4, 2]);
    assert.deepEqual(merged.policy.map((i) => merged.texts[i]), ['p-a', 'p-peer', 'p-peer'], 'each row names its own policy after renumbering');
    assert.deepEqual(merged.cpuBound.map((i) => merged.texts[i]), ['cap', 'cap', 'cap']);
    assert.equal(merged.texts[0], '', 'index 0 stays "no policy"');
    assert.equal(new Set(merged.texts).size, merged.texts.length, 'each text once');
    for (const [key, column] of Object.entries(merged)) assert.equal((column as unknown[]).length, key === 'texts' ? merged.texts.length : 3, `${key} has a value per row`);
  });

  it('one part is returned as it is, none as an empty table', () => {
    const only = summaries([['a', true, 1, 1, '']]);
    assert.equal(mergeSummaries([only]), only);
    assert.deepEqual(mergeSummaries([]).name, []);
  });
});
