// The agent port's reference: a bare AgentStream server with the gateway's
// transport (its own TLS listener, grpc-js, server options, proto and loader
// options) that welcomes each stream and decodes every message it is sent,
// and does nothing else: no checks, no store, no hand-over to another thread.
// What agents cost it is what grpc-js, Node's TLS and HTTP/2 and the decoding
// cost for the same bytes: the floor under the gateway's cost per agent.
// Run as a child process: `node --import tsx bench/agent-stream-floor.ts <tls dir>`
// (the dir gets ca.crt for the agents); prints `listening <port>`.
import * as grpc from '@grpc/grpc-js';
import type { AgentStreamHandlers } from '../proto/gen/oversell/v1/AgentStream.js';
import { oversellV1 } from '../proto/load.js';
import { GRPC_SERVER_OPTIONS, listenGrpc } from '../gateway/tls/grpc-listener.js';
import { ensureServingCertificate } from '../gateway/tls/self-signed.js';

const tlsDir = process.argv[2];
if (!tlsDir) throw new Error('usage: agent-stream-floor.ts <tls dir>');
const handlers: AgentStreamHandlers = {
  Report(call) {
    let welcomed = false;
    call.on('data', () => {
      if (welcomed) return;
      welcomed = true;
      // Told as the gateway tells its agents: the same bytes come (pod reports without names between named ones).
      call.write({ welcome: { lastSeq: 0, settings: { takesPodNamesAsBefore: true } } });
    });
    call.on('error', () => {});
  },
};
const server = new grpc.Server(GRPC_SERVER_OPTIONS);
server.addService(oversellV1().AgentStream.service, handlers);
const tls = await ensureServingCertificate(tlsDir, ['localhost', '127.0.0.1']);
const listener = await listenGrpc(server, { host: '127.0.0.1', port: 0, tls, limits: { maxConnections: 100_000, handshakeTimeoutMs: 10_000 } });
process.stdout.write(`listening ${listener.port}\n`);
process.on('SIGTERM', () => {
  server.forceShutdown();
  void listener.close().then(() => process.exit(0));
});
