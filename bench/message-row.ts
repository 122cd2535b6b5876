// Does the message-row path pay? The ingest thread hands samples to the main
// thread's store either as rows of numbers (one Float64Array per 5 ms batch,
// copied by NodeStore.ingest) or as the decoded objects (structured clone,
// then written into a row for NodeStore.ingest, as the gateway did before). Same worker, same store of 10,000 nodes, 10,000
// samples/s; main-thread and ingest-thread active time per sample, modes
// alternated. Not part of npm run bench; run it alone:
//   node --expose-gc --import tsx bench/message-row.ts   (PAIRS, SECONDS_PER_MODE)
// Results: docs/performance-log.md, 2026-11-25.
import { isMainThread, parentPort, workerData } from 'node:worker_threads';
import { moduleWorker } from '../lib/module-worker.js';
import { performance } from 'node:perf_hooks';
import { sampleRow } from '../wire/sample-row.js';
import { NodeStore } from '../gateway/store/node-store.js';
import { storeSample } from '../test/helpers/store-sample.js';
import type { Sample__Output } from '../proto/gen/oversell/v1/Sample.js';

const NODES = 10_000;
const PER_BATCH = 50; // 10,000/s in 5 ms batches
const ROW0 = 2;

function sample(seq: number, n: number): Sample__Output {
  return {
    seq, timestampMs: Date.now(), cpuUsageMillicores: 1000 + (n % 500), memoryWorkingSetBytes: 2 ** 31 + n, rootCgroupMemoryWorkingSetBytes: 0, cpuManager: null,
    capacity: { cpuMillicores: 8000, memoryBytes: 2 ** 34 },
    pressure: { available: true, cpuSome: { avg10: 1, avg60: 1 }, cpuFull: { avg10: 0, avg60: 0 }, memorySome: { avg10: 0, avg60: 0 }, memoryFull: { avg10: 0, avg60: 0 }, cpuContention: null },
    requests: { cpuMillicores: 4000, memoryBytes: 2 ** 33, podCount: 30, known: true },
    podsIncluded: false, pods: [],
    summaries: [], onBeat: false, podNamesAsBefore: false,
  };
}

if (isMainThread) {
  const seconds = Number(process.env.SECONDS_PER_MODE ?? 8);
  const pairs = Number(process.env.PAIRS ?? 3);
  const store = new NodeStore({ retainMs: 60_000, forgetAfterMs: 600_000 });
  for (let i = 0; i < NODES; i++) store.attach(`n${i}`, 'i', null, i + 1);
  const width = sampleRow().width;
  const stride = ROW0 + width;
  const results: Record<string, number[]> = { rows: [], objects: [], rowsThread: [], objectsThread: [] };
  let seqBase = 0;
  for (let p = 0; p < pairs; p++) {
    const order: Array<'rows' | 'objects'> = p % 2 === 0 ? ['rows', 'objects'] : ['objects', 'rows'];
    for (const mode of order) {
      const worker = moduleWorker(new URL('./message-row.js', import.meta.url), { workerData: { mode, seqBase } });
      let applied = 0;
      worker.on('message', (m: { rows?: Float64Array; samples?: Array<{ node: number; sample: Sample__Output }> }) => {
        if (m.rows) {
          for (let at = 0; at < m.rows.length; at += stride) {
            const node = m.rows[at]!;
            store.ingest(`n${node}`, node + 1, m.rows, at + ROW0, m.rows[at + 1]!);
            applied += 1;
          }
        } else if (m.samples) {
          for (const s of m.samples) {
            storeSample(store, `n${s.node}`, s.node + 1, s.sample, Date.now());
            applied += 1;
          }
        }
      });
      await new Promise((r) => setTimeout(r, 1500)); // worker starts, warms up
      const appliedAt = applied;
      const elu = performance.eventLoopUtilization();
      const welu = worker.performance.eventLoopUtilization();
      await new Promise((r) => setTimeout(r, seconds * 1000));
      const active = performance.eventLoopUtilization(elu).active;
      const threadActive = worker.performance.eventLoopUtilization(welu).active;
      const n = applied - appliedAt;
      results[mode]!.push((active * 1000) / n);
      results[`${mode}Thread`]!.push((threadActive * 1000) / n);
      console.log(`${mode}: ${n} samples, main ${((active * 1000) / n).toFixed(2)} us/sample, ingest thread ${((threadActive * 1000) / n).toFixed(2)} us/sample`);
      await worker.terminate();
      seqBase += 10_000_000;
    }
  }
  const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
  console.log(`result ${JSON.stringify(Object.fromEntries(Object.entries(results).map(([k, v]) => [k, +median(v).toFixed(2)])))}`);
} else {
  const { mode, seqBase } = workerData as { mode: 'rows' | 'objects'; seqBase: number };
  const layout = sampleRow();
  const stride = ROW0 + layout.width;
  let seq = seqBase;
  let node = 0;
  setInterval(() => {
    if (mode === 'rows') {
      const rows = new Float64Array(PER_BATCH * stride);
      for (let i = 0; i < PER_BATCH; i++) {
        const s = sample(++seq, node);
        rows[i * stride] = node;
        rows[i * stride + 1] = Date.now();
        layout.write(s, rows, i * stride + ROW0);
        node = (node + 1) % NODES;
      }
      parentPort!.postMessage({ rows }, [rows.buffer]);
    } else {
      const samples = [];
      for (let i = 0; i < PER_BATCH; i++) {
        samples.push({ node, sample: sample(++seq, node) });
        node = (node + 1) % NODES;
      }
      parentPort!.postMessage({ samples });
    }
  }, 5);
}
