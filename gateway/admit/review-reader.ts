// Reads a nodes/status AdmissionReview without building what the webhook never
// looks at. A kubelet status review is ~36 KB, and most of it is the oldObject
// and 50 container images on both objects; JSON.parse of all of it was the
// largest share of the gateway's CPU per review. This reader walks the text,
// builds only the fields named in a Fields tree (JSON.parse on each kept
// value's text), and skips the rest by matching brackets and strings.
//
// For every field it keeps, the result equals what JSON.parse gives (last
// duplicate key wins, escapes decoded). Skipped parts are checked for
// structure (brackets, strings, literals, numbers' characters) but never
// materialized, so they can pollute nothing; keys it does decode may not be
// "__proto__", as with fastify's default parser.
import sjson from 'secure-json-parse';

/** Which members to build: true keeps a member's whole value, a nested Fields reads into it. */
export interface Fields {
  readonly [key: string]: true | Fields;
}

/** The body is not JSON the reader accepts; the webhook answers 400 with this message. */
export class ReviewSyntaxError extends Error {
  override name = 'ReviewSyntaxError';
  readonly statusCode = 400;
}

/** What reviewNode() reads of a review: node-review.ts and admission-review.ts. */
export const NODE_REVIEW_FIELDS: Fields = {
  apiVersion: true,
  kind: true,
  request: {
    uid: true, kind: true, resource: true, subResource: true, operation: true, name: true, namespace: true, userInfo: true, dryRun: true,
    object: { metadata: { name: true, labels: true, annotations: true }, status: { allocatable: true, capacity: true } },
  },
};

const SPACE = 0x20, TAB = 0x09, LF = 0x0a, CR = 0x0d;
const QUOTE = 0x22, BACKSLASH = 0x5c, COMMA = 0x2c, COLON = 0x3a;
const LBRACE = 0x7b, RBRACE = 0x7d, LBRACKET = 0x5b, RBRACKET = 0x5d;
/** Deeper than any Kubernetes object; bounds the bracket stack of a hostile body. */
const MAX_DEPTH = 512;

/** `body` read per `fields`; a body that is not a JSON object is parsed whole, so the caller sees what it is. */
export function readJsonFields(body: Buffer, fields: Fields): unknown {
  // Bytes, not a decoded string: Buffer.indexOf finds the end of a string at
  // memchr speed, and only the kept values are ever decoded.
  let start = body[0] === 0xef && body[1] === 0xbb && body[2] === 0xbf ? 3 : 0;
  start = skipSpace(body, start);
  if (start >= body.length) throw new ReviewSyntaxError('body is empty; expected a JSON AdmissionReview');
  if (body[start] !== LBRACE) return parseKept(body, start, body.length);
  const reader = { at: start };
  const value = readObject(body, reader, fields, 1);
  const rest = skipSpace(body, reader.at);
  if (rest !== body.length) fail(body, rest, 'data after the end of the JSON object');
  return value;
}

function readObject(body: Buffer, r: { at: number }, fields: Fields, depth: number): Record<string, unknown> {
  if (depth > MAX_DEPTH) fail(body, r.at, `nesting deeper than ${MAX_DEPTH}`);
  const out: Record<string, unknown> = {};
  let i = skipSpace(body, r.at + 1);
  if (body[i] === RBRACE) {
    r.at = i + 1;
    return out;
  }
  for (;;) {
    if (body[i] !== QUOTE) fail(body, i, 'expected a member name in double quotes');
    const keyEnd = stringEnd(body, i);
    const key = decodeKey(body, i, keyEnd);
    i = skipSpace(body, keyEnd);
    if (body[i] !== COLON) fail(body, i, `expected ':' after "${key.slice(0, 40)}"`);
    i = skipSpace(body, i + 1);
    const wanted = Object.hasOwn(fields, key) ? fields[key] : undefined;
    if (wanted === undefined) {
      i = skipValue(body, i, depth);
    } else if (wanted === true || body[i] !== LBRACE) {
      const end = skipValue(body, i, depth);
      out[key] = parseKept(body, i, end);
      i = end;
    } else {
      r.at = i;
      out[key] = readObject(body, r, wanted, depth + 1);
      i = r.at;
    }
    i = skipSpace(body, i);
    const c = body[i];
    if (c === COMMA) {
      i = skipSpace(body, i + 1);
    } else if (c === RBRACE) {
      r.at = i + 1;
      return out;
    } else {
      fail(body, i, "expected ',' or '}' after a member");
    }
  }
}

