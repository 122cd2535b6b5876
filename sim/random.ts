// Seeded randomness. Two kinds, because the policies are compared on the same
// workload: a stream (Rng) for what is drawn once, in order, before any policy
// runs (job arrivals, a pod's usage profile), and a counter-based hash (noise)
// for what a pod does at a given moment, so a pod bursts at the same seconds
// whichever policy placed it and whenever it was asked.

/** splitmix32 step: a full-period, well-mixed 32-bit generator. */
function mix32(x: number): number {
  x = Math.imul(x ^ (x >>> 16), 0x21f0aaad);
  x = Math.imul(x ^ (x >>> 15), 0x735a2d97);
  return (x ^ (x >>> 15)) >>> 0;
}

/** A number in [0, 1) that depends only on its arguments. */
export function noise(a: number, b: number, c = 0): number {
  return mix32(mix32(mix32(a ^ 0x9e3779b9) ^ b) + c) / 4294967296;
}

export class Rng {
  #state: number;

  constructor(seed: number) {
    this.#state = mix32(seed >>> 0 || 0x6d2b79f5);
  }

  /** Uniform in [0, 1). */
  next(): number {
    this.#state = (this.#state + 0x9e3779b9) >>> 0;
    return mix32(this.#state) / 4294967296;
  }

  /** A generator of its own, for one consumer, so adding draws elsewhere does not shift this one's. */
  fork(label: number): Rng {
    return new Rng(mix32(this.#state ^ mix32(label)));
  }

  /** Exponential with the given mean. */
  exponential(mean: number): number {
    return -Math.log(1 - this.next()) * mean;
  }

  normal(): number {
    // Box-Muller; 1 - u keeps the log finite.
    return Math.sqrt(-2 * Math.log(1 - this.next())) * Math.cos(2 * Math.PI * this.next());
  }

  /** Gamma(shape, 1), Marsaglia and Tsang; shape < 1 by the boost u^(1/shape). */
  gamma(shape: number): number {
    if (shape < 1) return this.gamma(shape + 1) * this.next() ** (1 / shape);
    const d = shape - 1 / 3;
    const c = 1 / Math.sqrt(9 * d);
    for (;;) {
      const x = this.normal();
      const v = (1 + c * x) ** 3;
      if (v <= 0) continue;
      const u = this.next();
      if (Math.log(u) < 0.5 * x * x + d - d * v + d * Math.log(v)) return d * v;
    }
  }

  /** Beta with the given mean and concentration (a + b): larger is narrower. */
  beta(mean: number, concentration: number): number {
    const a = this.gamma(mean * concentration);
    const b = this.gamma((1 - mean) * concentration);
    return a / (a + b);
  }
}
