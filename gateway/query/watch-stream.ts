// The nodes of the store as a stream of NodeEvents: a snapshot, SYNCED, then
// each node as it changes. Written to a sink, which is a gRPC WatchNodes call
// or, when the gateway shards, another replica's HTTPS stream
// (gateway/shard/peer-plugin.ts).
//
// Nothing waits for the reader but what the sink holds (grpc-js's high-water
// mark of messages, or the socket's buffer) and one name per node changed
// since it was last sent: the snapshot is computed as the reader reads it,
// and a node that changes again before it was sent is sent once, as it is
// then. A reader that takes nothing for stallMs is ended, so what a watch
// holds is bounded by the store, never by how long it stalls.
import type { NodeEvent } from '../../proto/gen/oversell/v1/NodeEvent.js';
import type { NodeStatus } from '../../proto/gen/oversell/v1/NodeStatus.js';
import type { NodeRecord, NodeStore } from '../store/node-store.js';
import type { RowFilter } from './summary-table.js';

/** Where the events go: a writable stream with backpressure. */
export interface WatchSink {
  write(event: NodeEvent): unknown;
  readonly writableNeedDrain: boolean;
  on(event: 'drain', listener: () => void): unknown;
  off(event: 'drain', listener: () => void): unknown;
}

export interface WatchStreamOptions {
  store: Pick<NodeStore, 'list' | 'get' | 'on' | 'off'>;
  status: (record: NodeRecord) => NodeStatus;
  filter: RowFilter;
  sink: WatchSink;
  stallMs: number;
  /** The reader took nothing for stallMs with `waiting` nodes to send; the stream has stopped. */
  onStalled: (waiting: number) => void;
  /**
   * Calls its argument when what `filter` keeps may have changed for every
   * node at once (sharded: the replicas changed, and with them which nodes
   * this one streams); returns how to stop listening.
   */
  refilterOn?: (refilter: () => void) => () => void;
}

/** Starts streaming; the returned function stops it (idempotent). */
export function streamNodes(o: WatchStreamOptions): () => void {
  const { store, sink } = o;
  const names = store.list().map((r) => r.name);
  let next = 0;
  let synced = false;
  let ended = false;
  const changed = new Set<string>();
  const shown = new Set<string>();
  let stall: NodeJS.Timeout | undefined;
  const stop = () => {
    if (ended) return;
    ended = true;
    clearTimeout(stall);
    store.off('updated', onChange);
    store.off('removed', markChanged);
    sink.off('drain', pump);
    stopRefilter?.();
  };
  const tooSlow = () => {
    if (ended) return;
    const waiting = changed.size + names.length - next;
    stop();
    o.onStalled(waiting);
  };
  /** The node as it is now: sent if it matches, removed if it no longer does. */
  const sendCurrent = (name: string, type: 'SNAPSHOT' | 'UPDATED') => {
    const r = store.get(name);
    const s = r && o.status(r);
    if (r && s && o.filter(r, s.policy ?? '')) {
      shown.add(name);
      sink.write({ type, node: s });
    } else if (shown.delete(name)) {
      sink.write({ type: 'REMOVED', node: { name } });
    }
  };
  function pump() {
    if (ended) return;
    clearTimeout(stall);
    stall = undefined;
    while (!sink.writableNeedDrain) {
      if (next < names.length) {
        const name = names[next++]!;
        changed.delete(name);
        sendCurrent(name, 'SNAPSHOT');
      } else if (!synced) {
        synced = true;
        sink.write({ type: 'SYNCED' });
      } else {
        const first = changed.values().next().value as string | undefined;
        if (first === undefined) return;
        changed.delete(first);
        sendCurrent(first, 'UPDATED');
      }
    }
    stall = setTimeout(tooSlow, o.stallMs);
    stall.unref();
  }
  // Updated or removed alike: the node is sent as it is when the reader can take it.
  function markChanged(name: string) {
    changed.add(name);
    if (!sink.writableNeedDrain) pump();
  }
  function onChange(r: NodeRecord) {
    markChanged(r.name);
  }
  store.on('updated', onChange);
  store.on('removed', markChanged);
  sink.on('drain', pump);
  const stopRefilter = o.refilterOn?.(() => {
    for (const r of store.list()) changed.add(r.name);
    for (const name of shown) changed.add(name);
    if (!sink.writableNeedDrain) pump();
  });
  pump();
  return stop;
}
