// The routes of metrics.k8s.io/v1beta1, in the order the API server's filters
// run them: probes (no caller needed), then the caller (front-proxy
// certificate and headers: 401), then the SubjectAccessReview (403, or 500
// when it cannot be asked), then the request itself (400 for a bad selector,
// 404 for a missing object, 405 for anything but get and list).
import { Readable } from 'node:stream';
import type { TLSSocket } from 'node:tls';
import type { FastifyInstance, FastifyPluginOptions, FastifyReply, FastifyRequest } from 'fastify';
import type { Logger } from '../../lib/log.js';
import type { AccessReview, Attributes } from './access-review.js';
import { authenticate, Unauthorized, type Caller, type PeerCertificate, type RequestHeaderConfig } from './front-proxy.js';
import {
  API_GROUP, API_GROUP_LIST, API_RESOURCE_LIST, BadRequest, forbidden, GROUP, GROUP_VERSION, nodeMetricsList, notFound,
  podMetricsList, status, type NodeMetrics, type PodMetrics,
} from './resource-metrics.js';
import { MetricsReader, mergeMetrics, SLICE, yieldTurn, type MetricsQuery, type MetricsReaderOptions } from './metrics-reader.js';
import type { FromPeers } from '../query/peer-nodes.js';

export interface MetricsApiPluginOptions extends FastifyPluginOptions, MetricsReaderOptions {
  /** The front-proxy CA and headers as last read; undefined: every caller is refused. */
  trust: () => RequestHeaderConfig | undefined;
  review: AccessReview;
  /** Undefined when ready; otherwise what is missing (/readyz). */
  notReady: () => string | undefined;
  now: () => number;
  log: Logger;
  /**
   * Sharded: the other replicas, which hold the usage of the nodes this one
   * does not own. A list is answered from all of them; a get from them when
   * this replica has no fresh metrics of the object.
   */
  peers?: { ask(query: MetricsQuery): Promise<FromPeers<Array<NodeMetrics | PodMetrics>>>; onFailed(failed: string[]): void };
}

function peerOf(request: FastifyRequest): PeerCertificate {
  const socket = request.raw.socket as TLSSocket;
  const cert = typeof socket.getPeerCertificate === 'function' ? socket.getPeerCertificate() : undefined;
  if (!cert?.raw) return { raw: undefined, commonName: undefined };
  const cn = (cert.subject as unknown as Record<string, string | string[] | undefined> | undefined)?.CN;
  return { raw: cert.raw, commonName: Array.isArray(cn) ? cn[0] : cn };
}

type Route =
  | { kind: 'doc'; body: unknown }
  | { kind: 'resource'; resource: 'nodes' | 'pods'; namespace?: string; name?: string }
  | { kind: 'missing' };

const PREFIX = `/apis/${GROUP_VERSION}`;

function route(path: string): Route {
  const p = path.length > 1 && path.endsWith('/') ? path.slice(0, -1) : path;
  if (p === '/apis') return { kind: 'doc', body: API_GROUP_LIST };
  if (p === `/apis/${GROUP}`) return { kind: 'doc', body: API_GROUP };
  if (p === PREFIX) return { kind: 'doc', body: API_RESOURCE_LIST };
  if (!p.startsWith(`${PREFIX}/`)) return { kind: 'missing' };
  let parts: string[];
  try {
    parts = p.slice(PREFIX.length + 1).split('/').map(decodeURIComponent);
  } catch {
    return { kind: 'missing' };
  }
  const [a, b, c, d, ...rest] = parts;
  if (a === 'nodes' && c === undefined) return { kind: 'resource', resource: 'nodes', ...(b !== undefined && { name: b }) };
  if (a === 'pods' && b === undefined) return { kind: 'resource', resource: 'pods' };
  if (a === 'namespaces' && b && c === 'pods' && rest.length === 0) return { kind: 'resource', resource: 'pods', namespace: b, ...(d !== undefined && { name: d }) };
  return { kind: 'missing' };
}

const send = (reply: FastifyReply, code: number, body: unknown) => reply.code(code).type('application/json').send(JSON.stringify(body));

/** The list's JSON in pieces of about 256 KiB, written (and encrypted) one at a time rather than as one 40 MB string. */
async function* listBody(list: { kind: string; apiVersion: string; metadata: object; items: unknown[] }): AsyncGenerator<string> {
  const { items, ...head } = list;
  let piece = `${JSON.stringify(head).slice(0, -1)},"items":[`;
  for (let i = 0; i < items.length; i++) {
    piece += i === 0 ? JSON.stringify(items[i]) : `,${JSON.stringify(items[i])}`;
    if (piece.length >= 256 * 1024) {
      yield piece;
      piece = '';
    }
    if (i % SLICE === SLICE - 1) await yieldTurn();
  }
  yield `${piece}]}`;
}

