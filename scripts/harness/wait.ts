// Shared by scripts, tests, e2e and benchmarks: polling for a condition, and a free port.
import { createServer } from 'node:net';

/** Polls check until it returns a value (not undefined); fails after timeoutMs with the last error. */
export async function waitUntil<T>(what: string, check: () => Promise<T | undefined> | T | undefined, timeoutMs = 5000, everyMs = 50): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  while (Date.now() < deadline) {
    try {
      const v = await check();
      if (v !== undefined) return v;
    } catch (err) {
      last = err;
    }
    await new Promise((r) => setTimeout(r, everyMs));
  }
  throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}${last ? `: ${String((last as Error).message ?? last)}` : ''}`);
}

/** A port nothing listens on right now, on 127.0.0.1. */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.on('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const a = s.address();
      const port = typeof a === 'object' && a ? a.port : 0;
      s.close(() => resolve(port));
    });
  });
}
