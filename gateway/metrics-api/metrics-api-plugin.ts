// The routes of metrics.k8s.io/v1beta1, in the order the API server's filters
// run them: probes (no caller needed), then the caller (front-proxy
// certificate and headers: 401), then the SubjectAccessReview (403, or 500
// when it cannot be asked), then the request itself (400 for a bad selector,
// 404 for a missing object, 405 for anything but get and list).
import { Readable } from 'node:stream';
import type { TLSSocket } from 'node:tls';
import type { FastifyInstance, FastifyPluginOptions, FastifyReply, FastifyRequest } from 'fastify';
import { parseLabelSelector, type LabelSelector } from '../../lib/label-selector.js';
import type { Logger } from '../../lib/log.js';
import type { NodeRecord, NodeStore } from '../store/node-store.js';
import { COLUMN } from '../decide/usage-window.js';
import type { AccessReview, Attributes } from './access-review.js';
import { authenticate, Unauthorized, type Caller, type PeerCertificate, type RequestHeaderConfig } from './front-proxy.js';
import type { DirectoryPod, PodDirectory } from '../store/pod-directory.js';
import {
  API_GROUP, API_GROUP_LIST, API_RESOURCE_LIST, BadRequest, fieldsMatch, forbidden, GROUP, GROUP_VERSION, labelsMatch, nodeMetrics, nodeMetricsList, notFound,
  parseFieldSelector, podMetrics, podMetricsList, podsStamp, status, type FieldSelector, type NodeMetrics, type NodeReading, type PodMetrics, type PodsReading, type PodsStamp,
} from './resource-metrics.js';

export interface MetricsApiPluginOptions extends FastifyPluginOptions {
  store: Pick<NodeStore, 'get' | 'list'>;
  directory: PodDirectory;
  /** The staleness limit of the policy governing a node with these labels. */
  staleAfterMs: (labels: Record<string, string>) => number;
  /** The front-proxy CA and headers as last read; undefined: every caller is refused. */
  trust: () => RequestHeaderConfig | undefined;
  review: AccessReview;
  /** Undefined when ready; otherwise what is missing (/readyz). */
  notReady: () => string | undefined;
  now: () => number;
  log: Logger;
}

/** When a node has a single sample, what its CPU rate covers: the agent's 1 s sampling interval. */
const SAMPLE_INTERVAL_MS = 1000;

export function nodeReading(r: NodeRecord, nowMs: number): NodeReading {
  const w = r.window;
  const n = w.length;
  return {
    name: r.name,
    labels: r.labels,
    timestampMs: r.value('timestampMs'),
    windowMs: n >= 2 ? w.get(n - 1, COLUMN.timestampMs) - w.get(n - 2, COLUMN.timestampMs) : SAMPLE_INTERVAL_MS,
    cpuMillicores: r.value('cpuUsageMillicores'),
    // The kubelet's figure where the agent sends it (cgroup v1: the root memory cgroup's), so kubectl top agrees with the kubelet.
    memoryWorkingSetBytes: r.value('rootCgroupMemoryWorkingSetBytes') || r.value('memoryWorkingSetBytes'),
    ageMs: Math.max(0, nowMs - r.receivedAtMs),
  };
}

export const podsReading = (r: NodeRecord, nowMs: number): PodsReading => ({
  timestampMs: r.podsAtMs,
  windowMs: r.podsWindowMs,
  ageMs: Math.max(0, nowMs - r.podsReceivedAtMs),
  pods: r.pods,
});

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

/**
 * The main thread answers the webhook too: a list of 100,000 pods is about 2 s
 * of CPU (docs/benchmarks.md), so lists are built and written in slices with
 * a turn of the event loop between them, and a review waits one slice, not
 * the whole list.
 */
