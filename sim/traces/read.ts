// One entry for `oversell simulate --trace PATH --trace-format FORMAT` to read
// a public trace by its format's name, with the options each format needs.
import { readAlibaba2018 } from './alibaba-2018.js';
import { readBitbrains } from './bitbrains.js';
import { type PublicTraceFormat, type PublicWorkload, TraceFormatError } from './public-workload.js';

export const PUBLIC_TRACE_FORMATS: readonly PublicTraceFormat[] = ['bitbrains', 'alibaba-2018'];

export interface PublicTraceOptions {
  /** alibaba-2018 only, and required there: bytes of a machine whose mem_size is 100. */
  machineMemoryBytes?: number;
  sampleSeconds?: number;
  /** alibaba-2018 only: usage rows kept, in trace seconds. */
  window?: { from: number; to: number };
}

export function isPublicTraceFormat(s: string): s is PublicTraceFormat {
  return (PUBLIC_TRACE_FORMATS as readonly string[]).includes(s);
}

export async function readPublicTrace(format: PublicTraceFormat, path: string, options: PublicTraceOptions = {}): Promise<PublicWorkload> {
  if (format === 'bitbrains') {
    if (options.machineMemoryBytes !== undefined || options.window !== undefined) {
      throw new TraceFormatError('bitbrains: the trace has no machines and its files are one VM each: machine memory and a window apply to alibaba-2018 only');
    }
    return readBitbrains(path, { sampleSeconds: options.sampleSeconds });
  }
  if (options.machineMemoryBytes === undefined) {
    throw new TraceFormatError('alibaba-2018: the trace gives memory normalized to 0-100, not in bytes: give the memory of a machine whose mem_size is 100');
  }
  return readAlibaba2018(path, { machineMemoryBytes: options.machineMemoryBytes, sampleSeconds: options.sampleSeconds, window: options.window });
}
