// A message as a row of numbers: every scalar field, depth first, with one
// presence slot before each nested message. The ingest thread hands decoded
// samples to the main thread this way, so the main thread neither
// structured-clones a sample's ten objects nor copies them into the node's
// record (a third of the main thread's cost per sample: bench/message-row.ts,
// docs/performance-log.md). A row crosses as part of one Float64Array per batch
// and the store keeps it as it is (NodeRecord's newest sample), making the message
// only when the query API asks. The layout comes from the loaded descriptor,
// never from a copy by hand.
import { fieldsOf } from './packed-columns.js';

type Step =
  | { key: string; kind: 'number' }
  | { key: string; kind: 'bool' }
  /** width: the nested message's slots after its presence slot. */
  | { key: string; kind: 'message'; steps: Step[]; width: number }
  /** A repeated field: a row carries it only when empty. */
  | { key: string; kind: 'empty-list' };

const NUMBERS = new Set(['TYPE_INT64', 'TYPE_UINT64', 'TYPE_INT32', 'TYPE_UINT32', 'TYPE_SINT32', 'TYPE_SINT64', 'TYPE_FIXED32', 'TYPE_FIXED64', 'TYPE_DOUBLE', 'TYPE_FLOAT']);

export interface MessageRow<T> {
  /** Numbers per message. */
  readonly width: number;
  /**
   * Where a field sits in the row: a scalar by its path ('seq',
   * 'pressure.cpuSome.avg10'; a bool is 1 or 0), a nested message by its
   * presence slot (1 when present). An absent message's fields read 0.
   */
  offsetOf(path: string): number;
  /** Writes msg at out[at .. at + width). False, with nothing promised about the slots, when msg holds what a row cannot (a non-empty repeated field): send that one as an object. */
  write(msg: T, out: Float64Array, at: number): boolean;
  /** The message at row[at ..], absent nested messages as null and repeated fields empty. */
  read(row: Float64Array, at: number): T;
}

/**
 * The row layout of a message type, from the package definition proto-loader
 * made (loaded with longs as Number). Throws for a field a row cannot carry
 * (strings, bytes, enums, maps, repeated non-empty): those messages need objects.
 */
export function messageRow<T extends object>(definitions: Record<string, unknown>, typeName: string): MessageRow<T> {
  const steps = stepsOf(definitions, typeName, []);
  const offsets = new Map<string, number>();
  offsetsOf(steps, '', 0, offsets);
  return {
    width: widthOf(steps),
    offsetOf(path) {
      const offset = offsets.get(path);
      if (offset === undefined) throw new Error(`${typeName}.${path} is not a field of the row (repeated fields are not in it)`);
      return offset;
    },
    write: (msg, out, at) => writeSteps(steps, msg as Record<string, unknown>, out, at) >= 0,
    read: (row, at) => {
      const into: Record<string, unknown> = {};
      readSteps(steps, row, at, into);
      return into as T;
    },
  };
}

function stepsOf(definitions: Record<string, unknown>, typeName: string, seen: string[]): Step[] {
  if (seen.includes(typeName)) throw new Error(`${typeName} contains itself: a row cannot carry it`);
  return fieldsOf(definitions[typeName], typeName).map((f): Step => {
    if (f.label === 'LABEL_REPEATED') return { key: f.name, kind: 'empty-list' };
    if (NUMBERS.has(f.type)) return { key: f.name, kind: 'number' };
    if (f.type === 'TYPE_BOOL') return { key: f.name, kind: 'bool' };
    if (f.type === 'TYPE_MESSAGE' && f.typeName) {
      const nested = stepsOf(definitions, resolve(definitions, typeName, f.typeName), [...seen, typeName]);
      return { key: f.name, kind: 'message', steps: nested, width: widthOf(nested) };
    }
    throw new Error(`${typeName}.${f.name} (${f.type}) cannot be carried in a row of numbers`);
  });
}

/** A field's type name as the descriptor gives it (absolute, or relative to the enclosing scopes), as a key of definitions. */
function resolve(definitions: Record<string, unknown>, from: string, name: string): string {
  if (name.startsWith('.')) return name.slice(1);
  const scopes = from.split('.');
  for (let n = scopes.length - 1; n >= 0; n--) {
    const candidate = [...scopes.slice(0, n), name].join('.');
    if (candidate in definitions) return candidate;
  }
  return name;
}

function offsetsOf(steps: readonly Step[], prefix: string, at: number, into: Map<string, number>): void {
  for (const s of steps) {
    if (s.kind === 'empty-list') continue;
    into.set(prefix + s.key, at);
    if (s.kind === 'message') offsetsOf(s.steps, `${prefix}${s.key}.`, at + 1, into);
    at += widthOf([s]);
  }
}

function widthOf(steps: readonly Step[]): number {
  let n = 0;
  for (const s of steps) n += s.kind === 'message' ? 1 + s.width : s.kind === 'empty-list' ? 0 : 1;
  return n;
}

/** The next free slot, or -1 when msg cannot be a row. */
function writeSteps(steps: readonly Step[], msg: Record<string, unknown>, out: Float64Array, at: number): number {
  for (const s of steps) {
    const v = msg[s.key];
    if (s.kind === 'number') out[at++] = typeof v === 'number' ? v : 0;
    else if (s.kind === 'bool') out[at++] = v === true ? 1 : 0;
    else if (s.kind === 'empty-list') {
      if (Array.isArray(v) && v.length > 0) return -1;
    } else if (v !== null && typeof v === 'object') {
      out[at++] = 1;
      at = writeSteps(s.steps, v as Record<string, unknown>, out, at);
      if (at < 0) return -1;
    } else {
      // Zeroed, not skipped: a row written over another's must not keep its numbers.
      out[at++] = 0;
      out.fill(0, at, at + s.width);
      at += s.width;
    }
  }
  return at;
}

function readSteps(steps: readonly Step[], row: Float64Array, at: number, into: Record<string, unknown>): number {
  for (const s of steps) {
    if (s.kind === 'number') into[s.key] = row[at++];
    else if (s.kind === 'bool') into[s.key] = row[at++] === 1;
    else if (s.kind === 'empty-list') into[s.key] = [];
    else if (row[at++] === 1) {
      const nested: Record<string, unknown> = {};
      into[s.key] = nested;
      at = readSteps(s.steps, row, at, nested);
    } else {
      into[s.key] = null;
      at += s.width;
    }
  }
  return at;
}
