// NodeSummaries through wire/packed-columns.ts: byte for byte what protobufjs
// writes, and read back as protobufjs reads it, over random columns.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import type { NodeSummaries, NodeSummaries__Output } from '../proto/gen/oversell/v1/NodeSummaries.js';
import { oversellV1, packageDefinition } from '../proto/load.js';
import { nodeSummariesDeserializer, nodeSummariesSerializer } from '../wire/node-summaries-codec.js';
import { columnsOf, packedColumnsDeserializer } from '../wire/packed-columns.js';

const stock = oversellV1().NodeUsage.service.ListNodeSummaries;
const serialize = nodeSummariesSerializer();
const deserialize = nodeSummariesDeserializer();

const int64 = fc.oneof(fc.integer({ min: 0, max: 2 ** 31 }), fc.integer({ min: -(2 ** 31), max: -1 }), fc.maxSafeInteger(), fc.constantFrom(0, 2 ** 53 - 1, -(2 ** 53) + 1, 2 ** 32, 2 ** 35 + 17));
const column = <T>(a: fc.Arbitrary<T>) => fc.array(a, { maxLength: 30 });
const arbSummaries: fc.Arbitrary<NodeSummaries__Output> = fc.record({
  name: column(fc.string({ unit: 'grapheme', maxLength: 20 })),
  connected: column(fc.boolean()),
  hasSample: column(fc.boolean()),
  ageMs: column(int64),
  cpuUsageMillicores: column(int64),
  memoryWorkingSetBytes: column(int64),
  capacityCpuMillicores: column(int64),
  capacityMemoryBytes: column(int64),
  requestsKnown: column(fc.boolean()),
  requestsCpuMillicores: column(int64),
  requestsMemoryBytes: column(int64),
  pressureAvailable: column(fc.boolean()),
  cpuPressure: column(fc.double({ noNaN: true })),
  memoryPressure: column(fc.double({ noNaN: true })),
  rawAllocatableKnown: column(fc.boolean()),
  rawCpuMillicores: column(int64),
  rawMemoryBytes: column(int64),
  allocatableCpuMillicores: column(int64),
  allocatableMemoryBytes: column(int64),
  windowSamples: column(fc.integer({ min: 0, max: 2 ** 32 - 1 })),
  policy: column(fc.nat({ max: 2 ** 32 - 1 })),
  cpuBound: column(fc.nat(20)),
  memoryBound: column(fc.nat(20)),
  texts: column(fc.string()),
});

describe('NodeSummaries encoded column by column', () => {
  it('is byte for byte what protobufjs writes, and reads back as protobufjs reads it', () => {
    fc.assert(
      fc.property(arbSummaries, (s) => {
        const bytes = serialize(s);
        assert.deepEqual(bytes, stock.responseSerialize(s));
        assert.deepEqual(deserialize(bytes), stock.responseDeserialize(bytes));
      }),
      { numRuns: 500 },
    );
  });

  it('an empty message is empty, and decodes to empty columns', () => {
    assert.equal(serialize({}).length, 0);
    assert.deepEqual(deserialize(Buffer.alloc(0)), stock.responseDeserialize(Buffer.alloc(0)));
  });

  it('reads unpacked scalars and skips fields it does not know', () => {
    // field 4 (age_ms) unpacked: tag 0x20, varint 300; field 99 as a varint, then as bytes; field 2 (connected) unpacked true.
    const bytes = Buffer.from([0x20, 0xac, 0x02, 0x98, 0x06, 0x05, 0x9a, 0x06, 0x02, 0x61, 0x62, 0x10, 0x01]);
    const s: NodeSummaries = deserialize(bytes);
    assert.deepEqual(s.ageMs, [300]);
    assert.deepEqual(s.connected, [true]);
    assert.deepEqual(deserialize(bytes), stock.responseDeserialize(bytes));
  });

  it('refuses a message type whose fields are not columns', () => {
    assert.throws(() => columnsOf(packageDefinition()['oversell.v1.NodeStatus']), /only repeated/);
    assert.throws(() => packedColumnsDeserializer(columnsOf({})), /not a message type/);
  });
});
