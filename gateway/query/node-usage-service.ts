// NodeUsage: the query API (get, list, watch, policies) over the store and,
// when the gateway shards, over the other replicas' (peer-nodes.ts).
import * as grpc from '@grpc/grpc-js';
import type { NodeEvent } from '../../proto/gen/oversell/v1/NodeEvent.js';
import type { NodeUsageDefinition, NodeUsageHandlers } from '../../proto/gen/oversell/v1/NodeUsage.js';
import { oversellV1 } from '../../proto/load.js';
import { repeatedFieldSerializer } from '../../wire/repeated-field.js';
import { nodeSummariesSerializer } from '../../wire/node-summaries-codec.js';
import type { WatchNodesRequest__Output } from '../../proto/gen/oversell/v1/WatchNodesRequest.js';
import { SelectorError } from '../../lib/label-selector.js';
import type { PolicySource } from '../policies/policy-source.js';
import { authStatus } from '../auth/grpc-status.js';
import type { QueryAuthorizer, QueryGrant, QueryVerb } from '../auth/query-authorizer.js';
import type { NodeRecord } from '../store/node-store.js';
import type { RowFilter } from './summary-table.js';
import { filterOf, holdsUsage, type LocalNodes } from './local-nodes.js';
import { mergeStatuses, mergeSummaries, type PeerNodes } from './peer-nodes.js';
import { policyInfos } from './policy-info.js';
import { streamNodes, type WatchSink } from './watch-stream.js';
import { DEFAULT_QUERY_LIMITS, WatchSlots, type QueryLimits, type QueryRefusal } from './query-limits.js';

export interface NodeUsageServiceOptions {
  /** The nodes this replica holds, as the API shows them. */
  local: LocalNodes;
  policies: PolicySource;
  /** Undefined when ready; otherwise why not (answered as UNAVAILABLE). */
  notReady: () => string | undefined;
  /** Without it anyone who reaches the port may query (local mode; docs/security.md). */
  authorize?: QueryAuthorizer;
  onRefused?: (failure: string) => void;
  /** A watch the gateway ended: its client read too slowly, its token expired, or its access was revoked. */
  onWatchEnded?: (reason: WatchEnd) => void;
  /** Watches per caller and per replica, and how long a watch may go unread (default DEFAULT_QUERY_LIMITS). */
  limits?: Pick<QueryLimits, 'watches' | 'watchesPerCaller' | 'watchStallMs'>;
  /** A watch refused by those limits. */
  onLimited?: (reason: QueryRefusal) => void;
  now?: () => number;
  /**
   * Sharded: the other replicas, for the nodes whose usage is there. A get
   * asks the node's owners when this replica holds no usage on it younger
   * than localIfYoungerMs; a list asks every replica and shows each node as
   * the replica with its freshest sample does.
   */
  peers?: { nodes: PeerNodes; localIfYoungerMs: number; onFailed: (failed: string[]) => void };
}

export type WatchEnd = 'slow-reader' | 'token-expired' | 'revoked';

/** Longest setTimeout: a token valid for longer is left to the periodic re-check. */
const MAX_TIMER_MS = 2 ** 31 - 1;

/**
 * The NodeUsage service, with ListNodes encoded node by node (see
 * repeated-field.ts) and ListNodeSummaries column by column (packed-columns.ts).
 */
export function nodeUsageDefinition(): NodeUsageDefinition {
  const service = oversellV1().NodeUsage.service;
  return {
    ...service,
    ListNodes: { ...service.ListNodes, responseSerialize: repeatedFieldSerializer('nodes', 1, service.GetNode.responseSerialize) },
    ListNodeSummaries: { ...service.ListNodeSummaries, responseSerialize: nodeSummariesSerializer() },
  };
}