export async function metricsApiPlugin(app: FastifyInstance, o: MetricsApiPluginOptions): Promise<void> {
  const reader = new MetricsReader(o);
  /** What the query finds here and, when sharded, at the other replicas. */
  const find = async (query: MetricsQuery, nowMs: number) => {
    const mine = await reader.query(query, nowMs);
    if (!o.peers || (query.name !== undefined && mine.length > 0)) return mine;
    const { answers, failed } = await o.peers.ask(query);
    if (failed.length > 0) o.peers.onFailed(failed);
    return mergeMetrics([mine, ...answers]);
  };
  const probe = (_request: FastifyRequest, reply: FastifyReply) => reply.type('text/plain').send('ok');
  app.get('/healthz', probe);
  app.get('/livez', probe);
  app.get('/readyz', async (_request, reply) => {
    const missing = o.notReady();
    if (missing) return reply.code(503).type('text/plain').send(`not ready: ${missing}`);
    return reply.type('text/plain').send('ok');
  });

  const serve = async (request: FastifyRequest, reply: FastifyReply) => {
    const url = new URL(request.url, 'https://metrics.invalid');
    const nowMs = o.now();
    let caller: Caller;
    try {
      caller = authenticate(o.trust(), peerOf(request), request.raw.rawHeaders, nowMs);
    } catch (err) {
      if (!(err instanceof Unauthorized)) throw err;
      o.log.debug({ path: url.pathname, why: err.message }, 'metrics API: caller refused (401)');
      return send(reply, 401, status(401, 'Unauthorized', 'Unauthorized'));
    }
    if (request.method !== 'GET') return send(reply, 405, status(405, 'MethodNotAllowed', `the server does not allow this method on the requested resource (${request.method}); metrics.k8s.io is read-only: get and list`));
    const r = route(url.pathname);
    if (r.kind === 'doc') return send(reply, 200, r.body);
    if (r.kind === 'missing') return send(reply, 404, status(404, 'NotFound', 'the server could not find the requested resource'));

    const q = url.searchParams;
    const watch = q.get('watch') === 'true' || q.get('watch') === '1';
    const attributes: Attributes = { verb: watch ? 'watch' : r.name === undefined ? 'list' : 'get', resource: r.resource, ...(r.namespace !== undefined && { namespace: r.namespace }), ...(r.name !== undefined && { name: r.name }) };
    let decision;
    try {
      decision = await o.review(caller, attributes);
    } catch (err) {
      o.log.warn({ user: caller.username, ...attributes, err: (err as Error).message }, 'metrics API: access could not be checked; refusing');
      return send(reply, 500, status(500, 'InternalError', `Internal error occurred: ${(err as Error).message}`));
    }
    if (!decision.allowed) return send(reply, 403, forbidden(caller.username, attributes.verb, r.resource, r.namespace, r.name, decision.reason));
    if (watch) return send(reply, 405, status(405, 'MethodNotAllowed', `watch is not supported on ${r.resource}.${GROUP}: list it again`));

    try {
      const query: MetricsQuery = {
        resource: r.resource,
        ...(r.namespace !== undefined && { namespace: r.namespace }),
        ...(r.name !== undefined && { name: r.name }),
        labelSelector: q.get('labelSelector') ?? '',
        fieldSelector: q.get('fieldSelector') ?? '',
      };
      const items = await find(query, nowMs);
      if (r.name !== undefined) {
        const found = items[0];
        if (!found) return send(reply, 404, notFound(r.resource, r.resource === 'pods' ? `${r.namespace}/${r.name}` : r.name));
        return send(reply, 200, found);
      }
      const list = r.resource === 'nodes' ? nodeMetricsList(items as NodeMetrics[]) : podMetricsList(items as PodMetrics[]);
      return reply.code(200).type('application/json').send(Readable.from(listBody(list)));
    } catch (err) {
      if (err instanceof BadRequest || (err as Error).name === 'SelectorError') return send(reply, 400, status(400, 'BadRequest', (err as Error).message));
      throw err;
    }
  };
  app.route({ method: ['GET', 'POST', 'PUT', 'PATCH', 'DELETE'], url: '/*', handler: serve });
  app.route({ method: ['GET', 'POST', 'PUT', 'PATCH', 'DELETE'], url: '/', handler: serve });
}
