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

/** What an old gateway's AgentStream.Report receives: a hello, a sample, or (to it) nothing it can read. */
export interface OldGatewayMessage {
  hello?: unknown;
  sample?: { seq: number; pods: Record<string, unknown>[] } | null;
}

/**
 * A gateway of the contract before batches on 127.0.0.1, port 0: it welcomes
 * each hello as such gateways did (no sending settings) and hands every
 * message it read to onMessage. close() ends it.
 */
export async function startOldGateway(onMessage: (m: OldGatewayMessage) => void): Promise<{ port: number; close: () => void }> {
  const server = new grpc.Server();
  server.addService((contractBeforeBatches().AgentStream as unknown as { service: grpc.ServiceDefinition }).service, {
    Report(call: grpc.ServerDuplexStream<OldGatewayMessage, unknown>) {
      call.on('data', (m: OldGatewayMessage) => {
        onMessage(m);
        if (m.hello) call.write({ welcome: { lastSeq: 0, settings: { sampleIntervalMs: 0, podReportEvery: 0 } } });
      });
      call.on('end', () => call.end());
    },
  });
  const port = await new Promise<number>((resolve, reject) => server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (err, p) => (err ? reject(err) : resolve(p))));
  return { port, close: () => server.forceShutdown() };
}