function decodeKey(body: Buffer, start: number, end: number): string {
  const raw = body.toString('utf8', start + 1, end - 1);
  const key = raw.includes('\\') ? (parseKept(body, start, end) as string) : raw;
  if (key === '__proto__') throw new ReviewSyntaxError('body contains a "__proto__" member (prototype poisoning); refused');
  return key;
}

/** A kept value: JSON.parse semantics, with fastify's prototype-poisoning checks. */
function parseKept(body: Buffer, start: number, end: number): unknown {
  const text = body.toString('utf8', start, end);
  try {
    // A poisoning key is spelled out or written with \u escapes: only then are
    // secure-json-parse's scans worth their cost.
    const suspect = text.includes('__proto__') || text.includes('constructor') || text.includes('\\u');
    return suspect ? sjson.parse(text) : JSON.parse(text);
  } catch (err) {
    throw new ReviewSyntaxError(`body is not valid JSON: ${(err as Error).message}`);
  }
}

function skipSpace(body: Buffer, i: number): number {
  for (;;) {
    const c = body[i];
    if (c !== SPACE && c !== LF && c !== CR && c !== TAB) return i;
    i += 1;
  }
}

/** Index after the closing quote of the string opening at `start`. */
function stringEnd(body: Buffer, start: number): number {
  let q = start;
  for (;;) {
    q = body.indexOf(QUOTE, q + 1);
    if (q < 0) fail(body, start, 'unterminated string');
    // The quote is escaped when an odd number of backslashes precede it.
    let b = q - 1;
    while (body[b] === BACKSLASH) b -= 1;
    if ((q - 1 - b) % 2 === 0) return q + 1;
  }
}

/** Index after the value starting at `i`, built into nothing. */
function skipValue(body: Buffer, i: number, depth: number): number {
  const c = body[i] ?? -1;
  if (c === QUOTE) return stringEnd(body, i);
  if (c === LBRACE || c === LBRACKET) return skipContainer(body, i, depth);
  let j = i;
  while (j < body.length && isScalarChar(body[j]!)) j += 1;
  const word = body.toString('latin1', i, j);
  if (word === 'true' || word === 'false' || word === 'null' || (j > i && isNumberStart(c))) return j;
  return fail(body, i, j > i ? `unexpected "${word.slice(0, 20)}"` : 'expected a value');
}

function skipContainer(body: Buffer, start: number, depth: number): number {
  // Open brackets not yet closed are kept by kind, to refuse `{]`.
  const open: number[] = [];
  const n = body.length;
  let i = start;
  while (i < n) {
    const c = body[i]!;
    if (c === QUOTE) {
      i = stringEnd(body, i);
      continue;
    }
    if (c === LBRACE || c === LBRACKET) {
      if (depth + open.length >= MAX_DEPTH) fail(body, i, `nesting deeper than ${MAX_DEPTH}`);
      open.push(c);
    } else if (c === RBRACE || c === RBRACKET) {
      if (open.pop() !== (c === RBRACE ? LBRACE : LBRACKET)) fail(body, i, `unbalanced '${String.fromCharCode(c)}'`);
      if (open.length === 0) return i + 1;
    } else if (!isScalarChar(c) && c !== COMMA && c !== COLON && c !== SPACE && c !== LF && c !== CR && c !== TAB) {
      fail(body, i, `unexpected byte 0x${c.toString(16)}`);
    }
    i += 1;
  }
  return fail(body, start, 'unterminated object or array');
}

// Letters of true/false/null and the characters of numbers.
function isScalarChar(c: number): boolean {
  return (c >= 0x30 && c <= 0x39) || c === 0x2d || c === 0x2b || c === 0x2e || (c >= 0x61 && c <= 0x7a) || c === 0x45;
}

function isNumberStart(c: number): boolean {
  return (c >= 0x30 && c <= 0x39) || c === 0x2d;
}

function fail(body: Buffer, at: number, what: string): never {
  throw new ReviewSyntaxError(`body is not valid JSON: ${what} at byte ${Math.min(at, body.length)}`);
}
