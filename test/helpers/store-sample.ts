// Stores a decoded sample in a NodeStore as the stream service hands one over:
// written into its row of numbers (wire/sample-row.ts), the pods it carried
// as names and figures (wire/pod-figures.ts) and its summaries beside it. Not checked (gateway/store/sample-check.ts): a test stores what
// it means to.
import type { Sample__Output } from '../../proto/gen/oversell/v1/Sample.js';
import type { IngestResult, NodeStore } from '../../gateway/store/node-store.js';
import { sampleRow } from '../../wire/sample-row.js';
import { summariesFromWire } from '../../wire/usage-summary.js';
import { podFigures } from '../../wire/pod-figures.js';

let row: Float64Array | undefined;

export function storeSample(store: NodeStore, name: string, streamId: number, sample: Sample__Output, nowMs: number): IngestResult {
  row ??= new Float64Array(sampleRow().width);
  const hasPods = sample.pods.length > 0;
  const hasSummaries = sample.summaries.length > 0;
  sampleRow().write(hasPods || hasSummaries ? { ...sample, pods: [], summaries: [] } : sample, row, 0);
  return store.ingest(name, streamId, row, 0, nowMs, hasPods ? podFigures(sample.pods) : undefined, hasSummaries ? summariesFromWire(sample.summaries, sample.timestampMs) : undefined);
}
