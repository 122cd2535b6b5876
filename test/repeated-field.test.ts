import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { NodeStatus } from '../proto/gen/oversell/v1/NodeStatus.js';
import { nodeUsageDefinition } from '../gateway/query/node-usage-service.js';
import { oversellV1 } from '../proto/load.js';

const stock = oversellV1().NodeUsage.service.ListNodes;
const ours = nodeUsageDefinition().ListNodes;

function node(i: number, labelBytes: number): NodeStatus {
  return {
    name: `node-${i}`,
    connected: i % 2 === 0,
    instanceId: `inst-${i}`,
    latest: { seq: i, timestampMs: 1_700_000_000_000 + i, cpuUsageMillicores: i * 7, memoryWorkingSetBytes: 2 ** 40 + i, pods: [] },
    labels: { big: 'x'.repeat(labelBytes), 'topology.kubernetes.io/zone': `z${i % 3}` },
    receivedAtMs: 1_700_000_000_000,
    policy: 'default',
  };
}

describe('ListNodes encoded node by node', () => {
  for (const [what, nodes] of [
    ['no nodes', []],
    ['one small node', [node(1, 0)]],
    ['element lengths of one, two and three varint bytes', [node(1, 0), node(2, 200), node(3, 20_000)]],
    ['300 nodes', Array.from({ length: 300 }, (_, i) => node(i, i % 50))],
  ] as const) {
    it(`is byte for byte what protobufjs writes: ${what}`, () => {
      const message = { nodes: [...nodes] };
      const bytes = ours.responseSerialize(message);
      assert.deepEqual(bytes, stock.responseSerialize(message));
      const back = stock.responseDeserialize(bytes);
      assert.deepEqual(back.nodes.map((n) => n.name), nodes.map((n) => n.name));
    });
  }
});
