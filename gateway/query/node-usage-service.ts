// NodeUsage: the query API (get, list, watch) over the store.
import * as grpc from '@grpc/grpc-js';
import type { NodeEvent } from '../../proto/gen/oversell/v1/NodeEvent.js';
import type { NodeUsageHandlers } from '../../proto/gen/oversell/v1/NodeUsage.js';
import type { WatchNodesRequest__Output } from '../../proto/gen/oversell/v1/WatchNodesRequest.js';
import type { PolicySource } from '../policies/policy-source.js';
import type { NodeRecord, NodeStore } from '../store/node-store.js';
import { nodeStatus } from './node-status.js';

export interface NodeUsageServiceOptions {
  store: NodeStore;
  policies: PolicySource;
  now?: () => number;
}

export function nodeUsageService(options: NodeUsageServiceOptions): NodeUsageHandlers {
  const { store } = options;
  const now = options.now ?? Date.now;
  const status = (r: NodeRecord) => nodeStatus(r, options.policies, now());

  return {
    GetNode(call, callback) {
      const name = call.request.name;
      if (!name) return callback({ code: grpc.status.INVALID_ARGUMENT, details: 'name is required' });
      const record = store.get(name);
      if (!record) {
        return callback({ code: grpc.status.NOT_FOUND, details: `no agent has reported for node ${JSON.stringify(name)}` });
      }
      callback(null, status(record));
    },

    ListNodes(_call, callback) {
      const nodes = store.list().sort((a, b) => a.name.localeCompare(b.name)).map(status);
      callback(null, { nodes });
    },

    WatchNodes(call: grpc.ServerWritableStream<WatchNodesRequest__Output, NodeEvent>) {
      // Subscribe before the snapshot so no change falls between the two.
      const pending: NodeEvent[] = [];
      let synced = false;
      const send = (e: NodeEvent) => (synced ? call.write(e) : pending.push(e));
      const onUpdated = (r: NodeRecord) => send({ type: 'UPDATED', node: status(r) });
      const onRemoved = (name: string) => send({ type: 'REMOVED', node: { name } });
      store.on('updated', onUpdated);
      store.on('removed', onRemoved);
      const stop = () => {
        store.off('updated', onUpdated);
        store.off('removed', onRemoved);
      };
      call.on('cancelled', stop);
      call.on('close', stop);
      call.on('error', stop);

      for (const r of store.list()) call.write({ type: 'SNAPSHOT', node: status(r) });
      call.write({ type: 'SYNCED' });
      synced = true;
      for (const e of pending) call.write(e);
    },
  };
}
