// The per-node series as /metrics serves them: the text, its escaping, nodes
// forgotten, and a scrape of many nodes that lets the event loop run between slices.
import assert from 'node:assert/strict';
import { closeSync, openSync } from 'node:fs';
import { describe, it } from 'node:test';
import { GatewayMetrics } from '../../../gateway/metrics/metrics.js';
import { NODES_PER_TURN, NodeSeries } from '../../../gateway/metrics/node-series.js';
import { NodeStore } from '../../../gateway/store/node-store.js';
import { metricValue, parseExposition } from '../../helpers/metrics.js';

const values = (raw: bigint, granted: bigint, overCap = false) => ({ decidedBy: 'headroom' as const, raw, granted, applied: granted, requestsOverCap: overCap });
const textOf = async (s: NodeSeries, records: Parameters<NodeSeries['chunks']>[0], nowMs: number) => {
  let text = '';
  for await (const chunk of s.chunks(records, nowMs)) text += chunk;
  return text;
};
const lines = (text: string, family: string) => text.split('\n').filter((l) => l.startsWith(`${family}{`)).sort();

describe('per-node series', () => {
  it('each decision shows as prom-client showed it: ratios and raw per node and resource, over-cap always, no ratios when raw is 0', async () => {
    const m = new GatewayMetrics(new NodeStore({ retainMs: 60_000, forgetAfterMs: 600_000 }));
    m.decision('a', 'cpu', values(4000n, 6000n));
    m.decision('a', 'memory', values(2n ** 33n, 3n * 2n ** 32n, true));
    m.decision('b', 'cpu', values(0n, 0n));
    m.decision('a', 'cpu', values(4000n, 5000n)); // the later decision replaces the earlier
    const text = await m.exposition();
    // prom-client's own part may say Nan (its spelling) before the loop is measured: only the per-node part is parsed here.
    const types = parseExposition(text.slice(text.indexOf('# HELP oversell_node_')));
    for (const f of ['oversell_node_granted_ratio', 'oversell_node_applied_ratio', 'oversell_node_raw_allocatable', 'oversell_node_requests_over_cap', 'oversell_node_sample_age_seconds']) {
      assert.equal(types.get(f), 'gauge', f);
      assert.equal(text.split('\n').filter((l) => l === `# TYPE ${f} gauge`).length, 1, `${f} is one family`);
    }
    assert.deepEqual(lines(text, 'oversell_node_granted_ratio'), ['oversell_node_granted_ratio{node="a",resource="cpu"} 1.25', 'oversell_node_granted_ratio{node="a",resource="memory"} 1.5']);
    assert.deepEqual(lines(text, 'oversell_node_raw_allocatable'), ['oversell_node_raw_allocatable{node="a",resource="cpu"} 4', 'oversell_node_raw_allocatable{node="a",resource="memory"} 8589934592']);
    assert.deepEqual(lines(text, 'oversell_node_requests_over_cap'), [
      'oversell_node_requests_over_cap{node="a",resource="cpu"} 0', 'oversell_node_requests_over_cap{node="a",resource="memory"} 1', 'oversell_node_requests_over_cap{node="b",resource="cpu"} 0',
    ]);
    m.forgetNode('a');
    const after = await m.exposition();
    assert.deepEqual(lines(after, 'oversell_node_granted_ratio'), []);
    assert.deepEqual(lines(after, 'oversell_node_requests_over_cap'), ['oversell_node_requests_over_cap{node="b",resource="cpu"} 0']);
  });

  it('label values are escaped as the text format asks', async () => {
    const s = new NodeSeries();
    s.set('we"ird\\na\nme', 'cpu', { raw: 1, grantedRatio: 1, appliedRatio: 1, overCap: false });
    const text = await textOf(s, [{ name: 'x"y', hasSample: true, receivedAtMs: 1000 }, { name: 'never', hasSample: false, receivedAtMs: 0 }], 3500);
    assert.ok(text.includes('oversell_node_granted_ratio{node="we\\"ird\\\\na\\nme",resource="cpu"} 1\n'), text);
    assert.deepEqual(lines(text, 'oversell_node_sample_age_seconds'), ['oversell_node_sample_age_seconds{node="x\\"y"} 2.5']);
    parseExposition(text);
  });

  it('a scrape of many nodes lets the event loop run between slices, and a node forgotten meanwhile is left out', async () => {
    const s = new NodeSeries();
    const n = NODES_PER_TURN * 4;
    for (let i = 0; i < n; i++) s.set(`n-${i}`, 'cpu', { raw: 8, grantedRatio: 1.5, appliedRatio: 1.5, overCap: false });
    let ranDuring = 0;
    const scrape = textOf(s, [], 0);
    let done = false;
    void scrape.then(() => (done = true));
    // Each turn the loop gets, one tick; a scrape written in one turn would leave none before it resolves.
    await new Promise<void>((resolve) => {
      const tick = () => {
        if (done) return resolve();
        ranDuring += 1;
        if (ranDuring === 1) s.forget(`n-${n - 1}`);
        setImmediate(tick);
      };
      setImmediate(tick);
    });
    const text = await scrape;
    assert.ok(ranDuring >= 2, `the loop ran ${ranDuring} times during the scrape`);
    assert.equal(lines(text, 'oversell_node_granted_ratio').length, n - 1);
  });

  it('open descriptors are counted at the scrape (off the loop), one series', async () => {
    const m = new GatewayMetrics(new NodeStore({ retainMs: 60_000, forgetAfterMs: 600_000 }));
    const before = metricValue(await m.exposition(), 'oversell_gateway_process_open_fds') ?? NaN;
    const fds = Array.from({ length: 20 }, () => openSync(process.execPath, 'r'));
    try {
      const text = await m.exposition();
      assert.equal(text.split('\n').filter((l) => l.startsWith('oversell_gateway_process_open_fds ')).length, 1);
      assert.ok((metricValue(text, 'oversell_gateway_process_open_fds') ?? NaN) >= before + 20, text.split('\n').find((l) => l.startsWith('oversell_gateway_process_open_fds ')));
    } finally {
      for (const fd of fds) closeSync(fd);
    }
  });
});
