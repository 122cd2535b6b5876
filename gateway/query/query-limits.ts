// What any query caller can hold on a replica: watches per caller and in
// all, and lists whose answers are being computed or sent. A caller allowed
// only to read must not be able to take the replica (and with it the webhook)
// down by opening streams it never reads.
import * as grpc from '@grpc/grpc-js';

export interface QueryLimits {
  /** Open WatchNodes streams of one caller (a user; in local mode, one connection). */
  watchesPerCaller: number;
  /** Open WatchNodes streams on this replica. */
  watches: number;
  /** ListNodes / ListNodeSummaries answers being computed or sent at once on this replica. */
  listsInFlight: number;
  /** A watch whose client reads nothing for this long is ended (slow-reader). */
  watchStallMs: number;
}

/** The `reason` label of oversell_query_refusals_total. */
export type QueryRefusal = 'watches-per-caller' | 'watches' | 'lists-in-flight';

export const DEFAULT_QUERY_LIMITS: QueryLimits = { watchesPerCaller: 8, watches: 128, listsInFlight: 16, watchStallMs: 30_000 };

/** Watch slots: taken when a watch starts, given back when it ends. */
export class WatchSlots {
  readonly #byCaller = new Map<string, number>();
  #total = 0;

  constructor(
    private readonly limits: Pick<QueryLimits, 'watches' | 'watchesPerCaller'>,
    private readonly onRefused?: (reason: QueryRefusal) => void,
  ) {}

  /** A release function, or the status to refuse the watch with. */
  take(caller: string): (() => void) | grpc.StatusObject {
    const mine = this.#byCaller.get(caller) ?? 0;
    if (mine >= this.limits.watchesPerCaller) {
      this.onRefused?.('watches-per-caller');
      return exhausted(`too many watches: ${caller} already has ${mine} open on this replica (limit ${this.limits.watchesPerCaller}, --query-watches-per-caller); close watches it no longer reads, or share one watch`);
    }
    if (this.#total >= this.limits.watches) {
      this.onRefused?.('watches');
      return exhausted(`too many watches: this replica already serves ${this.#total} (limit ${this.limits.watches}, --query-watches); retry later, poll with ListNodeSummaries, or raise --query-watches`);
    }
    this.#byCaller.set(caller, mine + 1);
    this.#total += 1;
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.#total -= 1;
      const left = (this.#byCaller.get(caller) ?? 1) - 1;
      if (left > 0) this.#byCaller.set(caller, left);
      else this.#byCaller.delete(caller);
    };
  }
}

function exhausted(details: string): grpc.StatusObject {
  return { code: grpc.status.RESOURCE_EXHAUSTED, details, metadata: new grpc.Metadata() };
}

/**
 * Lists in flight, counted from the call's start until its status is sent
 * (grpc-js sends a unary call's status once its answer is written out) or the
 * call is cancelled: an answer a client never reads stays counted, so
 * unread 10,000-node answers cannot pile up in the gateway.
 */
export function listLimitInterceptor(methods: ReadonlySet<string>, limit: number, onRefused?: (reason: QueryRefusal) => void): grpc.ServerInterceptor {
  let inFlight = 0;
  return (method, call) => {
    if (!methods.has(method.path)) return new grpc.ServerInterceptingCall(call);
    let held = false;
    const release = () => {
      if (!held) return;
      held = false;
      inFlight -= 1;
    };
    return new grpc.ServerInterceptingCall(call, {
      start(next) {
        next({
          onReceiveMetadata(metadata, nextMetadata) {
            if (inFlight >= limit) {
              onRefused?.('lists-in-flight');
              call.sendStatus(exhausted(`too many lists: this replica is already answering ${inFlight} (limit ${limit}, --query-lists-in-flight); retry with backoff, and read each answer`));
              return;
            }
            held = true;
            inFlight += 1;
            nextMetadata(metadata);
          },
          onCancel: release,
        });
      },
      sendStatus(status, next) {
        release();
        next(status);
      },
    });
  };
}

/**
 * Refuses every call under prefix (the query API) while refuse() gives a
 * reason, before any other work is done for it (token review, list slots):
 * the thread that answers queries answers the webhook too, and a review must
 * not wait behind them. Other services on the port (agent streams, health)
 * pass.
 */
export function overloadInterceptor(prefix: string, refuse: () => string | undefined): grpc.ServerInterceptor {
  return (method, call) => {
    if (!method.path.startsWith(prefix)) return new grpc.ServerInterceptingCall(call);
    return new grpc.ServerInterceptingCall(call, {
      start(next) {
        next({
          onReceiveMetadata(metadata, nextMetadata) {
            const why = refuse();
            if (why !== undefined) return call.sendStatus(exhausted(why));
            nextMetadata(metadata);
          },
        });
      },
    });
  };
}
