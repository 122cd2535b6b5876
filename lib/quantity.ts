// Exact Kubernetes resource quantities (k8s.io/apimachinery/pkg/api/resource).
//
// Values are held as a bigint count of nano-units, the finest precision the API
// server keeps, so "7910m", "3778260Ki" and "1.5" never pass through a float.
// The formatter reproduces the API server's canonical form, so a value we write
// is stored byte-for-byte as we wrote it and a later comparison stays stable.

export type QuantityFormat = 'DecimalSI' | 'BinarySI' | 'DecimalExponent';

export interface Quantity {
  /** The value in units of 10^-9, rounded away from zero like the API server does. */
  readonly nanos: bigint;
  /** How the value was written; the canonical form keeps this family. */
  readonly format: QuantityFormat;
}

export class QuantityError extends Error {
  override name = 'QuantityError';
}

const BINARY_SUFFIX: Record<string, number> = { Ki: 1, Mi: 2, Gi: 3, Ti: 4, Pi: 5, Ei: 6 };
const DECIMAL_SUFFIX: Record<string, number> = {
  n: -9, u: -6, m: -3, '': 0, k: 3, M: 6, G: 9, T: 12, P: 15, E: 18,
};
const DECIMAL_SUFFIX_BY_EXPONENT = new Map(Object.entries(DECIMAL_SUFFIX).map(([s, e]) => [e, s]));
const BINARY_SUFFIX_BY_POWER = ['', 'Ki', 'Mi', 'Gi', 'Ti', 'Pi', 'Ei'];

// Anything past these bounds is not a node resource and would only let hostile
// input make us build enormous bigints.
const MAX_TEXT_LENGTH = 64;
const MAX_DECIMAL_EXPONENT = 64;

const GRAMMAR = /^([+-]?)(\d+\.?\d*|\.\d+)(Ki|Mi|Gi|Ti|Pi|Ei|[eE][+-]?\d+|[numkMGTPE]?)$/;

const NANO = 1_000_000_000n;
const MAX_BINARY_NANOS = (2n ** 63n - 1n) * NANO;
const pow10 = (n: number): bigint => 10n ** BigInt(n);

/** Divides rounding away from zero, as inf.RoundUp does in the API server. */
function divAwayFromZero(a: bigint, b: bigint): bigint {
  const q = a / b;
  return a % b === 0n ? q : a < 0n ? q - 1n : q + 1n;
}

export function parseQuantity(text: string): Quantity {
  if (typeof text !== 'string') {
    throw new QuantityError(`quantity must be a string, got ${typeof text}`);
  }
  if (text.length === 0 || text.length > MAX_TEXT_LENGTH) {
    throw new QuantityError(`quantity ${JSON.stringify(text.slice(0, MAX_TEXT_LENGTH))} must be 1 to ${MAX_TEXT_LENGTH} characters`);
  }
  const m = GRAMMAR.exec(text);
  if (!m) {
    throw new QuantityError(`quantity ${JSON.stringify(text)} does not match the Kubernetes grammar <sign><digits>[.<digits>]<suffix>`);
  }
  const [, sign = '', number = '', suffix = ''] = m;
  const [whole = '', fraction = ''] = number.split('.');
  let mantissa = BigInt((whole || '0') + fraction);
  let exponent10 = -fraction.length;
  let format: QuantityFormat;

  const binaryPower = BINARY_SUFFIX[suffix];
  if (binaryPower !== undefined) {
    mantissa *= 1024n ** BigInt(binaryPower);
    format = 'BinarySI';
  } else if (suffix.length > 1 && (suffix[0] === 'e' || suffix[0] === 'E')) {
    const e = Number(suffix.slice(1));
    if (Math.abs(e) > MAX_DECIMAL_EXPONENT) {
      throw new QuantityError(`quantity ${JSON.stringify(text)} has exponent ${e}, beyond ±${MAX_DECIMAL_EXPONENT}`);
    }
    exponent10 += e;
    format = 'DecimalExponent';
  } else {
    exponent10 += DECIMAL_SUFFIX[suffix] ?? 0;
    format = 'DecimalSI';
  }

  const shift = exponent10 + 9;
  let nanos = shift >= 0 ? mantissa * pow10(shift) : divAwayFromZero(mantissa, pow10(-shift));
  // The API server caps binary quantities at int64 units ("8Ei" is stored as
  // "9223372036854775807"), and decimal ones not at all.
  if (format === 'BinarySI' && nanos > MAX_BINARY_NANOS) nanos = MAX_BINARY_NANOS;
  if (sign === '-') nanos = -nanos;
  return { nanos, format };
}

