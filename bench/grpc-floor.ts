// The query API's reference: a bare grpc-js server (the gateway's grpc-js,
// proto and loader options) whose GetNode answers with one fixed NodeStatus,
// the gateway's own answer for a node, captured before. What ghz measures
// against it is grpc-js, Node's HTTP/2 and this machine's scheduling for the
// same response bytes: the floor under the gateway's GetNode figure.
// Run as a child process: `node --import tsx bench/grpc-floor.ts '<NodeStatus as JSON>'`;
// prints `listening <port>`.
import * as grpc from '@grpc/grpc-js';
import type { NodeStatus } from '../proto/gen/oversell/v1/NodeStatus.js';
import type { NodeUsageHandlers } from '../proto/gen/oversell/v1/NodeUsage.js';
import { oversellV1 } from '../proto/load.js';

const json = process.argv[2];
if (!json) throw new Error('usage: grpc-floor.ts <NodeStatus as JSON>');
const status = JSON.parse(json) as NodeStatus;
const unimplemented: grpc.handleUnaryCall<unknown, never> = (_call, callback) => callback({ code: grpc.status.UNIMPLEMENTED, details: 'the floor server answers GetNode only' });
const handlers: NodeUsageHandlers = {
  GetNode: (_call, callback) => callback(null, status),
  ListNodes: unimplemented,
  ListNodeSummaries: unimplemented,
  ListPolicies: unimplemented,
  WatchNodes: (call) => call.destroy(new Error('the floor server answers GetNode only')),
};
const server = new grpc.Server();
server.addService(oversellV1().NodeUsage.service, handlers);
server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (err, port) => {
  if (err) throw err;
  process.stdout.write(`listening ${port}\n`);
});
process.on('SIGTERM', () => {
  server.forceShutdown();
  process.exit(0);
});
