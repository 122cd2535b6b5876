// A gRPC listener the gateway owns: its own TCP (and TLS) server in front of
// grpc-js, whose connections it hands over through a connection injector.
// grpc-js has no handshake or preface timeout and no connection cap, and its
// TLS server keeps Node's 120 s handshake timeout: a client could hold
// thousands of silent connections. Here each listener holds at most
// maxConnections, and a connection that has not finished TLS and sent the
// HTTP/2 preface within handshakeTimeoutMs is closed.
import * as net from 'node:net';
import * as tls from 'node:tls';
import * as grpc from '@grpc/grpc-js';
import type { Tls } from './tls-keeper.js';

export interface ConnectionLimits {
  /** Connections open at once on one listener; the next is closed as it is accepted. */
  maxConnections: number;
  /** To finish the TLS handshake, and again to send the HTTP/2 preface. */
  handshakeTimeoutMs: number;
}

/**
 * Options of every gRPC server of the gateway. 100 streams per connection:
 * an agent holds one and a query client a few, so more is a caller hoarding
 * streams. Pings every minute, and 20 s for the answer, close connections
 * whose peer is gone. A connection without a call for a minute is closed
 * (GOAWAY; gRPC clients reconnect on their next call): one that sent the
 * preface and nothing else is not kept.
 */
export const GRPC_SERVER_OPTIONS = {
  'grpc.max_concurrent_streams': 100,
  'grpc.keepalive_time_ms': 60_000,
  'grpc.keepalive_timeout_ms': 20_000,
  'grpc.max_connection_idle_ms': 60_000,
} as const;

/** Why a connection was closed before it spoke gRPC (oversell_connections_refused_total's reason). */
export type ConnectionRefusal = 'connection-limit' | 'handshake-timeout' | 'preface-timeout';

export interface GrpcListenerOptions {
  host: string;
  /** 0 picks a free port. */
  port: number;
  /** Serve TLS with this certificate; without it, plaintext (local mode). */
  tls?: Tls;
  limits: ConnectionLimits;
  onRefused?: (reason: ConnectionRefusal) => void;
}

export interface GrpcListener {
  port: number;
  /** New handshakes use this certificate; open connections are not dropped. */
  setTls(tls: Tls): void;
  /** Stops accepting and closes what grpc-js's shutdown left open. */
  close(): Promise<void>;
}

/** 'PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n': every HTTP/2 client sends it first. */
const PREFACE_BYTES = 24;

export function listenGrpc(server: grpc.Server, options: GrpcListenerOptions): Promise<GrpcListener> {
  const { limits, onRefused } = options;
  // TLS is ours (below), so grpc-js sees cleartext sockets: a TLSSocket still
  // reaches its handlers as one (getAuthContext reports it as secure).
  const injector = server.createConnectionInjector(grpc.ServerCredentials.createInsecure());
  const open = new Set<net.Socket>();

  /** Closes a cleartext socket that has not sent the preface within the timeout. */
  const awaitPreface = (socket: net.Socket) => {
    const timer = setTimeout(() => {
      // bytesRead counts what the consumer got: cleartext after TLS, whatever grpc-js's HTTP/2 session reads natively.
      if (socket.bytesRead >= PREFACE_BYTES) return;
      onRefused?.('preface-timeout');
      socket.destroy();
    }, limits.handshakeTimeoutMs);
    timer.unref();
    socket.once('close', () => clearTimeout(timer));
    injector.injectConnection(socket);
  };

  const tcp = options.tls
    ? tls.createServer({
        cert: options.tls.cert,
        key: options.tls.key,
        // gRPC clients require h2 by ALPN; a client offering none is closed by the HTTP/2 session.
        ALPNProtocols: ['h2'],
        minVersion: 'TLSv1.2',
        handshakeTimeout: limits.handshakeTimeoutMs,
      }, awaitPreface)
    : net.createServer(awaitPreface);
  tcp.maxConnections = limits.maxConnections;
  tcp.on('connection', (raw: net.Socket) => {
    open.add(raw);
    raw.once('close', () => open.delete(raw));
    // A client that resets mid-handshake is its own problem, not an uncaught error.
    raw.on('error', () => {});
  });
  tcp.on('drop', () => onRefused?.('connection-limit'));
  if (tcp instanceof tls.Server) {
    // Node reports a failed or timed-out handshake here and leaves the socket open: close it.
    tcp.on('tlsClientError', (err: NodeJS.ErrnoException, socket: tls.TLSSocket) => {
      if (err.code === 'ERR_TLS_HANDSHAKE_TIMEOUT') onRefused?.('handshake-timeout');
      socket.destroy();
    });
  }

  return new Promise((resolve, reject) => {
    tcp.once('error', reject);
    const listening = () => {
      tcp.off('error', reject);
      const address = tcp.address() as net.AddressInfo;
      resolve({
        port: address.port,
        setTls(next) {
          if (tcp instanceof tls.Server) tcp.setSecureContext({ cert: next.cert, key: next.key });
        },
        close: () =>
          new Promise<void>((done) => {
            injector.destroy();
            tcp.close(() => done());
            for (const socket of open) socket.destroy();
          }),
      });
    };
    tcp.listen({ host: options.host, port: options.port }, listening);
  });
}