/** Whole milli-units, rounded up: what the scheduler and kubelet compare for CPU. */
export function milliValue(q: Quantity): bigint {
  return divAwayFromZero(q.nanos, 1_000_000n);
}

/** Whole units, rounded up: what the scheduler and kubelet compare for memory. */
export function value(q: Quantity): bigint {
  return divAwayFromZero(q.nanos, NANO);
}

/** Splits |nanos| into mantissa * 10^exponent, exponent a multiple of 3, mantissa minimal. */
function canonicalBase10(nanos: bigint): { mantissa: bigint; exponent: number } {
  let mantissa = nanos;
  let exponent = -9;
  while (mantissa !== 0n && mantissa % 1000n === 0n) {
    mantissa /= 1000n;
    exponent += 3;
  }
  return { mantissa, exponent };
}

/** The string the API server would store for this quantity. */
export function formatQuantity(q: Quantity): string {
  if (q.nanos === 0n) return '0';
  const negative = q.nanos < 0n;
  const abs = negative ? -q.nanos : q.nanos;
  const sign = negative ? '-' : '';

  let format = q.format;
  // Small or fractional binary values fall back to decimal, as in CanonicalizeBytes.
  if (format === 'BinarySI' && (abs < 1024n * NANO || abs % NANO !== 0n)) format = 'DecimalSI';

  if (format === 'BinarySI') {
    let units = abs / NANO;
    let power = 0;
    while (power < 6 && units % 1024n === 0n) {
      units /= 1024n;
      power += 1;
    }
    return `${sign}${units}${BINARY_SUFFIX_BY_POWER[power]}`;
  }

  let { mantissa, exponent } = canonicalBase10(abs);
  if (format === 'DecimalExponent') {
    return `${sign}${mantissa}${exponent === 0 ? '' : `e${exponent}`}`;
  }
  while (exponent > 18) {
    mantissa *= 1000n;
    exponent -= 3;
  }
  return `${sign}${mantissa}${DECIMAL_SUFFIX_BY_EXPONENT.get(exponent) ?? ''}`;
}

/** Canonical CPU quantity from millicores: "2" for 2000, "7910m" for 7910. */
export function formatMilli(millis: bigint | number): string {
  return formatQuantity({ nanos: BigInt(millis) * 1_000_000n, format: 'DecimalSI' });
}

/**
 * Canonical memory quantity from bytes: "3778260Ki" for 3868938240, "1500M" for 1.5e9.
 * Binary suffixes only where they are exact: "1500000000" would be re-read by the
 * API server as a decimal quantity and stored as "1500M", a different string.
 */
export function formatBytes(bytes: bigint | number): string {
  const b = BigInt(bytes);
  const binary = b % 1024n === 0n && (b >= 1024n || b <= -1024n);
  return formatQuantity({ nanos: b * NANO, format: binary ? 'BinarySI' : 'DecimalSI' });
}

/** Parses and returns whole millicores, or throws QuantityError naming the field. */
export function parseMilli(text: unknown, field: string): bigint {
  try {
    return milliValue(parseQuantity(text as string));
  } catch (err) {
    throw new QuantityError(`${field}: ${(err as Error).message}`);
  }
}

/** Parses and returns whole bytes, or throws QuantityError naming the field. */
export function parseBytes(text: unknown, field: string): bigint {
  try {
    return value(parseQuantity(text as string));
  } catch (err) {
    throw new QuantityError(`${field}: ${(err as Error).message}`);
  }
}
