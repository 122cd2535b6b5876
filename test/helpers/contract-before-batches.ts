// The gRPC contract as it was before batched samples (test/fixtures/proto/before-batches),
// as grpc-js loads it: what an old gateway or agent speaks in a rollout test.
import { fileURLToPath } from 'node:url';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import { LOADER_OPTIONS } from '../../proto/load.js';

export function contractBeforeBatches(): grpc.GrpcObject {
  const file = fileURLToPath(new URL('../fixtures/proto/before-batches/oversell/v1/oversell.proto', import.meta.url));
  return (grpc.loadPackageDefinition(protoLoader.loadSync(file, LOADER_OPTIONS)) as { oversell: { v1: grpc.GrpcObject } }).oversell.v1;
}
