// Real gRPC clients of the gateway, for tests.
import * as grpc from '@grpc/grpc-js';
import type { NodeEvent__Output } from '../../proto/gen/oversell/v1/NodeEvent.js';
import type { NodeStatus__Output } from '../../proto/gen/oversell/v1/NodeStatus.js';
import type { NodeUsageClient } from '../../proto/gen/oversell/v1/NodeUsage.js';
import { oversellV1 } from '../../proto/load.js';
import { waitUntil } from '../../scripts/harness/wait.js';

export function queryClient(port: number): NodeUsageClient {
  return new (oversellV1().NodeUsage)(`127.0.0.1:${port}`, grpc.credentials.createInsecure());
}

export function getNode(client: NodeUsageClient, name: string): Promise<NodeStatus__Output> {
  return new Promise((resolve, reject) =>
    client.GetNode({ name }, (err, res) => (err ? reject(err) : res ? resolve(res) : reject(new Error('empty')))),
  );
}

export function listNodes(client: NodeUsageClient): Promise<NodeStatus__Output[]> {
  return new Promise((resolve, reject) =>
    client.ListNodes({}, (err, res) => (err ? reject(err) : resolve(res?.nodes ?? []))),
  );
}

/** Polls until check returns a value (not undefined), or fails after timeoutMs with the last error. */
export function eventually<T>(check: () => Promise<T | undefined> | T | undefined, timeoutMs = 5000, what = 'condition'): Promise<T> {
  return waitUntil(what, check, timeoutMs);
}

export function collectWatch(client: NodeUsageClient): { events: NodeEvent__Output[]; cancel: () => void } {
  const events: NodeEvent__Output[] = [];
  const call = client.WatchNodes({});
  call.on('data', (e: NodeEvent__Output) => events.push(e));
  call.on('error', () => {});
  return { events, cancel: () => call.cancel() };
}
