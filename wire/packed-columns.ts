// A codec for a message made only of repeated fields: a table sent column by
// column (NodeSummaries). protobufjs handles each element of a packed field as
// an operation of its own when encoding and makes a Long object per 64-bit
// element when decoding.
// These loops write and read the same wire format between plain arrays and
// bytes. Field numbers and types come from the loaded descriptor, never from a
// copy by hand; bytes are identical to protobufjs' (tested).

type Kind = 'string' | 'bool' | 'uint32' | 'int64' | 'double';

interface Column {
  key: string;
  number: number;
  kind: Kind;
}

const KINDS: Record<string, Kind> = { TYPE_STRING: 'string', TYPE_BOOL: 'bool', TYPE_UINT32: 'uint32', TYPE_INT64: 'int64', TYPE_DOUBLE: 'double' };

/** A field as proto-loader's MessageTypeDefinition describes it (a DescriptorProto field). */
export interface FieldDescriptor {
  name: string;
  number: number;
  label: string;
  type: string;
  /** For message fields: absolute (leading dot) or relative to the enclosing scopes. */
  typeName?: string;
}

/** The fields of a proto-loader MessageTypeDefinition; `name` says which one in the error. */
export function fieldsOf(definition: unknown, name?: string): FieldDescriptor[] {
  const fields = (definition as { type?: { field?: FieldDescriptor[] } } | undefined)?.type?.field;
  if (!fields) throw new Error(`not a message type definition${name ? `: ${name}` : ''}`);
  return fields;
}

/** The columns of a proto-loader MessageTypeDefinition; throws for a field this codec cannot carry. */
export function columnsOf(definition: unknown): Column[] {
  return fieldsOf(definition)
    .map((f) => {
      const kind = KINDS[f.type];
      if (f.label !== 'LABEL_REPEATED' || !kind) throw new Error(`field ${f.name}: only repeated ${Object.keys(KINDS).join(', ')} fields are columns`);
      return { key: f.name, number: f.number, kind };
    })
    .sort((a, b) => a.number - b.number);
}

const TWO_32 = 4294967296;

class Writer {
  buf = Buffer.allocUnsafe(64 * 1024);
  pos = 0;

  ensure(n: number): void {
    if (this.pos + n <= this.buf.length) return;
    const bigger = Buffer.allocUnsafe(Math.max(this.buf.length * 2, this.pos + n));
    this.buf.copy(bigger, 0, 0, this.pos);
    this.buf = bigger;
  }

  /** A non-negative integer below 2^53. */
  varint(v: number): void {
    this.ensure(10);
    while (v >= 0x80) {
      this.buf[this.pos++] = (v % 128) | 0x80;
      v = Math.floor(v / 128);
    }
    this.buf[this.pos++] = v;
  }

  /** int64 as protobuf writes it: negative numbers as 64-bit two's complement (10 bytes). */
  int64(v: number): void {
    const t = Number.isNaN(v) ? 0 : Math.trunc(v);
    if (t >= 0 && t < Number.MAX_SAFE_INTEGER) {
      this.varint(t);
      return;
    }
    // Out of range saturates, as Long.fromNumber does.
    const big = t >= 2 ** 63 ? 2n ** 63n - 1n : t <= -(2 ** 63) ? -(2n ** 63n) : BigInt(t);
    let u = BigInt.asUintN(64, big);
    this.ensure(10);
    while (u >= 0x80n) {
      this.buf[this.pos++] = Number(u & 0x7fn) | 0x80;
      u >>= 7n;
    }
    this.buf[this.pos++] = Number(u);
  }

  /** One packed column's values, in a loop per kind: a switch per value cost a third of the encode. */
  values(kind: Exclude<Kind, 'string'>, column: readonly unknown[]): void {
    const n = column.length;
    this.ensure(n * (kind === 'double' ? 8 : 10));
    let buf = this.buf;
    let pos = this.pos;
    switch (kind) {
      case 'bool':
        for (let i = 0; i < n; i++) buf[pos++] = column[i] ? 1 : 0;
        break;
      case 'double':
        for (let i = 0; i < n; i++) pos = buf.writeDoubleLE(Number(column[i]), pos);
        break;
      case 'uint32':
      case 'int64':
        for (let i = 0; i < n; i++) {
          const v = Number(column[i]);
          let t = kind === 'uint32' ? v >>> 0 : Number.isNaN(v) ? 0 : Math.trunc(v);
          if (t < 0 || t >= Number.MAX_SAFE_INTEGER) {
            this.pos = pos;
            this.int64(t);
            pos = this.pos;
            buf = this.buf;
            continue;
          }
          while (t >= 0x80) {
            buf[pos++] = (t % 128) | 0x80;
            t = Math.floor(t / 128);
          }
          buf[pos++] = t;
        }
    }
    this.pos = pos;
  }
}

