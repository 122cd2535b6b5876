// The gRPC port as a part of the gateway (lib/lifecycle.ts): the query API,
// health and reflection. Agent streams have their own port and thread
// (ingest-thread.ts).
import * as grpc from '@grpc/grpc-js';
import { ReflectionService } from '@grpc/reflection';
import { HealthImplementation } from 'grpc-health-check';
import { packageDefinition } from '../../proto/load.js';
import { nodeUsageDefinition, nodeUsageService } from '../query/node-usage-service.js';
import { GRPC_SERVER_OPTIONS, listenGrpc, type GrpcListener } from '../tls/grpc-listener.js';
import { streamGuard } from '../tls/stream-guard.js';
import { listLimitInterceptor, overloadInterceptor } from '../query/query-limits.js';
import { type Shared, LOCAL_IF_YOUNGER_MS, MAX_RECEIVE_MESSAGE_BYTES, GRPC_SERVICES } from './shared.js';

/** The gRPC port: the query API, health and reflection. */
export function grpcPart(s: Shared) {
  const { options, metrics, now } = s;
  const { queryLimits } = s;
  const lists = new Set(['/oversell.v1.NodeUsage/ListNodes', '/oversell.v1.NodeUsage/ListNodeSummaries']);
  const server = new grpc.Server({
    ...GRPC_SERVER_OPTIONS,
    'grpc.max_receive_message_length': MAX_RECEIVE_MESSAGE_BYTES,
    // The stream guard nearest the transport: it sees every write's completion. Then overload: a refused query takes no list slot and no token review.
    interceptors: [
      streamGuard({
        limits: s.streamLimits,
        // Limited and ended by the query API itself (--query-watches-per-caller, --query-watches, --query-watch-stall).
        selfGuarded: new Set(['/oversell.v1.NodeUsage/WatchNodes']),
        onRefused: (reason) => metrics.streamRefused('grpc', reason),
        onEnded: (service) => metrics.streamEnded('grpc', service),
      }),
      overloadInterceptor('/oversell.v1.NodeUsage/', () => s.shedder.refuseQuery()),
      listLimitInterceptor(lists, queryLimits.listsInFlight, (reason) => metrics.queryRefused(reason)),
    ],
  });
  server.addService(nodeUsageDefinition(), nodeUsageService({
    local: s.local, policies: options.policies, notReady: s.notReady, now,
    ...(s.shard && {
      peers: {
        nodes: s.shard.peers,
        localIfYoungerMs: LOCAL_IF_YOUNGER_MS,
        onFailed: s.shard.onPeersFailed,
      },
    }),
    ...(options.auth?.query && { authorize: options.auth.query, onRefused: (failure: string) => metrics.authRefused('query', failure) }),
    onWatchEnded: (reason) => metrics.watchEnded(reason),
    limits: queryLimits,
    onLimited: (reason) => metrics.queryRefused(reason),
  }));
  // grpcurl and load balancers work without our proto files.
  const health = new HealthImplementation(Object.fromEntries(GRPC_SERVICES.map((service) => [service, 'NOT_SERVING'])));
  health.addToServer(server);
  new ReflectionService(packageDefinition()).addToServer(server);
  let listener: GrpcListener | undefined;
  // As the health service starts: every service NOT_SERVING.
  let serving = false;
  return {
    name: 'gRPC port',
    get port() {
      return listener?.port ?? NaN;
    },
    // Set every second, sent to Health/Watch streams only when it changes.
    setServing: (now: boolean) => {
      if (now === serving) return;
      serving = now;
      for (const service of GRPC_SERVICES) health.setStatus(service, now ? 'SERVING' : 'NOT_SERVING');
    },
    setTls: (tls: { cert: string; key: string }) => listener?.setTls(tls),
    async start() {
      listener = await listenGrpc(server, {
        host: options.bindAddress,
        port: options.grpcPort,
        ...(options.grpcTls && { tls: options.tls }),
        limits: { maxConnections: s.connections.grpcMaxConnections, handshakeTimeoutMs: s.connections.handshakeTimeoutMs },
        onRefused: (reason) => metrics.connectionRefused('grpc', reason),
      });
    },
    async close() {
      await new Promise<void>((resolve) => {
        server.tryShutdown(() => resolve());
        // Open agent streams would hold tryShutdown forever.
        setTimeout(() => {
          server.forceShutdown();
          resolve();
        }, 2000).unref();
      });
      await listener?.close();
    },
  };
}
