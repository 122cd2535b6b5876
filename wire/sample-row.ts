// Sample as a row of numbers (message-row.ts): how the ingest thread hands
// decoded samples to the main thread's store, and how the store keeps each
// node's newest sample.
import type { Sample__Output } from '../proto/gen/oversell/v1/Sample.js';
import { packageDefinition } from '../proto/load.js';
import { messageRow, type MessageRow } from './message-row.js';

let row: MessageRow<Sample__Output> | undefined;

export function sampleRow(): MessageRow<Sample__Output> {
  row ??= messageRow<Sample__Output>(packageDefinition(), 'oversell.v1.Sample');
  return row;
}

/** The fields the gateway reads from every sample (an absent message's read 0; bools are 1 or 0). */
const READ = [
  'seq', 'timestampMs', 'cpuUsageMillicores', 'memoryWorkingSetBytes', 'rootCgroupMemoryWorkingSetBytes', 'podsIncluded',
  'capacity.cpuMillicores', 'capacity.memoryBytes',
  'requests.cpuMillicores', 'requests.memoryBytes', 'requests.known',
  'pressure.available', 'pressure.cpuSome.avg10', 'pressure.memorySome.avg10', 'pressure.cpuContention', 'pressure.cpuContention.avg10',
  'pressure.cpuFull.avg10', 'pressure.memoryFull.avg10',
  'cpuManager', 'cpuManager.staticPolicy', 'cpuManager.exclusiveCpus',
] as const;
export type SampleField = (typeof READ)[number];

let at: Readonly<Record<SampleField, number>> | undefined;

/** Where each of those fields sits in a sample's row. */
export function sampleAt(): Readonly<Record<SampleField, number>> {
  if (!at) {
    const layout = sampleRow();
    at = Object.freeze(Object.fromEntries(READ.map((f) => [f, layout.offsetOf(f)])) as Record<SampleField, number>);
  }
  return at;
}