const SLICE = 1000;
const yieldTurn = () => new Promise<void>((resolve) => setImmediate(resolve));

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
  const probe = (_request: FastifyRequest, reply: FastifyReply) => reply.type('text/plain').send('ok');
  app.get('/healthz', probe);
  app.get('/livez', probe);
  app.get('/readyz', async (_request, reply) => {
    const missing = o.notReady();
    if (missing) return reply.code(503).type('text/plain').send(`not ready: ${missing}`);
    return reply.type('text/plain').send('ok');
  });

  const listNodes = (labels: LabelSelector | undefined, fields: FieldSelector | undefined, nowMs: number): NodeMetrics[] => {
    const items: NodeMetrics[] = [];
    for (const r of o.store.list()) {
      if (!r.hasSample || !fieldsMatch(fields, r.name, '') || !labelsMatch(labels, r.labels)) continue;
      const m = nodeMetrics(nodeReading(r, nowMs), o.staleAfterMs(r.labels), nowMs);
      if (m) items.push(m);
    }
    return items.sort((x, y) => (x.metadata.name < y.metadata.name ? -1 : x.metadata.name > y.metadata.name ? 1 : 0));
  };

  /**
   * A pod's metrics from its own node's report only: an agent speaks for the
   * pods bound to its node, no other. stamps: the strings a node's pods share,
   * made once per node and request.
   */
  const podOf = (pod: DirectoryPod, nowMs: number, stamps?: Map<NodeRecord, PodsStamp>): PodMetrics | undefined => {
    const r = o.store.get(pod.node);
    if (!r?.hasSample) return undefined;
    const usage = r.pods.find((p) => p.uid === pod.uid);
    if (!usage) return undefined;
    const reading = podsReading(r, nowMs);
    let stamp = stamps?.get(r);
    if (!stamp) {
      stamp = podsStamp(reading, nowMs);
      stamps?.set(r, stamp);
    }
    return podMetrics(pod, usage, reading, o.staleAfterMs(r.labels), stamp);
  };

  /**
   * In the order the answer has (namespace, then name), from the directory's
   * namespace index: a namespace (what the HPA asks) costs its own pods, and
   * no sort of the whole list holds the thread.
   */
  const listPods = async (namespace: string | undefined, labels: LabelSelector | undefined, fields: FieldSelector | undefined, nowMs: number): Promise<PodMetrics[]> => {
    const items: PodMetrics[] = [];
    const stamps = new Map<NodeRecord, PodsStamp>();
    const namespaces = namespace !== undefined ? [namespace] : [...o.directory.namespaces()].sort();
    let seen = 0;
    for (const ns of namespaces) {
      const pods = [...o.directory.inNamespace(ns)].sort((x, y) => (x.name < y.name ? -1 : x.name > y.name ? 1 : 0));
      for (const pod of pods) {
        if (++seen % SLICE === 0) await yieldTurn();
        if (!fieldsMatch(fields, pod.name, pod.namespace) || !labelsMatch(labels, pod.labels)) continue;
        const m = podOf(pod, nowMs, stamps);
        if (m) items.push(m);
      }
    }
    return items;
  };

  const getNode = (name: string, nowMs: number): NodeMetrics | undefined => {
    const r = o.store.get(name);
    return r?.hasSample ? nodeMetrics(nodeReading(r, nowMs), o.staleAfterMs(r.labels), nowMs) : undefined;
  };

  const getPod = (namespace: string, name: string, nowMs: number): PodMetrics | undefined => {
    const pod = o.directory.byName(namespace, name);
    return pod && podOf(pod, nowMs);
  };

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
      if (r.name !== undefined) {
        const found = r.resource === 'nodes' ? getNode(r.name, nowMs) : getPod(r.namespace ?? '', r.name, nowMs);
        if (!found) return send(reply, 404, notFound(r.resource, r.resource === 'pods' ? `${r.namespace}/${r.name}` : r.name));
        return send(reply, 200, found);
      }
      const labels = parseLabelSelector(q.get('labelSelector') ?? '');
      const fields = parseFieldSelector(q.get('fieldSelector') ?? '');
      const list = r.resource === 'nodes' ? nodeMetricsList(listNodes(labels, fields, nowMs)) : podMetricsList(await listPods(r.namespace, labels, fields, nowMs));
      return reply.code(200).type('application/json').send(Readable.from(listBody(list)));
    } catch (err) {
      if (err instanceof BadRequest || (err as Error).name === 'SelectorError') return send(reply, 400, status(400, 'BadRequest', (err as Error).message));
      throw err;
    }
  };
  app.route({ method: ['GET', 'POST', 'PUT', 'PATCH', 'DELETE'], url: '/*', handler: serve });
  app.route({ method: ['GET', 'POST', 'PUT', 'PATCH', 'DELETE'], url: '/', handler: serve });
}
