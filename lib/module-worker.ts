// A worker thread on one of this program's module files, started the same way
// built (dist/, plain .js) and from source (tests and bench, under tsx): the
// caller names the module's .js URL, which tsx maps to the .ts beside it.
//
// From source the worker needs tsx's hooks, and on Node 20 it does not get
// them: a worker runs without the main thread's module hooks, and tsx's own
// `--import tsx` registers nothing off the main thread before Node 22.22. So
// a worker started from source imports register-tsx.mjs first, which
// registers them in the worker; built, nothing is added.
import { Worker, type WorkerOptions } from 'node:worker_threads';

// Whether this program runs from source: this module is a .ts file then.
const FROM_SOURCE = import.meta.url.endsWith('.ts');

export function moduleWorker(entry: URL, options: Omit<WorkerOptions, 'eval' | 'execArgv'> = {}): Worker {
  if (!entry.pathname.endsWith('.js')) throw new Error(`moduleWorker: ${entry.href} is not a .js module URL; name the built file (from source tsx maps it to the .ts)`);
  if (!FROM_SOURCE) return new Worker(entry, options);
  // Only this flag: the parent's V8 flags (--expose-gc, --max-old-space-size)
  // are process-wide, so they apply already, and a worker refuses them in execArgv.
  return new Worker(entry, { ...options, execArgv: ['--import', new URL('./register-tsx.mjs', import.meta.url).href] });
}
