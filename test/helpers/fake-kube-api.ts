// A real HTTP server that speaks the API server's list and watch protocol for
// the collections a test registers: lists in pages (limit/continue, over a
// snapshot as etcd does), field and label selectors of the form a.b=c, a.b!=c,
// watches from a resourceVersion (the events after it, then live ones, as
// JSON lines), bookmarks, a history that can be compacted (then a watch from
// before it gets the ERROR event with 410 the API server sends), watches the
// server ends, refusals with an HTTP status, creates (POST), replaces (PUT), and
// reads (GET) and deletes (DELETE) of one object by name.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { KubeConfig } from '@kubernetes/client-node';
import type { KubeAccess } from '../../agent/kube/kube-access.js';

export interface FakeObject {
  metadata: { name: string; namespace?: string; uid?: string; resourceVersion?: string; labels?: Record<string, string>; deletionTimestamp?: string };
  [k: string]: unknown;
}

type EventType = 'ADDED' | 'MODIFIED' | 'DELETED';

interface OpenWatch {
  path: string;
  match: (o: FakeObject) => boolean;
  bookmarks: boolean;
  res: ServerResponse;
}

const keyOf = (o: FakeObject) => (o.metadata.namespace ? `${o.metadata.namespace}/${o.metadata.name}` : o.metadata.name);

function dig(o: unknown, path: string): string {
  let v: unknown = o;
  for (const p of path.split('.')) v = v && typeof v === 'object' ? (v as Record<string, unknown>)[p] : undefined;
  return v === undefined || v === null ? '' : String(v);
}

/** a.b=c,a.b!=c over fields, or k=v,k!=v over metadata.labels. */
function selector(expr: string | null, labels: boolean): (o: FakeObject) => boolean {
  if (!expr) return () => true;
  const terms = expr.split(',').map((t) => {
    const m = /^([^!=]+)(!=|==|=)(.*)$/.exec(t);
    if (!m) throw new Error(`fake API server: selector term ${t} not understood`);
    const [, key = '', op, value] = m;
    return { key, ne: op === '!=', value };
  });
  return (o) =>
    terms.every((t) => {
      const v = labels ? (o.metadata.labels?.[t.key] ?? '') : dig(o, t.key);
      return t.ne ? v !== t.value : v === t.value;
    });
}

export class FakeKubeApi {
  readonly server: Server;
  /** Every request's URL, in order. */
  readonly requests: string[] = [];
  /** When each of them arrived (Date.now()). */
  readonly arrivals: number[] = [];
  /** While set, lists or watches are answered with this HTTP status. */
  refuse: { list?: number; watch?: number; write?: number } = {};
  #rv = 100;
  /** A watch from a resourceVersion below this is answered 410 Gone. */
  #oldest = 0;
  readonly #collections = new Map<string, Map<string, FakeObject>>();
  readonly #history: Array<{ path: string; rv: number; type: EventType; object: FakeObject }> = [];
  readonly #watches = new Set<OpenWatch>();
  readonly #pages = new Map<string, FakeObject[]>();

