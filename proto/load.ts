// Loads proto/oversell/v1/oversell.proto at runtime with the same options the
// type generator used (package.json "gen:proto"), so the generated types match
// the objects grpc-js hands us.
import { fileURLToPath } from 'node:url';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import type { ProtoGrpcType } from './gen/oversell.js';

export const PROTO_FILE = fileURLToPath(new URL('./oversell/v1/oversell.proto', import.meta.url));

export const LOADER_OPTIONS: protoLoader.Options = {
  longs: Number,
  enums: String,
  defaults: true,
  oneofs: true,
};

let definition: protoLoader.PackageDefinition | undefined;
let cached: ProtoGrpcType['oversell']['v1'] | undefined;

/** The raw definition, for server reflection. */
export function packageDefinition(): protoLoader.PackageDefinition {
  definition ??= protoLoader.loadSync(PROTO_FILE, LOADER_OPTIONS);
  return definition;
}

export function oversellV1(): ProtoGrpcType['oversell']['v1'] {
  cached ??= (grpc.loadPackageDefinition(packageDefinition()) as unknown as ProtoGrpcType).oversell.v1;
  return cached;
}
