// Linux keeps a nice value per thread, not per process: a worker thread can
// lower its own priority so that, when the process's CPU is short (its
// cgroup's quota spent, or the node busy), the kernel runs the main thread
// first. setpriority(2) with a thread id changes that thread alone.
import { readlinkSync } from 'node:fs';
import { setPriority } from 'node:os';

/** The calling thread's kernel id (/proc/thread-self is "<pid>/task/<tid>"); undefined where there is no such file. */
export function kernelThreadId(): number | undefined {
  try {
    const tid = Number(readlinkSync('/proc/thread-self').split('/').pop());
    return Number.isInteger(tid) && tid > 0 ? tid : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Sets the calling thread's nice value (raising it needs no privilege) and
 * returns the thread id it changed, or undefined where threads have no ids of
 * their own to set (not Linux).
 */
export function niceThisThread(nice: number): number | undefined {
  const tid = kernelThreadId();
  if (tid === undefined) return undefined;
  setPriority(tid, nice);
  return tid;
}
