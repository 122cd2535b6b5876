// Every stream a gRPC server of the gateway serves, whatever service it
// belongs to, is counted against a limit and ended when its client stops
// reading: a server interceptor, so a service added to a server (grpc-health-
// check's Health/Watch, the reflection service's ServerReflectionInfo, ours)
// is guarded without changes of its own.
//
// Counted: a connection holds at most perConnection of the guarded streams,
// a server at most `total`; past either the stream is refused with
// RESOURCE_EXHAUSTED before its handler runs. A stream stays counted until
// grpc-js reports it over (its status sent or the HTTP/2 stream closed): one
// the gateway ended but whose client neither reads its status nor cancels
// still holds its HTTP/2 stream, and is still counted.
//
// Ended: a response message the client has not taken for stallMs (HTTP/2 flow
// control holds it: the client reads nothing) ends the stream with
// RESOURCE_EXHAUSTED, and its handler hears a cancel, so it stops writing
// (Health/Watch's watcher is removed) and what it had queued is dropped. On a
// bidirectional stream the next request reaches the handler only once the
// responses written so far are taken, so a client sending requests and reading
// nothing queues one request's answer, not one per request (reflection answers
// a small request with kilobytes of descriptors). Together, what a stream
// holds is bounded by what its service writes in stallMs on its own (Health:
// a status a second at most) plus one request's answer.
//
// Methods whose handlers limit and end their own streams (WatchNodes:
// --query-watches-per-caller, --query-watches, --query-watch-stall, with
// changes coalesced per node) pass through; agent streams are ended when
// unread but not counted here (one per node, superseded by the node's next;
// HTTP/2's 100 streams a connection and --max-connections bound them).
import * as grpc from '@grpc/grpc-js';

export interface StreamLimits {
  /** Counted streams one connection may hold open on a server. */
  perConnection: number;
  /** Counted streams a server holds open, every connection together. */
  total: number;
  /** A stream whose client takes no message for this long while one waits for it is ended. */
  stallMs: number;
}

/** 4 a connection: a gRPC client health-checks once a connection per service name, grpcurl reflects on one stream. */
export const DEFAULT_STREAM_LIMITS: StreamLimits = { perConnection: 4, total: 256, stallMs: 30_000 };

/** The `reason` label of oversell_grpc_stream_refusals_total. */
export type StreamRefusal = 'streams-per-connection' | 'streams';

export interface StreamGuardOptions {
  limits: StreamLimits;
  /** Methods (paths) whose handlers limit and end their own streams: passed through. */
  selfGuarded?: ReadonlySet<string>;
  /** Methods whose streams are ended when unread but not counted. */
  uncounted?: ReadonlySet<string>;
  onRefused?: (reason: StreamRefusal) => void;
  /** A stream was ended: its client took nothing for stallMs. `service`: its gRPC service's full name. */
  onEnded?: (service: string) => void;
}

/** The paths of a service's methods, for selfGuarded and uncounted. */
export function methodPaths(service: grpc.ServiceDefinition): Set<string> {
  return new Set(Object.values(service).map((m) => m.path));
}

type UpstreamListener = Parameters<grpc.ServerInterceptingCall['start']>[0];
type PartialStatus = Parameters<grpc.ServerInterceptingCall['sendStatus']>[0];

/** The interceptor; put it first among a server's interceptors (nearest the transport). */
export function streamGuard(options: StreamGuardOptions): grpc.ServerInterceptor {
  const { limits } = options;
  const byConnection = new Map<string, number>();
  let total = 0;
  /** A slot for a stream of `connection`, or the status to refuse it with. */
  const take = (connection: string): (() => void) | grpc.StatusObject => {
    const mine = byConnection.get(connection) ?? 0;
    if (mine >= limits.perConnection) {
      options.onRefused?.('streams-per-connection');
      return exhausted(`too many streams: this connection already holds ${mine} open streams of services without limits of their own (health Watch, server reflection) on this gRPC port (limit ${limits.perConnection}, --grpc-streams-per-connection); close streams it no longer reads`);
    }
    if (total >= limits.total) {
      options.onRefused?.('streams');
      return exhausted(`too many streams: this gRPC port already serves ${total} streams of services without limits of their own (health Watch, server reflection) (limit ${limits.total}, --grpc-streams); retry later, or use Health/Check`);
    }
    byConnection.set(connection, mine + 1);
    total += 1;
    let released = false;
    return () => {
      if (released) return;
      released = true;
      total -= 1;
      const left = (byConnection.get(connection) ?? 1) - 1;
      if (left > 0) byConnection.set(connection, left);
      else byConnection.delete(connection);
    };
  };
  return (method, call) => {
    if (!method.responseStream || options.selfGuarded?.has(method.path)) return new grpc.ServerInterceptingCall(call);
    const service = method.path.split('/')[1] ?? method.path;
    const guarded = new GuardedStream({
      stallMs: limits.stallMs,
      bidi: method.requestStream,
      take: options.uncounted?.has(method.path) ? undefined : () => take(call.getPeer()),
      onEnded: () => options.onEnded?.(service),
    });
    return new GuardedCall(call, guarded);
  };
}