  private constructor() {
    this.server = createServer((req, res) => this.#serve(req, res));
    // Idle kept-alive connections go soon, so a test can wait for a stopped client's to be gone.
    this.server.keepAliveTimeout = 200;
  }

  static async start(collections: string[]): Promise<FakeKubeApi> {
    const api = new FakeKubeApi();
    for (const c of collections) api.#collections.set(c, new Map());
    await new Promise<void>((resolve) => api.server.listen(0, '127.0.0.1', resolve));
    return api;
  }

  get url(): string {
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }

  get resourceVersion(): string {
    return String(this.#rv);
  }

  /** Open client connections (a stopped client's requests may still be on their way until this is 0). */
  connections(): Promise<number> {
    return new Promise((resolve, reject) => this.server.getConnections((err, n) => (err ? reject(err) : resolve(n))));
  }

  get openWatches(): number {
    return this.#watches.size;
  }

  /** Watch requests so far, their query parameters. */
  watchRequests(): URLSearchParams[] {
    return this.requests.map((u) => new URL(u, 'http://x').searchParams).filter((q) => q.get('watch'));
  }

  listRequests(): URLSearchParams[] {
    return this.requests.map((u) => new URL(u, 'http://x').searchParams).filter((q) => !q.get('watch'));
  }

  /** Creates or replaces an object; returns its new resourceVersion. */
  put(path: string, object: FakeObject): string {
    const items = this.#collection(path);
    const type: EventType = items.has(keyOf(object)) ? 'MODIFIED' : 'ADDED';
    const stored = structuredClone(object);
    stored.metadata.resourceVersion = String(++this.#rv);
    items.set(keyOf(stored), stored);
    this.#event(path, type, stored);
    return stored.metadata.resourceVersion;
  }

  remove(path: string, key: string): void {
    const items = this.#collection(path);
    const object = items.get(key);
    if (!object) throw new Error(`fake API server: no ${key} in ${path}`);
    items.delete(key);
    const gone = structuredClone(object);
    gone.metadata.resourceVersion = String(++this.#rv);
    this.#event(path, 'DELETED', gone);
  }

  /** Forgets the history so far: a watch resuming from a resourceVersion older than the current one is too old (410). */
  compact(): void {
    this.#oldest = this.#rv;
  }

  /** Ends every open watch cleanly, as the API server does when a watch's timeout is up. */
  endWatches(): void {
    for (const w of this.#watches) w.res.end();
    this.#watches.clear();
  }

  /** Sends a BOOKMARK at the current resourceVersion to every watch that allowed them. */
  bookmark(): void {
    for (const w of this.#watches) if (w.bookmarks) this.#write(w, 'BOOKMARK', { metadata: { name: '', resourceVersion: String(this.#rv) } });
  }

  /** Access for the agent's code (agent/kube/kube-access.ts). */
  access(): KubeAccess {
    return { server: new URL(this.url), token: () => 'fake-token' };
  }

  /** A kubeconfig for the gateway's code. */
  kubeConfig(): KubeConfig {
    return kubeConfigFor(this.url);
  }

  async close(): Promise<void> {
    this.endWatches();
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  #collection(path: string): Map<string, FakeObject> {
    const c = this.#collections.get(path);
    if (!c) throw new Error(`fake API server: ${path} is not a registered collection`);
    return c;
  }

  #event(path: string, type: EventType, object: FakeObject): void {
    this.#history.push({ path, rv: Number(object.metadata.resourceVersion), type, object });
    for (const w of this.#watches) if (w.path === path && w.match(object)) this.#write(w, type, object);
  }

  #write(w: OpenWatch, type: string, object: unknown): void {
    w.res.write(`${JSON.stringify({ type, object })}\n`);
  }

  #status(res: ServerResponse, code: number, message: string): void {
    res.writeHead(code, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ kind: 'Status', apiVersion: 'v1', status: 'Failure', code, message }));
  }

  /** The objects of a collection now, sorted by key. */
  objects(path: string): FakeObject[] {
    return [...this.#collection(path).values()].sort((a, b) => keyOf(a).localeCompare(keyOf(b))).map((o) => structuredClone(o));
  }

  /**
   * POST to a collection creates (409 if the name exists); PUT to
   * collection/name replaces (404 if absent, 409 when the body's
   * resourceVersion is set and not the stored one), as the API server does.
   */
  #store(req: IncomingMessage, res: ServerResponse, url: URL): void {
    const post = req.method === 'POST';
    const slash = url.pathname.lastIndexOf('/');
    const path = post ? url.pathname : url.pathname.slice(0, slash);
    const items = this.#collections.get(path);
    if (!items || (req.method !== 'POST' && req.method !== 'PUT')) {
      this.#status(res, 404, `${req.method} ${url.pathname} not found`);
      return;
    }
    if (this.refuse.write) {
      this.#status(res, this.refuse.write, 'refused by the test');
      return;
    }
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      let object: FakeObject;
      try {
        object = JSON.parse(Buffer.concat(chunks).toString('utf8')) as FakeObject;
      } catch {
        this.#status(res, 400, 'body is not JSON');
        return;
      }
      const namespace = /\/namespaces\/([^/]+)\//.exec(path)?.[1];
      object.metadata = { ...object.metadata, ...(namespace && { namespace }) };
      const current = items.get(keyOf(object));
      if (post && current) return this.#status(res, 409, `${keyOf(object)} already exists`);
      if (!post && object.metadata.name !== url.pathname.slice(slash + 1)) return this.#status(res, 400, 'the name in the body is not the name in the path');
      if (!post && !current) return this.#status(res, 404, `${keyOf(object)} not found`);
      if (!post && object.metadata.resourceVersion && object.metadata.resourceVersion !== current?.metadata.resourceVersion) {
        return this.#status(res, 409, `the object has been modified: ${object.metadata.resourceVersion} is not ${current?.metadata.resourceVersion}`);
      }
      this.put(path, object);
      res.writeHead(post ? 201 : 200, { 'content-type': 'application/json' });
      res.end(JSON.stringify(items.get(keyOf(object))));
    });
  }

