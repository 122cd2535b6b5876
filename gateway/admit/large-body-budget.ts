// Per caller, how many bytes of large webhook bodies the gateway reads a
// second. Parsing is the main thread's work: one caller posting 1.5 MiB pod
// reviews twice a second held it 80 ms at a time. The API server's reviews are
// tens of KiB (a node with 50 images is 36 KB), so a budget on bodies over
// LARGE_BODY_BYTES only meets a caller that is not the API server, or one
// whose objects are as large as etcd allows, many a second.
import type { FastifyInstance } from 'fastify';
import { TokenBucket } from '../../lib/token-bucket.js';

export interface LargeBodyBudgetOptions {
  /** Bodies up to this size are never counted (default 256 KiB). */
  largeBytes?: number;
  /** Bytes of large bodies one caller may send a second (default 4 MiB: under a fifth of a core of parsing). */
  bytesPerSecond?: number;
  /** Bytes of large bodies one caller may send at once (default 16 MiB; above the body limit, so one largest review always fits). */
  burstBytes?: number;
  /** Callers remembered; the oldest is forgotten past this (default 4,096). */
  maxCallers?: number;
  now?: () => number;
}

export const LARGE_BODY_BYTES = 256 * 1024;

export class LargeBodyBudget {
  readonly #largeBytes: number;
  readonly #perSecond: number;
  readonly #burst: number;
  readonly #maxCallers: number;
  readonly #now: () => number;
  readonly #callers = new Map<string, TokenBucket>();

  constructor(o: LargeBodyBudgetOptions = {}) {
    this.#largeBytes = o.largeBytes ?? LARGE_BODY_BYTES;
    this.#perSecond = o.bytesPerSecond ?? 4 * 1024 * 1024;
    this.#burst = o.burstBytes ?? 16 * 1024 * 1024;
    this.#maxCallers = o.maxCallers ?? 4096;
    this.#now = o.now ?? Date.now;
  }

  get largeBytes(): number {
    return this.#largeBytes;
  }

  /** Whether `caller` may send a body of `bytes` now; a large one is charged to it. */
  admit(caller: string, bytes: number): boolean {
    if (bytes <= this.#largeBytes) return true;
    let bucket = this.#callers.get(caller);
    if (!bucket) {
      if (this.#callers.size >= this.#maxCallers) this.#callers.delete(this.#callers.keys().next().value as string);
      bucket = new TokenBucket(this.#perSecond, this.#burst, this.#now);
      this.#callers.set(caller, bucket);
    }
    return bucket.take(bytes);
  }
}

/**
 * Refuses, before its body is read, a request whose declared size is over the
 * caller's budget: 429 with what to do. A body without a Content-Length is
 * counted at the body limit (the API server always sends one).
 */
export function limitLargeBodies(app: FastifyInstance, budget: LargeBodyBudget, onRefused: () => void): void {
  app.addHook('onRequest', async (request, reply) => {
    if (request.method !== 'POST') return;
    const declared = Number(request.headers['content-length']);
    const limit = app.initialConfig.bodyLimit ?? Number.POSITIVE_INFINITY;
    // Past the body limit it is refused with 413 unread: the same answer whatever the budget, and nothing to charge for.
    if (declared > limit) return;
    const bytes = Number.isFinite(declared) ? declared : limit;
    if (budget.admit(request.ip, bytes)) return;
    onRefused();
    return reply
      .code(429)
      .header('retry-after', '1')
      .send({ message: `too many large bodies from ${request.ip}: bodies over ${budget.largeBytes} bytes are limited per caller, so that one caller cannot hold the gateway's main thread; the API server's reviews are far smaller` });
  });
}
