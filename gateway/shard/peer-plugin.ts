// What a replica of a sharded gateway tells the others about the nodes it
// holds, on its webhook port: the query API's own views (query/local-nodes.ts),
// encoded as the gRPC API encodes them, so a node reads the same from any
// replica; and where the others' reports of their nodes' decision inputs
// arrive (node-inputs-sender.ts). Only a replica may ask or report: the caller
// must present this gateway's serving certificate as its client certificate
// (peer-client.ts), since usage is data the query API gives only to
// authorized callers, the replica that was asked has authorized its caller,
// and a report moves the grants this replica makes.
import type { TLSSocket } from 'node:tls';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { SelectorError } from '../../lib/label-selector.js';
import { isObject } from '../../lib/json.js';
import { filterOf, holdsUsage, type LocalNodes, type NodeFilterRequest } from '../query/local-nodes.js';
import { BadRequest } from '../metrics-api/resource-metrics.js';
import type { MetricsQuery, MetricsReader } from '../metrics-api/metrics-reader.js';
import { Fingerprint } from './peer-client.js';
import { encodeEvent, encodeNodes, encodeSummaries } from './peer-wire.js';
import { streamNodes } from '../query/watch-stream.js';
import type { RowFilter } from '../query/summary-table.js';
import type { NodeRecord } from '../store/node-store.js';
import type { PeerNodeInputs } from '../store/peer-inputs.js';
import { peerInputsFromWire } from './node-inputs-wire.js';

export const PEER_PATHS = { nodes: '/shard/v1/nodes', summaries: '/shard/v1/summaries', metrics: '/shard/v1/metrics', watch: '/shard/v1/watch', inputs: '/shard/v1/inputs' } as const;

export interface PeerPluginOptions {
  local: LocalNodes;
  /** The serving certificate (PEM) this replica presents now: callers must present the same. */
  certificate: () => string;
  /**
   * Which nodes this replica streams in a watch (each node from one replica):
   * those it first-owns, or, asked to stand in for replicas the caller cannot
   * reach (member keys), those it streams in their place (ShardView.standsIn);
   * and how long a reader may stall.
   */
  watch: { streams: (node: string, standingInFor?: ReadonlySet<string>) => boolean; onMembersChange: (listener: () => void) => () => void; stallMs: number };
  /** Where another replica's reports of its nodes' decision inputs are kept (node-inputs-sender.ts), and a report refused. */
  inputs: { keep: (nodes: ReadonlyMap<string, PeerNodeInputs>) => void; refused: (why: string) => void };
  /** With the metrics API: what metrics.k8s.io finds here, for the replica a `kubectl top` or an HPA reached. */
  metrics?: { reader: MetricsReader; now: () => number };
}

/** Most names one request may ask for (a get asks for one). */
const MAX_NAMES = 1000;

export interface PeerRequest extends NodeFilterRequest {
  names?: string[];
  /** A watch's: the replicas (member keys) the caller cannot reach, whose first-owned nodes this replica streams if it owns them next. */
  standInFor?: string[];
}

const strings = (v: unknown): v is string[] => Array.isArray(v) && v.length <= MAX_NAMES && v.every((n) => typeof n === 'string');

/** The body as a MetricsQuery, or why it is not one. */
function metricsQuery(body: unknown): MetricsQuery | string {
  if (!isObject(body)) return 'the body must be a JSON object';
  const { resource, namespace, name, labelSelector = '', fieldSelector = '' } = body;
  if (resource !== 'nodes' && resource !== 'pods') return 'resource must be "nodes" or "pods"';
  const strings = [namespace, name].every((v) => v === undefined || typeof v === 'string') && typeof labelSelector === 'string' && typeof fieldSelector === 'string';
  if (!strings) return 'namespace, name, labelSelector and fieldSelector must be strings';
  return { resource, labelSelector, fieldSelector, ...(namespace !== undefined && { namespace: namespace as string }), ...(name !== undefined && { name: name as string }) };
}

/** The body as a PeerRequest, or why it is not one. */
function peerRequest(body: unknown): PeerRequest | string {
  if (!isObject(body)) return 'the body must be a JSON object';
  const { labelSelector = '', policy = '', names, standInFor } = body;
  if (typeof labelSelector !== 'string' || typeof policy !== 'string') return 'labelSelector and policy must be strings';
  if (names !== undefined && !strings(names)) return `names must be an array of at most ${MAX_NAMES} strings`;
  if (standInFor !== undefined && !strings(standInFor)) return `standInFor must be an array of at most ${MAX_NAMES} strings`;
  return { labelSelector, policy, ...(names !== undefined && { names }), ...(standInFor !== undefined && { standInFor }) };
}

