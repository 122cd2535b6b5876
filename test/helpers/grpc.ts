// Real gRPC clients of the gateway, for tests.
import * as grpc from '@grpc/grpc-js';
import type { NodeEvent__Output } from '../../proto/gen/oversell/v1/NodeEvent.js';
import type { NodeStatus__Output } from '../../proto/gen/oversell/v1/NodeStatus.js';
import type { NodeUsageClient } from '../../proto/gen/oversell/v1/NodeUsage.js';
import type { Sample__Output } from '../../proto/gen/oversell/v1/Sample.js';
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

/** Metadata with `authorization: Bearer <token>`, or none without a token. */
export function bearer(token?: string): grpc.Metadata {
  const m = new grpc.Metadata();
  if (token) m.set('authorization', `Bearer ${token}`);
  return m;
}

/** An 8-core, 16 GiB node's sample: 500m and 1 GiB used, 4 cores and 8 GiB requested by 4 pods, stamped now. */
export function plainSample(seq: number): Sample__Output {
  return {
    seq, timestampMs: Date.now(), cpuUsageMillicores: 500, memoryWorkingSetBytes: 2 ** 30, rootCgroupMemoryWorkingSetBytes: 0, cpuManager: null,
    capacity: { cpuMillicores: 8000, memoryBytes: 2 ** 34 }, pressure: null,
    requests: { cpuMillicores: 4000, memoryBytes: 2 ** 33, podCount: 4, known: true }, summaries: [], onBeat: false, podNamesAsBefore: false, podsIncluded: false, pods: [],
  };
}

/** Heap in use after a full collection (run node with --expose-gc; without it, without the collection). */
export function heapUsedAfterGc(): number {
  global.gc?.();
  return process.memoryUsage().heapUsed;
}
