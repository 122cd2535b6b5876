import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { AgentMessage } from '../proto/gen/oversell/v1/AgentMessage.js';
import type { Sample, Sample__Output } from '../proto/gen/oversell/v1/Sample.js';
import { oversellV1, packageDefinition } from '../proto/load.js';
import { messageRow } from '../wire/message-row.js';
import { sampleRow } from '../wire/sample-row.js';
import { NodeStore } from '../gateway/store/node-store.js';
import { podFigures } from '../wire/pod-figures.js';

/** A Sample as the ingest thread gets it: encoded and decoded by the service's own (de)serializers. */
function decoded(sample: Sample): Sample__Output {
  const report = oversellV1().AgentStream.service.Report;
  const message = report.requestDeserialize(report.requestSerialize({ sample } satisfies AgentMessage));
  if (!message.sample) throw new Error('no sample decoded');
  return message.sample;
}

const full: Sample = {
  seq: 41, timestampMs: 1_700_000_000_123, cpuUsageMillicores: 1234, memoryWorkingSetBytes: 5 * 2 ** 40 + 7,
  capacity: { cpuMillicores: 64_000, memoryBytes: 512 * 2 ** 30 },
  pressure: { available: true, cpuSome: { avg10: 12.5, avg60: 3.25 }, cpuFull: { avg10: 0.5, avg60: 0.25 }, memorySome: { avg10: 7, avg60: 1 }, memoryFull: { avg10: 0.125, avg60: 0 } },
  requests: { cpuMillicores: 6000, memoryBytes: 20 * 2 ** 30, podCount: 30, known: true },
  podsIncluded: true,
  pods: [],
};

describe('a message as a row of numbers (wire/message-row.ts)', () => {
  const layout = sampleRow();

  it('carries every field of a decoded Sample, nested messages and booleans included', () => {
    const sample = decoded(full);
    const row = new Float64Array(layout.width + 3);
    assert.equal(layout.write(sample, row, 3), true);
    assert.deepEqual(layout.read(row, 3), sample);
    assert.equal(row[3 + layout.offsetOf('seq')], 41);
    assert.equal(row[3 + layout.offsetOf('timestampMs')], 1_700_000_000_123);
  });

  it('carries absent nested messages as null, and zeroes their numbers in a row written over another', () => {
    const sample = decoded({ ...full, pressure: null, capacity: null, podsIncluded: false });
    assert.equal(sample.pressure, null);
    const row = new Float64Array(layout.width);
    layout.write(decoded(full), row, 0);
    layout.write(sample, row, 0);
    assert.deepEqual(layout.read(row, 0), sample);
    assert.equal(row[layout.offsetOf('pressure')], 0);
    assert.equal(row[layout.offsetOf('pressure.cpuSome.avg10')], 0);
    assert.equal(row[layout.offsetOf('capacity.memoryBytes')], 0);
  });

  it('finds nested fields and presence slots by path', () => {
    const row = new Float64Array(layout.width);
    layout.write(decoded(full), row, 0);
    assert.equal(row[layout.offsetOf('pressure')], 1);
    assert.equal(row[layout.offsetOf('pressure.cpuSome.avg10')], 12.5);
    assert.equal(row[layout.offsetOf('pressure.memoryFull.avg10')], 0.125);
    assert.equal(row[layout.offsetOf('requests.known')], 1);
    assert.equal(row[layout.offsetOf('capacity.memoryBytes')], 512 * 2 ** 30);
    assert.throws(() => layout.offsetOf('pods'), /not a field of the row/);
    assert.throws(() => layout.offsetOf('pressure.nope'), /Sample\.pressure\.nope is not a field/);
  });

  it('refuses a sample with pods (sent as an object instead) and a type with strings', () => {
    const withPods = decoded({ ...full, pods: [{ uid: 'u', qosClass: 'burstable', cpuUsageMillicores: 1, memoryWorkingSetBytes: 2 }] });
    assert.equal(layout.write(withPods, new Float64Array(layout.width), 0), false);
    assert.throws(() => messageRow(packageDefinition(), 'oversell.v1.NodeStatus'), /NodeStatus\.name \(TYPE_STRING\) cannot be carried/);
    assert.throws(() => messageRow(packageDefinition(), 'oversell.v1.Nope'), /not a message type/);
  });

  it('is what the store keeps: the newest sample read back from its row is the decoded one', () => {
    const store = new NodeStore({ retainMs: 5000, forgetAfterMs: 60_000 });
    store.attach('n', 'i', null, 1);
    const row = new Float64Array(layout.width + 2);
    const results: string[] = [];
    for (const seq of [1, 2, 2, 3, 4, 5, 6, 7, 8]) {
      const sample = decoded({ ...full, seq, timestampMs: seq * 1000, cpuUsageMillicores: seq * 10, pressure: seq === 4 ? null : full.pressure });
      // Written at an offset, as a batch row sits behind its stream id and arrival time.
      layout.write(sample, row, 2);
      results.push(store.ingest('n', 1, row, 2, seq));
    }
    assert.deepEqual(results, ['stored', 'stored', 'duplicate', 'stored', 'stored', 'stored', 'stored', 'stored', 'stored']);
    assert.equal(store.get('n')?.window.length, 5);
    assert.deepEqual(store.get('n')?.window.points().map((p) => p.cpuMillicores), [40, 50, 60, 70, 80]);
    // The record copied the row: writing over it changes nothing stored.
    layout.write(decoded({ ...full, seq: 99 }), row, 2);
    assert.deepEqual(store.get('n')?.latest, decoded({ ...full, seq: 8, timestampMs: 8000, cpuUsageMillicores: 80 }));
    assert.equal(store.ingest('n', 2, row, 2, 9), 'not-current-stream');
  });

  it("keeps the last pod list, and shows it in latest only when the newest sample carried it", () => {
    const store = new NodeStore({ retainMs: 5000, forgetAfterMs: 60_000 });
    store.attach('n', 'i', null, 1);
    const pods = [{ uid: 'u', qosClass: 'burstable', cpuUsageMillicores: 1, memoryWorkingSetBytes: 2, containers: [], cpuThrottledMicros: 0 }];
    const row = new Float64Array(layout.width);
    layout.write(decoded({ ...full, seq: 1 }), row, 0);
    store.ingest('n', 1, row, 0, 1, podFigures(pods));
    assert.deepEqual(store.get('n')?.latest?.pods, pods);
    layout.write(decoded({ ...full, seq: 2, podsIncluded: false }), row, 0);
    store.ingest('n', 1, row, 0, 2);
    assert.deepEqual(store.get('n')?.latest?.pods, []);
    assert.deepEqual(store.get('n')?.pods, pods);
    // Included and empty: the node has no pods now.
    layout.write(decoded({ ...full, seq: 3, podsIncluded: true }), row, 0);
    store.ingest('n', 1, row, 0, 3);
    assert.deepEqual(store.get('n')?.pods, []);
  });
});
