// A list, then a watch from its resourceVersion, as an informer does (re-list
// on 410 Gone, reconnect with backoff, bookmarks keep the resourceVersion
// fresh), for one collection and selector: the pods bound to the agent's node,
// the gateway's EndpointSlices. Only what the agent needs.
import { request, type RequestOptions } from 'node:https';
import type { Logger } from '../../lib/log.js';
import { Backoff } from '../../lib/backoff.js';
import type { KubeAccess } from './kube-access.js';

interface Item {
  metadata?: { uid?: string; resourceVersion?: string };
}

interface WatchEvent<T> {
  type: 'ADDED' | 'MODIFIED' | 'DELETED' | 'BOOKMARK' | 'ERROR';
  object: T & { code?: number; message?: string };
}

class Gone extends Error {}

/** The API server answered the list with an HTTP status other than 200 (403: no RBAC for it). */
export class ListRefused extends Error {
  override name = 'ListRefused';
  constructor(
    readonly status: number | undefined,
    message: string,
  ) {
    super(message);
  }
}

export class ListWatch<T extends Item> {
  readonly #items = new Map<string, T>();
  readonly #backoff = new Backoff({ initialMs: 500, maxMs: 30_000 });
  #resourceVersion = '';
  #stopped = false;
  #current: ReturnType<typeof request> | undefined;
  #timer: NodeJS.Timeout | undefined;
  #synced = false;

  constructor(
    private readonly access: KubeAccess,
    /** e.g. /api/v1/pods */
    private readonly collection: string,
    /** e.g. fieldSelector=spec.nodeName%3Dnode-1 */
    private readonly selector: string,
    private readonly onChange: (items: Iterable<T>) => void,
    private readonly log: Logger,
  ) {}

  get synced(): boolean {
    return this.#synced;
  }

  items(): Iterable<T> {
    return this.#items.values();
  }

  /** Resolves after the first list; then watches until stop(). */
  async start(): Promise<void> {
    await this.#list();
    this.#watch();
  }

  stop(): void {
    this.#stopped = true;
    clearTimeout(this.#timer);
    this.#current?.destroy();
  }

  #options(query: string, timeoutMs: number): RequestOptions {
    const a = this.access;
    const path = `${this.collection}?${this.selector}${query}`;
    const headers: Record<string, string> = { accept: 'application/json', 'user-agent': 'oversell-agent' };
    const token = a.token?.();
    if (token) headers.authorization = `Bearer ${token}`;
    return {
      host: a.server.hostname.replace(/^\[|\]$/g, ''),
      port: a.server.port || 443,
      path,
      method: 'GET',
      headers,
      timeout: timeoutMs,
      ...(a.ca && { ca: a.ca }),
      ...(a.cert && { cert: a.cert }),
      ...(a.key && { key: a.key }),
      ...(a.insecureSkipTlsVerify && { rejectUnauthorized: false }),
    };
  }

  #list(): Promise<void> {
    return new Promise((resolve, reject) => {
      const req = request(this.#options('', 30_000), (res) => {
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (c: string) => (body += c));
        res.on('end', () => {
          if (res.statusCode !== 200) {
            reject(new ListRefused(res.statusCode, `listing ${this.collection}?${this.selector} failed: HTTP ${res.statusCode} ${body.slice(0, 300)}`));
            return;
          }
          try {
            const list = JSON.parse(body) as { items?: T[]; metadata?: { resourceVersion?: string } };
            this.#items.clear();
            for (const p of list.items ?? []) if (p.metadata?.uid) this.#items.set(p.metadata.uid, p);
            this.#resourceVersion = list.metadata?.resourceVersion ?? '';
            this.#synced = true;
            this.onChange(this.#items.values());
            resolve();
          } catch (err) {
            reject(err);
          }
        });
      });
      req.on('timeout', () => req.destroy(new Error(`listing ${this.collection} timed out`)));
      req.on('error', reject);
      req.end();
    });
  }

  #watch(): void {
    if (this.#stopped) return;
    // The API server ends a watch after its own timeout; 5 min keeps connections fresh.
    const query = `&watch=1&allowWatchBookmarks=true&timeoutSeconds=300&resourceVersion=${encodeURIComponent(this.#resourceVersion)}`;
    const req = request(this.#options(query, 330_000), (res) => {
      if (res.statusCode === 410) {
        res.resume();
        this.#again(new Gone('resourceVersion too old'));
        return;
      }
      if (res.statusCode !== 200) {
        res.resume();
        this.#again(new Error(`watching ${this.collection} failed: HTTP ${res.statusCode}`));
        return;
      }
      this.#backoff.reset();
      let buffer = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => {
        buffer += chunk;
        let nl: number;
        while ((nl = buffer.indexOf('\n')) >= 0) {
          const line = buffer.slice(0, nl);
          buffer = buffer.slice(nl + 1);
          if (!line.trim()) continue;
          try {
            this.#event(JSON.parse(line) as WatchEvent<T>);
          } catch (err) {
            res.destroy();
            this.#again(err as Error);
            return;
          }
        }
      });
      res.on('end', () => this.#again());
      res.on('error', (err) => this.#again(err));
    });
    req.on('timeout', () => req.destroy(new Error('watch idle too long')));
    req.on('error', (err) => this.#again(err));
    req.end();
    this.#current = req;
  }

  #event(e: WatchEvent<T>): void {
    if (e.type === 'ERROR') {
      if (e.object.code === 410) throw new Gone(e.object.message ?? 'gone');
      this.log.warn({ collection: this.collection, message: e.object.message }, 'watch error event');
      return;
    }
    const rv = e.object.metadata?.resourceVersion;
    if (rv) this.#resourceVersion = rv;
    if (e.type === 'BOOKMARK') return;
    const uid = e.object.metadata?.uid;
    if (!uid) return;
    if (e.type === 'DELETED') this.#items.delete(uid);
    else this.#items.set(uid, e.object);
    this.onChange(this.#items.values());
  }

  #again(err?: Error): void {
    if (this.#stopped || this.#timer) return;
    const gone = err instanceof Gone;
    const delay = err ? this.#backoff.next() : 0;
    if (err && !gone) this.log.warn({ collection: this.collection, err: err.message, retryInMs: delay }, 'watch interrupted; the last known state stays in use');
    this.#timer = setTimeout(() => {
      this.#timer = undefined;
      const next = gone ? this.#list() : Promise.resolve();
      next.then(
        () => this.#watch(),
        (e: unknown) => this.#again(e as Error),
      );
    }, delay);
  }
}