/** Serializer of `{ [column]: values[] }`; absent and empty columns are left out, as protobufjs does. */
export function packedColumnsSerializer<T extends object>(columns: readonly Column[]): (message: T) => Buffer {
  return (message) => {
    const w = new Writer();
    const values = new Writer(); // one packed field's payload, before its length is known
    const record = message as Record<string, unknown>;
    for (const c of columns) {
      const column = record[c.key];
      if (!Array.isArray(column) || column.length === 0) continue;
      if (c.kind === 'string') {
        for (const s of column) {
          const text = String(s);
          const length = Buffer.byteLength(text);
          w.varint((c.number << 3) | 2);
          w.varint(length);
          w.ensure(length);
          w.pos += w.buf.write(text, w.pos, 'utf8');
        }
        continue;
      }
      values.pos = 0;
      values.values(c.kind, column);
      w.varint((c.number << 3) | 2);
      w.varint(values.pos);
      w.ensure(values.pos);
      values.buf.copy(w.buf, w.pos, 0, values.pos);
      w.pos += values.pos;
    }
    return w.buf.subarray(0, w.pos);
  };
}

class Reader {
  pos = 0;
  constructor(readonly buf: Buffer) {}

  /** Low 32 bits in lo, high in hi: a varint may be 64 bits. */
  lo = 0;
  hi = 0;
  varint64(): void {
    let lo = 0;
    let hi = 0;
    let shift = 0;
    let b: number;
    do {
      if (this.pos >= this.buf.length) throw new RangeError('truncated varint');
      b = this.buf[this.pos++]!;
      if (shift < 28) lo |= (b & 0x7f) << shift;
      else if (shift === 28) {
        lo |= (b & 0x0f) << 28;
        hi |= (b & 0x7f) >> 4;
      } else hi |= (b & 0x7f) << (shift - 32);
      shift += 7;
    } while (b & 0x80 && shift < 70);
    this.lo = lo >>> 0;
    this.hi = hi >>> 0;
  }

  uint32(): number {
    this.varint64();
    return this.lo;
  }

  /** Signed 64-bit as a number, as protobufjs gives it with longs: Number. */
  int64(): number {
    this.varint64();
    if (this.hi >>> 31) {
      const lo = (~this.lo + 1) >>> 0;
      let hi = ~this.hi >>> 0;
      if (!lo) hi = (hi + 1) >>> 0;
      return -(lo + hi * TWO_32);
    }
    return this.lo + this.hi * TWO_32;
  }

  value(kind: Exclude<Kind, 'string'>): number | boolean {
    switch (kind) {
      case 'bool':
        this.varint64();
        return this.lo !== 0 || this.hi !== 0;
      case 'uint32':
        return this.uint32();
      case 'int64':
        return this.int64();
      case 'double': {
        if (this.pos + 8 > this.buf.length) throw new RangeError('truncated double');
        const v = this.buf.readDoubleLE(this.pos);
        this.pos += 8;
        return v;
      }
    }
  }

  skip(wireType: number): void {
    if (wireType === 0) this.varint64();
    else if (wireType === 1) this.pos += 8;
    else if (wireType === 2) {
      const length = this.uint32();
      this.pos += length;
    }
    else if (wireType === 5) this.pos += 4;
    else throw new RangeError(`unsupported wire type ${wireType}`);
  }
}

/**
 * Deserializer to `{ [column]: values[] }` with every column present (as
 * proto-loader's `defaults: true`), 64-bit integers as numbers. Accepts packed
 * and unpacked encodings of scalar columns, as protobuf parsers must.
 */
export function packedColumnsDeserializer<T>(columns: readonly Column[]): (bytes: Buffer) => T {
  const byNumber = new Map(columns.map((c) => [c.number, c]));
  return (bytes) => {
    const out: Record<string, Array<string | number | boolean>> = {};
    for (const c of columns) out[c.key] = [];
    const r = new Reader(bytes);
    while (r.pos < bytes.length) {
      const tag = r.uint32();
      const wireType = tag & 7;
      const c = byNumber.get(tag >>> 3);
      if (!c) {
        r.skip(wireType);
        continue;
      }
      const column = out[c.key]!;
      if (c.kind === 'string') {
        if (wireType !== 2) throw new RangeError(`field ${c.key}: wire type ${wireType} for a string`);
        const length = r.uint32();
        column.push(bytes.toString('utf8', r.pos, r.pos + length));
        r.pos += length;
      } else if (wireType === 2) {
        const length = r.uint32();
        const end = r.pos + length;
        while (r.pos < end) column.push(r.value(c.kind));
      } else {
        column.push(r.value(c.kind));
      }
    }
    if (r.pos > bytes.length) throw new RangeError('truncated message');
    return out as T;
  };
}
