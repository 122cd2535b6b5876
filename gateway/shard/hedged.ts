// Asking a node's owners, best first, within one deadline, so that an owner
// that is listed but does not answer (stopped, stalled, cut off, until its
// readiness changes) costs a share of the deadline, not all of it. Each owner
// asked has a share, deadline / (2 x owners), before the next is asked too (at
// once when it fails); the first answer is taken and the other requests are
// ended. The last owner is asked within half the deadline and keeps at least
// the other half. In the usual case the first owner answers within its share,
// and it is the only request.

/** Each of `ways` owners' share of `deadlineMs` before the next is asked too. */
export const shareOf = (deadlineMs: number, ways: number): number => deadlineMs / (2 * Math.max(1, ways));

/** What asking the owners came to: the first answer taken, if any, and every owner asked that did not give it, with why. */
export interface Hedged<T, A> {
  answer?: { from: T; value: A };
  failed: Array<{ target: T; why: string }>;
}

/**
 * Asks `targets` in order as above, within `deadlineMs`. `ask` resolves to
 * the answer, or to undefined when the target answered without it (it does
 * not hold what was asked: the next is asked at once, and that is no
 * failure); it ends its request when `signal` aborts.
 */
export function firstAnswer<T, A>(
  targets: readonly T[],
  ask: (target: T, o: { timeoutMs: number; signal: AbortSignal }) => Promise<A | undefined>,
  deadlineMs: number,
): Promise<Hedged<T, A>> {
  const shareMs = shareOf(deadlineMs, targets.length);
  const started = Date.now();
  const until = started + deadlineMs;
  const failed: Hedged<T, A>['failed'] = [];
  const asking = new Map<T, { since: number; abort: AbortController }>();
  let next = 0;
  let done = false;
  let hedge: NodeJS.Timeout | undefined;
  let deadline: NodeJS.Timeout | undefined;
  return new Promise((resolve) => {
    const finish = (answer?: { from: T; value: A }) => {
      if (done) return;
      done = true;
      clearTimeout(hedge);
      clearTimeout(deadline);
      const now = Date.now();
      for (const [target, a] of asking) {
        failed.push({ target, why: answer ? `no answer within ${now - a.since} ms, when another owner answered` : `no answer within ${deadlineMs} ms` });
        a.abort.abort();
      }
      asking.clear();
      if (!answer) for (const target of targets.slice(next)) failed.push({ target, why: `not asked, the ${deadlineMs} ms were spent` });
      resolve({ ...(answer && { answer }), failed });
    };
    const askNext = () => {
      clearTimeout(hedge);
      if (done) return;
      const left = until - Date.now();
      if (next >= targets.length || left <= 0) {
        if (asking.size === 0) finish();
        return;
      }
      const target = targets[next++]!;
      const abort = new AbortController();
      asking.set(target, { since: Date.now(), abort });
      if (next < targets.length) hedge = setTimeout(askNext, shareMs);
      ask(target, { timeoutMs: left, signal: abort.signal }).then(
        (value) => {
          if (done) return;
          asking.delete(target);
          if (value !== undefined) finish({ from: target, value });
          else askNext();
        },
        (err: Error) => {
          if (done) return;
          asking.delete(target);
          failed.push({ target, why: err.message });
          askNext();
        },
      );
    };
    deadline = setTimeout(() => finish(), deadlineMs);
    askNext();
  });
}
