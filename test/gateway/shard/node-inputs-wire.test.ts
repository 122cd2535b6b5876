// A node's decision inputs as replicas send them (gateway/shard/node-inputs-wire.ts):
// what goes out comes back as the decision reads it, and what no replica
// could have sent is refused whole.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { nodeInputsToWire, peerInputsFromWire, type NodeInputsWire } from '../../../gateway/shard/node-inputs-wire.js';
import { DigestedHistory, digestHistory, digestShares } from '../../../gateway/decide/history-digest.js';
import { LoadHistory } from '../../../gateway/decide/load-history.js';

const GI = 2 ** 30;

function history(): LoadHistory {
  const h = new LoadHistory(86_400_000);
  for (let t = 0; t < 500; t++) h.record(t * 10_000, 0.2 + (t % 40) / 100, 0.4 + (t % 25) / 100);
  return h;
}

const usage = {
  ageMs: 1500,
  capacityMemoryBytes: 32 * GI,
  requests: { cpuMillicores: 6000, memoryBytes: 20 * GI, known: true },
  cpuManager: { policy: 'static' as const, exclusiveCpus: 2 },
  planned: [{ planId: 7, summary: { newestMs: 1_000_000, samples: 60, spanMs: 60_000, cpuMillicores: 700.5, memoryBytes: 6 * GI, cpuPressure: false, memoryPressure: true } }],
  window: undefined, summary: undefined, agentSummaries: undefined,
};

describe('node inputs between replicas', () => {
  it('come back as sent: facts, summaries and the history at the shares asked', () => {
    const h = history();
    const wire = nodeInputsToWire('node-a', usage, digestHistory(h, digestShares([0.05, 0.01, 0.05])));
    const read = peerInputsFromWire(JSON.parse(JSON.stringify({ nodes: [wire] })));
    assert.ok(typeof read !== 'string', String(read));
    const a = read.get('node-a')!;
    assert.equal(a.ageMs, 1500);
    assert.deepEqual(a.usage.requests, usage.requests);
    assert.deepEqual(a.usage.cpuManager, usage.cpuManager);
    assert.deepEqual(a.usage.planned, usage.planned);
    assert.equal(a.usage.capacityMemoryBytes, 32 * GI);
    for (const share of [0, 0.01, 0.05]) {
      assert.equal(a.usage.history!.quantile('cpu', share), h.quantile('cpu', share), `cpu at ${share}`);
      assert.equal(a.usage.history!.quantile('memory', share), h.quantile('memory', share), `memory at ${share}`);
    }
    assert.equal(a.usage.history!.spanMs(), h.spanMs());
  });

  it('a share the digest lacks reads as the largest factor seen: never a smaller peak than the history gives', () => {
    const h = history();
    const d = new DigestedHistory(digestHistory(h, digestShares([0.05])));
    assert.equal(d.quantile('cpu', 0.02), h.quantile('cpu', 0));
    assert.ok(d.quantile('cpu', 0.02) >= h.quantile('cpu', 0.02));
    assert.deepEqual(digestShares([0.05, 0.05, 0, -1, 2]), [0, 0.05], 'share 0 first, each once, only shares a budget can have');
  });

  it('a body with one field no replica could send is refused whole, naming the node and the field', () => {
    const good = nodeInputsToWire('node-a', usage, undefined);
    const cases: [string, Partial<NodeInputsWire> | Record<string, unknown>, RegExp][] = [
      ['a negative age', { ageMs: -1 }, /node-b: ageMs out of bounds/],
      ['a NaN-ish age', { ageMs: 'soon' }, /ageMs out of bounds/],
      ['not a node name', { name: 'Node_B' }, /not a node name/],
      ['requests of two', { requests: [1, 2] }, /requests malformed/],
      ['a memory statistic over capacity', { summaries: [[7, 1, 60, 60_000, 700, 64 * GI, 0, 0]] }, /a summary out of bounds/],
      ['a pressure flag of 2', { summaries: [[7, 1, 60, 60_000, 700, GI, 2, 0]] }, /a summary out of bounds/],
      ['a history without share 0', { history: { spanMs: 1, quantiles: [[0.05, 1, 1]] } }, /must start at share 0/],
      ['a load factor past any node\'s', { history: { spanMs: 1, quantiles: [[0, 1e9, 1]] } }, /a history quantile out of bounds/],
      ['a CPU manager with a fraction of a CPU', { cpuManager: [1, 1.5] }, /cpuManager malformed/],
    ];
    for (const [what, change, message] of cases) {
      const read = peerInputsFromWire({ nodes: [good, { ...good, name: 'node-b', ...change }] });
      assert.equal(typeof read, 'string', what);
      assert.match(read as string, message, what);
    }
    assert.match(peerInputsFromWire({ nodes: 'all' }) as string, /the body must be/);
    assert.match(peerInputsFromWire(null) as string, /the body must be/);
  });
});
