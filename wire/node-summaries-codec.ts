// NodeSummaries on the wire through wire/packed-columns.ts, for the gateway
// (serializer) and for clients that list at fleet scale (a NodeUsage client
// whose ListNodeSummaries decodes with it). Other clients decode the same
// bytes with their own protobuf library.
import * as grpc from '@grpc/grpc-js';
import type { NodeSummaries, NodeSummaries__Output } from '../proto/gen/oversell/v1/NodeSummaries.js';
import type { ProtoGrpcType } from '../proto/gen/oversell.js';
import { oversellV1, packageDefinition } from '../proto/load.js';
import { columnsOf, packedColumnsDeserializer, packedColumnsSerializer } from './packed-columns.js';

const columns = () => columnsOf(packageDefinition()['oversell.v1.NodeSummaries']);

export const nodeSummariesSerializer = () => packedColumnsSerializer<NodeSummaries>(columns());
export const nodeSummariesDeserializer = () => packedColumnsDeserializer<NodeSummaries__Output>(columns());

type NodeUsageConstructor = ProtoGrpcType['oversell']['v1']['NodeUsage'];
let client: NodeUsageConstructor | undefined;

/** The NodeUsage client class, its ListNodeSummaries decoded column by column. */
export function nodeUsageClient(): NodeUsageConstructor {
  if (client) return client;
  const service = oversellV1().NodeUsage.service;
  const methods = { ...service, ListNodeSummaries: { ...service.ListNodeSummaries, responseDeserialize: nodeSummariesDeserializer() } };
  // Same methods, paths and types as the generated class: only one decoder differs.
  client = grpc.makeClientConstructor(methods, 'oversell.v1.NodeUsage') as unknown as NodeUsageConstructor;
  return client;
}
