// Between replicas, nodes travel as the gRPC query API sends them: the same
// messages and serializers (proto/, wire/), so no second format to keep.
import type { NodeStatus } from '../../proto/gen/oversell/v1/NodeStatus.js';
import type { NodeSummaries__Output } from '../../proto/gen/oversell/v1/NodeSummaries.js';
import { nodeUsageDefinition } from '../query/node-usage-service.js';

const service = nodeUsageDefinition();

export const encodeNodes = (nodes: NodeStatus[]): Buffer => service.ListNodes.responseSerialize({ nodes });
export const decodeNodes = (bytes: Buffer): NodeStatus[] => service.ListNodes.responseDeserialize(bytes).nodes;
export const encodeSummaries = (summaries: NodeSummaries__Output): Buffer => service.ListNodeSummaries.responseSerialize(summaries);
export const decodeSummaries = (bytes: Buffer): NodeSummaries__Output => service.ListNodeSummaries.responseDeserialize(bytes);
