// An informer that survives its watch breaking: the error is logged, the
// informer restarts after 5 s, and the objects it last knew stay in force
// meanwhile, so an API server hiccup (or restart) never empties the gateway's
// policies, sidecar templates or node cache. Stopping it ends the retries too:
// informer.stop() aborts the watch, which the informer reports as one more
// error, and a retry after that would start it again.
import type { Informer, KubernetesObject } from '@kubernetes/client-node';
import type { Logger } from './log.js';

export const RETRY_AFTER_MS = 5000;

export interface Watching {
  /** Stops the informer for good: no retry is pending or scheduled after this. */
  stop(): Promise<void>;
}

export async function keepWatching<T extends KubernetesObject>(
  informer: Informer<T>,
  o: {
    /** What is watched, for the log: "OversellPolicy", "sidecar template", "node". */
    what: string;
    log: Logger;
    /** Called on every add, update and delete. */
    onChange?(): void;
    /** The error to throw when the first start fails, from the client's message. */
    cannotStart?(message: string): string;
    retryAfterMs?: number;
  },
): Promise<Watching> {
  const retryAfterMs = o.retryAfterMs ?? RETRY_AFTER_MS;
  let stopped = false;
  let retry: NodeJS.Timeout | undefined;
  if (o.onChange) for (const verb of ['add', 'update', 'delete'] as const) informer.on(verb, o.onChange);
  informer.on('error', (err) => {
    if (stopped) return;
    o.log.warn({ err: String(err) }, `${o.what} watch failed; retrying in ${retryAfterMs / 1000} s (the last known ones stay in force)`);
    clearTimeout(retry);
    retry = setTimeout(() => {
      if (stopped) return;
      informer.start().catch((e: unknown) => o.log.error({ err: String(e) }, `${o.what} watch restart failed`));
    }, retryAfterMs);
    retry.unref();
  });
  try {
    await informer.start();
  } catch (err) {
    throw o.cannotStart ? new Error(o.cannotStart((err as Error).message)) : err;
  }
  return {
    async stop() {
      stopped = true;
      clearTimeout(retry);
      await informer.stop();
    },
  };
}
