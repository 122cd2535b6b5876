// Sample as a row of numbers (message-row.ts): how the ingest thread hands
// decoded samples to the main thread's store.
import type { Sample__Output } from './gen/oversell/v1/Sample.js';
import { packageDefinition } from './load.js';
import { messageRow, type MessageRow } from './message-row.js';

let row: MessageRow<Sample__Output> | undefined;

export function sampleRow(): MessageRow<Sample__Output> {
  row ??= messageRow<Sample__Output>(packageDefinition(), 'oversell.v1.Sample');
  return row;
}
