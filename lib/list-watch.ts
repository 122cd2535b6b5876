// The one way oversell follows a Kubernetes collection, as client-go's
// reflector does: list (in pages), then watch from the list's resourceVersion.
// A watch the API server ends (it does, every few minutes) resumes from the
// last resourceVersion delivered (bookmarks keep it fresh, so a quiet
// collection does not fall behind); a watch too far behind (410 Gone) lists
// again and hands the consumer the whole collection in one replace, never half
// of an old view and half of a new one; any other failure retries with one
// backoff (lib/backoff.ts: capped, exponential, full jitter, so a fleet of
// agents does not come back at the same instant). Meanwhile the last known
// state stays in force: a broken watch never empties what the consumer holds.
// Plain node:http(s), no @kubernetes/client-node: the agent cannot afford that
// library's memory, and one code path is what makes the policy one.
import { request as httpRequest, type ClientRequest, type IncomingMessage, type RequestOptions } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { Backoff, type BackoffOptions } from './backoff.js';
import type { Logger } from './log.js';

/** How to reach the API server: its address and, per request, the TLS, credentials and agent to use (tokens rotate). */
export interface KubeConnection {
  server: URL;
  options(): RequestOptions | Promise<RequestOptions>;
}

/** What every Kubernetes object carries that the helper reads. */
export interface KubeObject {
  metadata?: { name?: string; namespace?: string; uid?: string; resourceVersion?: string };
}

export type ChangeType = 'ADDED' | 'MODIFIED' | 'DELETED';

/** Where a list-watch delivers: the whole collection after each list, then one change at a time. */
export interface ListWatchTarget<U> {
  /** The whole collection as of one resourceVersion: anything held before and not in it is gone. */
  replace(items: U[]): void;
  apply(type: ChangeType, item: U): void;
}

export interface ListWatchOptions<T extends KubeObject, U> {
  connection: KubeConnection;
  /** The collection's path, e.g. /api/v1/pods. */
  path: string;
  fieldSelector?: string;
  labelSelector?: string;
  /** Objects per list page (limit/continue); unset lists in one answer. */
  pageSize?: number;
  /** What each object is reduced to on arrival (undefined: skipped), so a list is never held whole. */
  decode: (object: T) => U | undefined;
  target: ListWatchTarget<U>;
  /** For the log: "pods bound to this node", "OversellPolicy". */
  what: string;
  log: Logger;
  /** After each complete list has been handed over (the first one included). */
  onSynced?(): void;
  /** Each failure, after it is logged: what failed and when the next attempt is. */
  onError?(err: Error, retryInMs: number): void;
  /** Default: BACKOFF.fleet. */
  backoff?: BackoffOptions;
  random?: () => number;
  userAgent?: string;
}

/** A watch someone started: stop() ends it for good. */
export interface Watching {
  stop(): Promise<void>;
}

/**
 * One policy, two ceilings. Thousands of agents spread their retries over up
 * to 30 s, so an API server coming back is not met by all of them at once
 * (client-go's reflector caps at 30 s too); the gateway's few replicas stop
 * at 5 s (what their fixed retry was), because the nodes, policies and bound
 * requests they watch feed every decision.
 */
export const BACKOFF = {
  fleet: { initialMs: 500, maxMs: 30_000 },
  replicas: { initialMs: 500, maxMs: 5000 },
} as const satisfies Record<string, BackoffOptions>;
/** The API server ends each watch after this; it is also how long a silent connection is trusted. */
const WATCH_SECONDS = 300;
const LIST_TIMEOUT_MS = 60_000;
/** How long start() keeps retrying a first list the API server refused for now (429, 5xx) before it gives up. */
const FIRST_LIST_PATIENCE_MS = 30_000;
/** A watch that ends cleanly sooner, without one event, is a failure (as client-go's "very short watch"), not a reason to reconnect at once forever. */
const SHORT_WATCH_MS = 1000;

/** The API server refused a list (403: no RBAC for it, 401: a bad token). */
export class ListRefused extends Error {
  override name = 'ListRefused';
  constructor(
    readonly status: number | undefined,
    message: string,
  ) {
    super(message);
  }
}

class Gone extends Error {
  override name = 'Gone';
}

interface WatchEvent<T> {
  type: ChangeType | 'BOOKMARK' | 'ERROR';
  object: T & { code?: number; message?: string };
}