export function nodeUsageService(options: NodeUsageServiceOptions): NodeUsageHandlers {
  const { local, policies, peers } = options;
  const store = local.store;
  const now = options.now ?? Date.now;
  const status = (r: NodeRecord) => local.status(r);
  const limits = { ...DEFAULT_QUERY_LIMITS, ...options.limits };
  const slots = new WatchSlots(limits, options.onLimited);
  const unavailable = () => {
    const why = options.notReady();
    return why ? { code: grpc.status.UNAVAILABLE, details: `gateway not ready: ${why}; retry shortly` } : undefined;
  };
  const badSelector = (err: unknown) => {
    if (err instanceof SelectorError) return { code: grpc.status.INVALID_ARGUMENT, details: err.message };
    throw err;
  };

  /** The filter of a list call, or the status to answer with (not ready, bad selector). */
  const listFilter = (request: { labelSelector: string; policy: string }): RowFilter | Partial<grpc.StatusObject> => {
    const u = unavailable();
    if (u) return u;
    try {
      return filterOf(request);
    } catch (err) {
      return badSelector(err);
    }
  };

  /** The source of this replica's stand-in stream in a sharded watch (the others are named by their webhook). */
  const STANDING_IN = 'this replica standing in';
  /**
   * A watch when the gateway shards: this replica streams the nodes it is the
   * first owner of, each other replica its own (peer-plugin.ts), all into the
   * one call, so each node comes from the replica that holds its usage.
   * SYNCED once this replica and each replica asked at the start have synced
   * (or failed); a replica's snapshot after that (it joined, or its stream
   * was opened again) arrives as updates. While some replicas cannot be
   * reached, their nodes come from their next owners (PeerWatchHandlers.standIn):
   * this replica's among them from a second local stream, stopped (without
   * REMOVED) when they change; a watch not yet synced waits for those too.
   */
  const watchSharded = (call: grpc.ServerWritableStream<WatchNodesRequest__Output, NodeEvent>, filter: RowFilter, p: NonNullable<typeof peers>, onStalled: (waiting: number | undefined) => void) => {
    let synced = false;
    // The other replicas' streams wait, paused, while the client is behind; as long as it reads nothing, the watch ends as the local one would.
    let behind: NodeJS.Timeout | undefined;
    const waitingFor = new Set<string>(['']);
    const arrived = (from?: string) => {
      if (from !== undefined) waitingFor.delete(from);
      if (synced || waitingFor.size > 0) return;
      synced = true;
      call.write({ type: 'SYNCED' });
    };
    const pass = (from: string, event: NodeEvent) => {
      if (event.type === 'SYNCED') return arrived(from);
      call.write(synced && event.type === 'SNAPSHOT' ? { ...event, type: 'UPDATED' } : event);
      if (!call.writableNeedDrain || behind) return;
      remote.pause();
      behind = setTimeout(() => onStalled(undefined), limits.watchStallMs);
      behind.unref();
    };
    /** The stand-ins now open, this replica's (STANDING_IN) and the other replicas'; how to stop this replica's. */
    let standIns: readonly string[] = [];
    let stopStandIn: (() => void) | undefined;
    const sink = (from: string): WatchSink => ({
      write: (event: NodeEvent) => pass(from, event),
      get writableNeedDrain() {
        return call.writableNeedDrain;
      },
      on: (event, listener) => call.on(event, listener),
      off: (event, listener) => call.off(event, listener),
    });
    const remote = p.nodes.watch(call.request, {
      event: pass,
      failed: (from, why) => {
        p.onFailed([`${from}: watch stream: ${why}`]);
        arrived(from);
      },
      standIn: (unreachable, opened) => {
        stopStandIn?.();
        stopStandIn = undefined;
        for (const from of standIns) waitingFor.delete(from);
        standIns = unreachable.size > 0 ? [STANDING_IN, ...opened] : [];
        if (!synced) for (const from of standIns) waitingFor.add(from);
        if (unreachable.size > 0) {
          stopStandIn = streamNodes({
            store, status, stallMs: limits.watchStallMs, onStalled,
            filter: (r, policy) => p.nodes.standsIn(r.name, unreachable) && filter(r, policy),
            sink: sink(STANDING_IN),
            refilterOn: (refilter) => p.nodes.onMembersChange(refilter),
          });
        }
        arrived();
      },
    });
    for (const from of remote.initial) waitingFor.add(from);
    const resume = () => {
      clearTimeout(behind);
      behind = undefined;
      remote.resume();
    };
    call.on('drain', resume);
    const stopLocal = streamNodes({
      store, status, stallMs: limits.watchStallMs, onStalled,
      filter: (r, policy) => p.nodes.streams(r.name) && filter(r, policy),
      sink: sink(''),
      refilterOn: (refilter) => p.nodes.onMembersChange(refilter),
    });
    return () => {
      clearTimeout(behind);
      stopLocal();
      stopStandIn?.();
      remote.close();
      call.off('drain', resume);
    };
  };

  // WatchNodes takes the caller its slots count by: the authorized service passes the user, local mode the connection.
  const open: NodeUsageHandlers & { WatchNodes(call: grpc.ServerWritableStream<WatchNodesRequest__Output, NodeEvent>, caller?: string): void } = {
    GetNode(call, callback) {
      const u = unavailable();
      if (u) return callback(u);
      const name = call.request.name;
      if (!name) return callback({ code: grpc.status.INVALID_ARGUMENT, details: 'name is required' });
      const record = store.get(name);
      // Sharded, a replica may hold the node's raw allocatable and labels (the node watch) but no usage: that is on the owners.
      const here = record && (!peers || holdsUsage(record)) ? status(record) : undefined;
      // Its agent streaming here, a replica's data is as fresh as any owner's (up to one send interval old).
      if (!peers || (here && (record!.streamId !== undefined || Number(here.ageMs) < peers.localIfYoungerMs))) {
        if (here) return callback(null, here);
        return callback({ code: grpc.status.NOT_FOUND, details: `no agent has reported for node ${JSON.stringify(name)}` });
      }
      peers.nodes.get(name).then(
        ({ answers, failed }) => {
          if (failed.length > 0) peers.onFailed(failed);
          const [best] = mergeStatuses([here ? [here] : [], ...answers.map((a) => [a])]);
          if (best) return callback(null, best);
          const owners = peers.nodes.owners(name);
          const where = owners.length > 0 ? ` or to its owners ${owners.join(', ')}${failed.length > 0 ? ` (not answering: ${failed.join('; ')})` : ''}` : '';
          callback({ code: grpc.status.NOT_FOUND, details: `no agent has reported for node ${JSON.stringify(name)} to this replica${where}` });
        },
        (err: Error) => callback({ code: grpc.status.INTERNAL, details: `asking the node's owners failed: ${err.message}` }),
      );
    },

    ListNodes(call, callback) {
      const filter = listFilter(call.request);
      if (typeof filter !== 'function') return callback(filter);
      const all = async () => {
        const mine = await local.list(filter);
        if (!peers) return mine;
        const { answers, failed } = await peers.nodes.list(call.request);
        if (failed.length > 0) peers.onFailed(failed);
        return mergeStatuses([mine, ...answers]);
      };
      all().then(
        (nodes) => callback(null, { nodes }),
        (err: Error) => callback({ code: grpc.status.INTERNAL, details: `listing nodes failed: ${err.message}` }),
      );
    },

    ListNodeSummaries(call, callback) {
      const filter = listFilter(call.request);
      if (typeof filter !== 'function') return callback(filter);
      let mine;
      try {
        // Without a filter, every row; the table keeps them current (summary-table.ts).
        mine = local.summaries(call.request.labelSelector || call.request.policy ? filter : undefined);
      } catch (err) {
        return callback({ code: grpc.status.INTERNAL, details: `summarizing nodes failed: ${(err as Error).message}` });
      }
      if (!peers) return callback(null, mine);
      peers.nodes.summaries(call.request).then(
        ({ answers, failed }) => {
          if (failed.length > 0) peers.onFailed(failed);
          callback(null, mergeSummaries([mine, ...answers]));
        },
        (err: Error) => callback({ code: grpc.status.INTERNAL, details: `summarizing nodes failed: ${err.message}` }),
      );
    },

    WatchNodes(call: grpc.ServerWritableStream<WatchNodesRequest__Output, NodeEvent>, caller: string = `connection ${call.getPeer()}`) {
      const u = unavailable();
      if (u) return call.emit('error', u);
      let filter: RowFilter;
      try {
        filter = filterOf(call.request);
      } catch (err) {
        return call.emit('error', badSelector(err));
      }
      const slot = slots.take(caller);
      if (typeof slot !== 'function') return call.emit('error', slot);
      const stalled = (waiting: number | undefined) => {
        options.onWatchEnded?.('slow-reader');
        call.emit('error', {
          code: grpc.status.RESOURCE_EXHAUSTED,
          details: `watch ended: the client read nothing for ${limits.watchStallMs / 1000}s with ${waiting ?? 'the other replicas\''} nodes waiting to be sent; read the stream continuously and watch again, or poll with ListNodeSummaries`,
        });
      };
      const stop = peers ? watchSharded(call, filter, peers, stalled) : streamNodes({ store, status, filter, sink: call, stallMs: limits.watchStallMs, onStalled: stalled });
      const end = () => {
        stop();
        slot();
      };
      call.on('cancelled', end);
      call.on('close', end);
      call.on('error', end);
      call.on('finish', end);
    },

    ListPolicies(_call, callback) {
      const u = unavailable();
      if (u) return callback(u);
      callback(null, { policies: policyInfos(policies, store.list()) });
    },
  };

  const authorize = options.authorize;
  if (!authorize) return open;
  const check = (call: { metadata: grpc.Metadata }, verb: QueryVerb, name?: string) =>
    authorize(call.metadata.get('authorization')[0], verb, name).catch((err: unknown) => {
      const s = authStatus(err);
      options.onRefused?.(s.failure);
      throw { code: s.code, details: s.details };
    });

  /** An allowed watch lasts while its token does, and while its caller keeps access. */
  const guard = (call: grpc.ServerWritableStream<WatchNodesRequest__Output, NodeEvent>, grant: QueryGrant) => {
    if (call.writableEnded) return; // refused by the open handler (not ready, bad selector)
    const timers: NodeJS.Timeout[] = [];
    let done = false;
    const clear = () => {
      done = true;
      for (const t of timers) clearTimeout(t);
    };
    const end = (reason: WatchEnd, failure: string, code: grpc.status, details: string) => {
      if (done) return;
      clear();
      options.onRefused?.(failure);
      options.onWatchEnded?.(reason);
      call.emit('error', { code, details });
    };
    const left = grant.expiresAtMs === undefined ? Infinity : grant.expiresAtMs - now();
    if (left <= MAX_TIMER_MS) {
      timers.push(setTimeout(() => end('token-expired', 'expired', grpc.status.UNAUTHENTICATED, 'token expired; reconnect with a fresh token'), Math.max(0, left)));
    }
    const header = call.metadata.get('authorization')[0];
    timers.push(setInterval(() => {
      authorize(header, 'watch').catch((err: unknown) => {
        const s = authStatus(err);
        // The API server or the review budget being busy says nothing about the caller: the next check decides.
        if (s.code === grpc.status.UNAVAILABLE) return;
        end('revoked', s.failure, s.code, `watch ended: ${s.details}`);
      });
    }, grant.recheckMs));
    for (const t of timers) t.unref();
    call.on('cancelled', clear);
    call.on('close', clear);
    call.on('finish', clear);
    call.on('error', clear);
  };
  return {
    GetNode: (call, callback) => void check(call, 'get', call.request.name).then(() => open.GetNode(call, callback), callback),
    ListNodes: (call, callback) => void check(call, 'list').then(() => open.ListNodes(call, callback), callback),
    ListNodeSummaries: (call, callback) => void check(call, 'list').then(() => open.ListNodeSummaries(call, callback), callback),
    WatchNodes: (call) =>
      void check(call, 'watch').then(
        (grant) => {
          open.WatchNodes(call, grant.caller);
          guard(call, grant);
        },
        (e: grpc.StatusObject) => call.emit('error', e),
      ),
    ListPolicies: (call, callback) => void check(call, 'list').then(() => open.ListPolicies(call, callback), callback),
  };
}
