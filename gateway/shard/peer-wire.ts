// Between replicas, nodes travel as the gRPC query API sends them: the same
// messages and serializers (proto/, wire/), so no second format to keep.
import type { NodeEvent, NodeEvent__Output } from '../../proto/gen/oversell/v1/NodeEvent.js';
import type { NodeStatus } from '../../proto/gen/oversell/v1/NodeStatus.js';
import type { NodeSummaries__Output } from '../../proto/gen/oversell/v1/NodeSummaries.js';
import { nodeUsageDefinition } from '../query/node-usage-service.js';

const service = nodeUsageDefinition();

export const encodeNodes = (nodes: NodeStatus[]): Buffer => service.ListNodes.responseSerialize({ nodes });
export const decodeNodes = (bytes: Buffer): NodeStatus[] => service.ListNodes.responseDeserialize(bytes).nodes;
export const encodeSummaries = (summaries: NodeSummaries__Output): Buffer => service.ListNodeSummaries.responseSerialize(summaries);
export const decodeSummaries = (bytes: Buffer): NodeSummaries__Output => service.ListNodeSummaries.responseDeserialize(bytes);

/** A watch's events, each as its 4-byte big-endian length and the NodeEvent message. */
export function encodeEvent(event: NodeEvent): Buffer {
  const message = service.WatchNodes.responseSerialize(event);
  const frame = Buffer.allocUnsafe(4 + message.length);
  frame.writeUInt32BE(message.length, 0);
  message.copy(frame, 4);
  return frame;
}

/** Cuts a watch's bytes, as they arrive in any pieces, back into its events. */
export class EventFrames {
  #pending = Buffer.alloc(0);

  /** The events `chunk` completes, in order. */
  push(chunk: Buffer): NodeEvent__Output[] {
    let buffer = this.#pending.length > 0 ? Buffer.concat([this.#pending, chunk]) : chunk;
    const events: NodeEvent__Output[] = [];
    while (buffer.length >= 4) {
      const length = buffer.readUInt32BE(0);
      if (length > MAX_EVENT_BYTES) throw new Error(`a watch event of ${length} bytes is past the ${MAX_EVENT_BYTES} a node's status can take: the stream is not a peer's`);
      if (buffer.length < 4 + length) break;
      events.push(service.WatchNodes.responseDeserialize(buffer.subarray(4, 4 + length)));
      buffer = buffer.subarray(4 + length);
    }
    this.#pending = Buffer.from(buffer);
    return events;
  }
}

/** The gRPC port's own limit on a message (MAX_RECEIVE_MESSAGE_BYTES): one node's status is far below it. */
const MAX_EVENT_BYTES = 4 * 1024 * 1024;