export class ListWatch<T extends KubeObject, U = T> {
  readonly #o: ListWatchOptions<T, U>;
  readonly #backoff: Backoff;
  /** Ends start()'s wait between first-list attempts (stop() calls it). */
  #wake: (() => void) | undefined;
  #resourceVersion = '';
  #synced = false;
  #stopped = false;
  #current: ClientRequest | undefined;
  #timer: NodeJS.Timeout | undefined;

  constructor(options: ListWatchOptions<T, U>) {
    this.#o = options;
    this.#backoff = new Backoff(options.backoff ?? BACKOFF.fleet, options.random);
  }

  /** A complete list has been handed over; stays true while the watch is broken (the last known state stays in force). */
  get synced(): boolean {
    return this.#synced;
  }

  get resourceVersion(): string {
    return this.#resourceVersion;
  }

  /** Resolves after the first list has been handed over, rejects when it fails (ListRefused for an HTTP refusal); then watches until stop(). */
  async start(): Promise<void> {
    const deadline = Date.now() + FIRST_LIST_PATIENCE_MS;
    for (;;) {
      try {
        await this.#list();
        break;
      } catch (err) {
        if (this.#stopped) return;
        // A refusal that says "later" (429 while a new CRD's storage initialises,
        // a 5xx) is retried for a while; anything else (403, 404: no CRD, no
        // access) is the caller's to report at once.
        const later = err instanceof ListRefused && err.status !== undefined && (err.status === 429 || err.status >= 500);
        const delay = this.#backoff.next();
        if (!later || Date.now() + delay > deadline) throw err;
        this.#o.log.info({ list: this.#describe(), why: (err as Error).message, retryInMs: delay }, `${this.#o.what}: the API server asked to list again later; retrying`);
        await new Promise<void>((resolve) => {
          this.#wake = resolve;
          this.#timer = setTimeout(resolve, delay);
        });
        if (this.#stopped) return;
      }
    }
    this.#backoff.reset();
    this.#watch();
  }

  /** Ends the open request and any pending retry: nothing of it runs afterwards. */
  stop(): void {
    this.#stopped = true;
    this.#wake?.();
    clearTimeout(this.#timer);
    this.#timer = undefined;
    this.#current?.destroy();
    this.#current = undefined;
  }

  #describe(): string {
    const s = [this.#o.fieldSelector && `fieldSelector=${this.#o.fieldSelector}`, this.#o.labelSelector && `labelSelector=${this.#o.labelSelector}`].filter(Boolean);
    return s.length ? `${this.#o.path}?${s.join('&')}` : this.#o.path;
  }

  /** Sends a GET; resolves with the response, or undefined when stopped meanwhile. */
  async #get(query: Record<string, string | undefined>, idleMs: number): Promise<IncomingMessage | undefined> {
    const { server } = this.#o.connection;
    const options = await this.#o.connection.options();
    if (this.#stopped) return undefined;
    const params = new URLSearchParams();
    if (this.#o.fieldSelector) params.set('fieldSelector', this.#o.fieldSelector);
    if (this.#o.labelSelector) params.set('labelSelector', this.#o.labelSelector);
    for (const [k, v] of Object.entries(query)) if (v !== undefined) params.set(k, v);
    const base = server.pathname.replace(/\/$/, '');
    const headers = { ...(options.headers as Record<string, string> | undefined), accept: 'application/json', 'user-agent': this.#o.userAgent ?? 'oversell' };
    const send = server.protocol === 'http:' ? httpRequest : httpsRequest;
    return new Promise((resolve, reject) => {
      const req = send(
        {
          ...options,
          protocol: server.protocol,
          host: server.hostname.replace(/^\[|\]$/g, ''),
          port: server.port || (server.protocol === 'http:' ? 80 : 443),
          path: `${base}${this.#o.path}?${params}`,
          method: 'GET',
          headers,
          timeout: idleMs,
        },
        resolve,
      );
      req.on('timeout', () => req.destroy(new Error(`no answer from the API server for ${idleMs / 1000} s`)));
      req.on('error', reject);
      req.end();
      this.#current = req;
    });
  }

  async #list(): Promise<void> {
    const items: U[] = [];
    let resourceVersion = '';
    let next: string | undefined;
    do {
      const res = await this.#get({ limit: this.#o.pageSize?.toString(), continue: next }, LIST_TIMEOUT_MS);
      if (!res) return;
      const body = await readBody(res);
      if (res.statusCode !== 200) throw new ListRefused(res.statusCode, `listing ${this.#describe()} failed: HTTP ${res.statusCode} ${body.slice(0, 300)}`);
      const page = JSON.parse(body) as { items?: T[] | null; metadata?: { resourceVersion?: string; continue?: string } };
      for (const object of page.items ?? []) {
        const item = this.#o.decode(object);
        if (item !== undefined) items.push(item);
      }
      resourceVersion = page.metadata?.resourceVersion ?? resourceVersion;
      next = page.metadata?.continue || undefined;
    } while (next);
    if (this.#stopped) return;
    this.#resourceVersion = resourceVersion;
    this.#backoff.reset();
    this.#o.target.replace(items);
    this.#synced = true;
    this.#o.onSynced?.();
  }

  #watch(): void {
    if (this.#stopped) return;
    const startedAt = Date.now();
    let events = 0;
    let finished = false;
    const done = (err?: Error) => {
      if (finished) return;
      finished = true;
      res?.destroy();
      if (this.#stopped) return;
      // A watch that delivered, or ran a while, was healthy: what broke it is news, not a streak.
      if (events > 0 || Date.now() - startedAt >= SHORT_WATCH_MS) this.#backoff.reset();
      else if (!err) err = new Error('the watch ended at once, without an event');
      this.#again(err);
    };
    let res: IncomingMessage | undefined;
    const query = { watch: '1', allowWatchBookmarks: 'true', timeoutSeconds: String(WATCH_SECONDS), resourceVersion: this.#resourceVersion };
    this.#get(query, (WATCH_SECONDS + 30) * 1000).then(
      (r) => {
        if (!r) return;
        res = r;
        if (r.statusCode === 410) {
          done(new Gone('the watch answered HTTP 410 Gone'));
          return;
        }
        if (r.statusCode !== 200) {
          void readBody(r).then((body) => done(new Error(`watching ${this.#describe()} failed: HTTP ${r.statusCode} ${body.slice(0, 300)}`)), done);
          return;
        }
        let buffer = '';
        r.setEncoding('utf8');
        r.on('data', (chunk: string) => {
          buffer += chunk;
          let nl: number;
          while (!finished && (nl = buffer.indexOf('\n')) >= 0) {
            const line = buffer.slice(0, nl);
            buffer = buffer.slice(nl + 1);
            if (!line.trim()) continue;
            try {
              events++;
              this.#event(JSON.parse(line) as WatchEvent<T>);
            } catch (err) {
              done(err as Error);
            }
          }
        });
        let ended = false;
        r.on('end', () => {
          ended = true;
          done();
        });
        r.on('error', done);
        r.on('close', () => done(ended ? undefined : new Error('the connection closed in the middle of the watch')));
      },
      done,
    );
  }

  #event(e: WatchEvent<T>): void {
    if (e.type === 'ERROR') {
      if (e.object.code === 410) throw new Gone(e.object.message ?? 'resourceVersion too old');
      throw new Error(`the API server ended the watch: ${e.object.code ?? ''} ${e.object.message ?? ''}`.trim());
    }
    const rv = e.object.metadata?.resourceVersion;
    if (rv) this.#resourceVersion = rv;
    if (e.type === 'BOOKMARK') return;
    if (e.type !== 'ADDED' && e.type !== 'MODIFIED' && e.type !== 'DELETED') return;
    const item = this.#o.decode(e.object);
    if (item !== undefined) this.#o.target.apply(e.type, item);
  }

  /** The next attempt: at once after a clean end, after the backoff after a failure; a list first after 410 Gone or a failed list. */
  #again(err?: Error, relist = err instanceof Gone): void {
    if (this.#stopped || this.#timer) return;
    const delay = err ? this.#backoff.next() : 0;
    if (err instanceof Gone) this.#o.log.info({ watch: this.#describe(), why: err.message, retryInMs: delay }, `${this.#o.what}: the watch fell behind (410 Gone); listing again`);
    else if (err) this.#o.log.warn({ watch: this.#describe(), err: err.message, retryInMs: delay }, `${this.#o.what}: watch interrupted; the last known state stays in force until it is back`);
    if (err) this.#o.onError?.(err, delay);
    this.#timer = setTimeout(() => {
      this.#timer = undefined;
      (relist ? this.#list() : Promise.resolve()).then(
        () => this.#watch(),
        (e: unknown) => this.#again(e instanceof Error ? e : new Error(String(e)), true),
      );
    }, delay);
  }
}

function readBody(res: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    let body = '';
    res.setEncoding('utf8');
    let ended = false;
    res.on('data', (c: string) => (body += c));
    res.on('end', () => {
      ended = true;
      resolve(body);
    });
    res.on('error', reject);
    res.on('close', () => ended || reject(new Error('the connection closed in the middle of the answer')));
  });
}