export async function peerPlugin(app: FastifyInstance, o: PeerPluginOptions): Promise<void> {
  const ours = new Fingerprint();
  app.addHook('onRequest', async (request, reply) => {
    const presented = (request.raw.socket as TLSSocket).getPeerCertificate?.()?.fingerprint256;
    if (presented !== ours.of(o.certificate())) {
      return reply.code(403).type('text/plain').send('only a replica of this gateway, presenting its serving certificate as client certificate, may read the nodes it holds; query the gRPC API instead');
    }
  });

  /**
   * The request and the nodes it keeps that `also` keeps (default: those this
   * replica holds usage on), or undefined once a 400 is answered.
   */
  const asked = (request: FastifyRequest, reply: FastifyReply, also: (r: NodeRecord) => boolean = holdsUsage): { req: PeerRequest; keep: RowFilter } | undefined => {
    const req = peerRequest(request.body);
    if (typeof req === 'string') return void reply.code(400).type('text/plain').send(req);
    let filter: RowFilter;
    try {
      filter = filterOf(req);
    } catch (err) {
      if (err instanceof SelectorError) return void reply.code(400).type('text/plain').send(err.message);
      throw err;
    }
    return { req, keep: (r, policy) => also(r) && filter(r, policy) };
  };

  app.post(PEER_PATHS.nodes, async (request, reply) => {
    const a = asked(request, reply);
    if (!a) return reply;
    const records = a.req.names?.flatMap((n) => o.local.store.get(n) ?? []);
    return reply.type('application/x-protobuf').send(encodeNodes(await o.local.list(a.keep, records)));
  });

  // A watch streams the nodes this replica is the first owner of, with usage or not: each node from one replica.
  // Asked to stand in for replicas the caller cannot reach, the nodes it streams in their place instead.
  app.post(PEER_PATHS.watch, async (request, reply) => {
    let standingInFor: ReadonlySet<string> | undefined;
    const a = asked(request, reply, (r) => o.watch.streams(r.name, standingInFor));
    if (!a) return reply;
    if (a.req.standInFor) standingInFor = new Set(a.req.standInFor);
    reply.hijack();
    const res = reply.raw;
    // A watch may stay quiet for as long as nothing changes: not an idle connection to close.
    res.socket?.setTimeout(0);
    res.writeHead(200, { 'content-type': 'application/x-oversell-node-events' });
    const stop = streamNodes({
      store: o.local.store,
      status: (r) => o.local.status(r),
      filter: a.keep,
      sink: {
        write: (event) => res.write(encodeEvent(event)),
        get writableNeedDrain() {
          return res.writableNeedDrain;
        },
        on: (event, listener) => res.on(event, listener),
        off: (event, listener) => res.off(event, listener),
      },
      stallMs: o.watch.stallMs,
      // The replica that asked stopped reading: its own caller is ended there for the same stall.
      onStalled: () => res.destroy(),
      refilterOn: o.watch.onMembersChange,
    });
    res.on('close', stop);
  });

  app.post(PEER_PATHS.inputs, async (request, reply) => {
    const nodes = peerInputsFromWire(request.body);
    if (typeof nodes === 'string') {
      o.inputs.refused(nodes);
      return reply.code(400).type('text/plain').send(`node inputs refused: ${nodes}`);
    }
    o.inputs.keep(nodes);
    return reply.code(200).send('');
  });

  app.post(PEER_PATHS.summaries, async (request, reply) => {
    const a = asked(request, reply);
    if (!a) return reply;
    return reply.type('application/x-protobuf').send(encodeSummaries(o.local.summaries(a.keep)));
  });

  const metrics = o.metrics;
  if (metrics) {
    app.post(PEER_PATHS.metrics, async (request, reply) => {
      const query = metricsQuery(request.body);
      if (typeof query === 'string') return reply.code(400).type('text/plain').send(query);
      try {
        return reply.type('application/json').send(JSON.stringify({ items: await metrics.reader.query(query, metrics.now()) }));
      } catch (err) {
        if (err instanceof BadRequest || err instanceof SelectorError) return reply.code(400).type('text/plain').send(err.message);
        throw err;
      }
    });
  }
}