function exhausted(details: string): grpc.StatusObject {
  return { code: grpc.status.RESOURCE_EXHAUSTED, details, metadata: new grpc.Metadata() };
}

/** One guarded stream's state: its slot, the response waiting for its client, requests held back. */
class GuardedStream {
  /** Response messages handed to grpc-js whose write has not completed (the client's flow-control window is full). */
  #waiting = 0;
  /** When the oldest of them was handed over, or the last one completed while others wait (performance.now()). */
  #waitingSince = 0;
  #timer: NodeJS.Timeout | undefined;
  /** Requests of a bidirectional stream held until the responses before them are taken. */
  #held: Array<() => void> = [];
  #release: (() => void) | undefined;
  /** Ended by the guard: its status is on its way, its handler was told it was cancelled. */
  ended = false;
  /** grpc-js reported the stream over. */
  #over = false;
  #upstream: UpstreamListener | undefined;
  /** Set by the call: sends down, past the handler and its queue. */
  sendStatus: (status: grpc.StatusObject) => void = () => {};

  constructor(private readonly o: { stallMs: number; bidi: boolean; take: (() => (() => void) | grpc.StatusObject) | undefined; onEnded: () => void }) {}

  /** What the layer above (the handler) is told: a cancel once, nothing after the guard ended the stream. */
  upstream(listener: UpstreamListener): UpstreamListener {
    let cancelled = false;
    const live = () => !cancelled && !this.ended;
    const up: UpstreamListener = {
      onReceiveMetadata: (metadata) => {
        if (live()) listener.onReceiveMetadata(metadata);
      },
      onReceiveMessage: (message) => {
        if (live()) listener.onReceiveMessage(message);
      },
      onReceiveHalfClose: () => {
        if (live()) listener.onReceiveHalfClose();
      },
      onCancel: () => {
        if (cancelled) return;
        cancelled = true;
        listener.onCancel();
      },
    };
    this.#upstream = up;
    return up;
  }

  /** This layer's own listener, for what comes up from the transport. */
  readonly listener: grpc.ServerListener = {
    onReceiveMetadata: (metadata, next) => {
      if (this.o.take) {
        const slot = this.o.take();
        if (typeof slot !== 'function') return this.sendStatus(slot);
        this.#release = slot;
      }
      next(metadata);
    },
    onReceiveMessage: (message, next) => {
      if (this.o.bidi && this.#waiting > 0) this.#held.push(() => next(message));
      else next(message);
    },
    onCancel: () => {
      this.#over = true;
      clearTimeout(this.#timer);
      this.#timer = undefined;
      this.#held = [];
      this.#release?.();
    },
  };

  send(message: unknown, callback: () => void, next: (message: unknown, written: () => void) => void): void {
    // The handler was told of a cancel; what it still writes goes nowhere.
    if (this.ended) {
      callback();
      return;
    }
    this.#waiting += 1;
    if (this.#waiting === 1) {
      this.#waitingSince = performance.now();
      this.#arm(this.o.stallMs);
    }
    next(message, () => {
      this.#waiting -= 1;
      if (this.#waiting > 0) this.#waitingSince = performance.now();
      callback();
      if (this.#waiting > 0) return;
      // Taken: the requests held meanwhile go up, one at a time as each answer is taken.
      while (this.#waiting === 0 && this.#held.length > 0) this.#held.shift()!();
    });
  }

  /** One timer a stream, re-armed when it fires early: no timer per message. */
  #arm(ms: number) {
    if (this.#timer) return;
    this.#timer = setTimeout(() => {
      this.#timer = undefined;
      if (this.#over || this.ended || this.#waiting === 0) return;
      const left = this.#waitingSince + this.o.stallMs - performance.now();
      if (left > 0) return this.#arm(left);
      this.#stalled();
    }, Math.max(1, Math.ceil(ms)));
    this.#timer.unref();
  }

  #stalled() {
    this.ended = true;
    this.#held = [];
    this.o.onEnded();
    // Sent after what the client has not read yet: it sees the status once it reads again.
    this.sendStatus(exhausted(`stream ended: the client took no message for ${this.o.stallMs / 1000}s while the gateway had one for it (--grpc-stream-stall); read the stream continuously, and open it again`));
    // The handler stops as for a cancel: it writes no more and its queued messages are dropped.
    this.#upstream?.onCancel();
  }
}

/** grpc-js's pass-through call, with the guard between the handler and the transport. */
class GuardedCall extends grpc.ServerInterceptingCall {
  readonly #guarded: GuardedStream;

  constructor(next: grpc.ServerInterceptingCallInterface, guarded: GuardedStream) {
    super(next, { start: (go) => go(guarded.listener) });
    this.#guarded = guarded;
    guarded.sendStatus = (status) => super.sendStatus(status);
  }

  override start(listener: UpstreamListener): void {
    super.start(this.#guarded.upstream(listener));
  }

  // biome-ignore lint/suspicious/noExplicitAny: grpc-js's own signature
  override sendMessage(message: any, callback: () => void): void {
    this.#guarded.send(message, callback, (m, written) => super.sendMessage(m, written));
  }

  override sendStatus(status: PartialStatus): void {
    // Ended by the guard: its own status is sent; the handler's would be a second.
    if (this.#guarded.ended) return;
    super.sendStatus(status);
  }
}
