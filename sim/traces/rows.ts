// Reading a trace file a line at a time: the public traces run to gigabytes
// (Alibaba's container_usage.csv alone is tens of GB), so a file is streamed,
// never held as text, and every complaint names the file and the line.
import { createReadStream } from 'node:fs';
import { createInterface } from 'node:readline';
import { TraceFormatError } from './public-workload.js';

export interface RowSource {
  /** 'bitbrains', 'alibaba-2018': the start of every message. */
  format: string;
  /** The file's name as the user knows it (e.g. '12.csv'). */
  file: string;
  path: string;
  /** ';' (Bitbrains, with a tab after each) or ',' (Alibaba). */
  separator: string;
  /** Whether the schema has no header row (Alibaba): a word on line 1 is then a header the file should not have. */
  headerless?: boolean;
}

/** Where a row came from, for messages: 'bitbrains: 12.csv line 3'. */
export interface RowPlace {
  source: RowSource;
  line: number;
}

export const where = (p: RowPlace): string => `${p.source.format}: ${p.source.file} line ${p.line}`;

export function formatError(p: RowPlace, what: string): TraceFormatError {
  return new TraceFormatError(`${where(p)}: ${what}`);
}

/**
 * Calls `row` with the fields of each non-empty line, trimmed (so ';\t' and
 * ';' both separate, and a CRLF file reads as LF). A throw from `row` ends the
 * read and rejects with it.
 */
export async function forEachRow(source: RowSource, row: (fields: string[], place: RowPlace) => void): Promise<void> {
  const stream = createReadStream(source.path, { encoding: 'utf8' });
  const lines = createInterface({ input: stream, crlfDelay: Number.POSITIVE_INFINITY });
  let line = 0;
  try {
    for await (const text of lines) {
      line += 1;
      if (text.trim() === '') continue;
      row(text.split(source.separator).map((f) => f.trim()), { source, line });
    }
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== undefined && !(err instanceof TraceFormatError)) {
      throw new TraceFormatError(`${source.format}: cannot read ${source.file}: ${(err as Error).message}`);
    }
    throw err;
  } finally {
    lines.close();
    stream.destroy();
  }
}

/** A field that must be a finite number >= 0 ('6.7108864E7' included); `name` is the column's name in the schema. */
export function count(fields: string[], i: number, name: string, p: RowPlace): number {
  const v = optionalCount(fields, i, name, p);
  if (v === undefined) throw formatError(p, `${name} (column ${i + 1}) is empty: expected a number`);
  return v;
}

/** A time that may be before the trace's zero (Alibaba's time_stamp counts from a point inside the trace). */
export function time(fields: string[], i: number, name: string, p: RowPlace): number {
  const text = fields[i] ?? '';
  const v = Number(text);
  if (text === '' || !Number.isFinite(v)) throw formatError(p, `${name} (column ${i + 1}): expected a time in seconds, got '${text}'${headerHint(fields, p)}`);
  return v;
}

function headerHint(fields: string[], p: RowPlace): string {
  const header = p.source.headerless && p.line === 1 && fields.every((f) => f === '' || !Number.isFinite(Number(f)));
  return header ? ' (these files have no header row)' : '';
}

/** As count, but an empty field is undefined (the Alibaba usage files leave readings out). */
export function optionalCount(fields: string[], i: number, name: string, p: RowPlace): number | undefined {
  const text = fields[i] ?? '';
  if (text === '') return undefined;
  const v = Number(text);
  if (!Number.isFinite(v) || v < 0) {
    throw formatError(p, `${name} (column ${i + 1}): expected a number >= 0, got '${text}'${headerHint(fields, p)}`);
  }
  return v;
}

export function columns(fields: string[], expected: number, p: RowPlace): void {
  if (fields.length !== expected) {
    throw formatError(p, `expected ${expected} ${p.source.separator}-separated columns, got ${fields.length}`);
  }
}
