// An informer that survives its watch breaking: the error is logged, the
// informer restarts after 5 s, and the objects it last knew stay in force
// meanwhile, so an API server hiccup never empties the gateway's policies or
// sidecar templates.
import type { Informer, KubernetesObject } from '@kubernetes/client-node';
import type { Logger } from '../lib/log.js';

export async function keepWatching<T extends KubernetesObject>(
  informer: Informer<T>,
  o: {
    /** What is watched, for the log: "OversellPolicy", "sidecar template". */
    what: string;
    log: Logger;
    /** Called on every add, update and delete. */
    onChange(): void;
    /** The error to throw when the first list fails, from the client's message. */
    cannotStart(message: string): string;
  },
): Promise<void> {
  for (const verb of ['add', 'update', 'delete'] as const) informer.on(verb, o.onChange);
  informer.on('error', (err) => {
    o.log.warn({ err: String(err) }, `${o.what} watch failed; retrying in 5 s (the last known ones stay in force)`);
    setTimeout(() => informer.start().catch((e: unknown) => o.log.error({ err: String(e) }, `${o.what} watch restart failed`)), 5000).unref();
  });
  try {
    await informer.start();
  } catch (err) {
    throw new Error(o.cannotStart((err as Error).message));
  }
}