  /** GET or DELETE of collection/name: the object, or 404 as the API server answers. */
  #byName(req: IncomingMessage, res: ServerResponse, url: URL): void {
    const slash = url.pathname.lastIndexOf('/');
    const path = url.pathname.slice(0, slash);
    const items = this.#collections.get(path);
    const namespace = /\/namespaces\/([^/]+)\//.exec(path)?.[1];
    const key = `${namespace ? `${namespace}/` : ''}${url.pathname.slice(slash + 1)}`;
    const object = items?.get(key);
    if (!object) {
      this.#status(res, 404, `${req.method} ${url.pathname}: ${key} not found`);
      return;
    }
    if (req.method === 'DELETE') {
      if (this.refuse.write) {
        this.#status(res, this.refuse.write, 'refused by the test');
        return;
      }
      this.remove(path, key);
    }
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify(object));
  }

  #serve(req: IncomingMessage, res: ServerResponse): void {
    this.requests.push(req.url ?? '');
    this.arrivals.push(Date.now());
    const url = new URL(req.url ?? '/', 'http://x');
    if (req.method === 'DELETE' || (req.method === 'GET' && !this.#collections.has(url.pathname))) {
      this.#byName(req, res, url);
      return;
    }
    if (req.method !== 'GET') {
      this.#store(req, res, url);
      return;
    }
    const items = this.#collections.get(url.pathname);
    if (!items) {
      this.#status(res, 404, `${url.pathname} not found`);
      return;
    }
    const q = url.searchParams;
    const fields = selector(q.get('fieldSelector'), false);
    const labels = selector(q.get('labelSelector'), true);
    const match = (o: FakeObject) => fields(o) && labels(o);
    if (q.get('watch') === '1' || q.get('watch') === 'true') {
      if (this.refuse.watch) {
      this.#status(res, this.refuse.watch, 'refused by the test');
      return;
    }
      res.writeHead(200, { 'content-type': 'application/json', 'transfer-encoding': 'chunked' });
      res.flushHeaders();
      const from = Number(q.get('resourceVersion') || this.#rv);
      const w: OpenWatch = { path: url.pathname, match, bookmarks: q.get('allowWatchBookmarks') === 'true', res };
      if (from < this.#oldest) {
        this.#write(w, 'ERROR', { kind: 'Status', status: 'Failure', code: 410, reason: 'Expired', message: `too old resource version: ${from} (${this.#oldest})` });
        res.end();
        return;
      }
      for (const e of this.#history) if (e.path === w.path && e.rv > from && match(e.object)) this.#write(w, e.type, e.object);
      this.#watches.add(w);
      res.on('close', () => this.#watches.delete(w));
      return;
    }
    if (this.refuse.list) {
      this.#status(res, this.refuse.list, 'refused by the test');
      return;
    }
    const limit = Number(q.get('limit') || 0);
    const token = q.get('continue');
    let rest: FakeObject[];
    if (token) {
      const kept = this.#pages.get(token);
      if (!kept) {
      this.#status(res, 410, 'continue token expired');
      return;
    }
      rest = kept;
    } else {
      rest = [...items.values()].filter(match).sort((a, b) => keyOf(a).localeCompare(keyOf(b)));
    }
    const page = limit > 0 ? rest.slice(0, limit) : rest;
    const more = limit > 0 && rest.length > limit;
    const metadata: Record<string, string> = { resourceVersion: token ? (token.split(':')[0] ?? '') : String(this.#rv) };
    if (more) {
      const next = `${metadata.resourceVersion}:${this.requests.length}`;
      this.#pages.set(next, rest.slice(limit));
      metadata.continue = next;
    }
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ kind: 'List', apiVersion: 'v1', metadata, items: page }));
  }
}

/** A kubeconfig for a plain-HTTP test server at `url` (client-node needs skipTLSVerify for http). */
export function kubeConfigFor(url: string): KubeConfig {
  const kc = new KubeConfig();
  kc.loadFromOptions({
    clusters: [{ name: 'fake', server: url, skipTLSVerify: true }],
    users: [{ name: 'fake', token: 'fake-token' }],
    contexts: [{ name: 'fake', cluster: 'fake', user: 'fake' }],
    currentContext: 'fake',
  });
  return kc;
}
