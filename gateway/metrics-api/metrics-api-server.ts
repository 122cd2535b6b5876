// The metrics API's own HTTPS port (--metrics-api-port): the gateway's
// serving certificate (the APIService's caBundle is its CA), and a client
// certificate requested from every caller but checked per request against
// the front-proxy CA of the moment (front-proxy.ts), so a caller without one
// gets a 401 Status, as from the API server, rather than a failed handshake,
// and probes (kubelet, no certificate) still get through.
import type { Server as TlsServer } from 'node:tls';
import Fastify from 'fastify';
import { metricsApiPlugin, type MetricsApiPluginOptions } from './metrics-api-plugin.js';

export interface MetricsApiServerOptions {
  bindAddress: string;
  /** 0 picks a free port. */
  port: number;
  tls: { cert: string; key: string };
  handshakeTimeoutMs: number;
  /** The API servers keep a few connections each; more than this are closed as they arrive. */
  maxConnections?: number;
  routes: MetricsApiPluginOptions;
}

export interface MetricsApiServer {
  readonly port: number;
  start(): Promise<number>;
  /** New handshakes use the new certificate; open connections are kept. */
  setTls(tls: { cert: string; key: string }): void;
  /** The front-proxy CA changed: handshakes ask for certificates from the new one. */
  trustChanged(): void;
  close(): Promise<void>;
}

export async function buildMetricsApiServer(o: MetricsApiServerOptions): Promise<MetricsApiServer> {
  let tls = o.tls;
  // Only the CA names in a CertificateRequest: Go's client sends its certificate when its CA is listed, or when none is.
  const context = () => {
    const ca = o.routes.trust()?.clientCa;
    return { cert: tls.cert, key: tls.key, ...(ca && { ca }) };
  };
  const app = Fastify({
    https: {
      ...context(),
      requestCert: true,
      // Checked per request against the CA of the moment (a rotation must not wait for connections to close), answered with a 401 Status.
      rejectUnauthorized: false,
      headersTimeout: 5_000,
      connectionsCheckingInterval: 1_000,
      handshakeTimeout: o.handshakeTimeoutMs,
    },
    keepAliveTimeout: 30_000,
    // GETs only; nothing to read.
    bodyLimit: 64 * 1024,
    logger: false,
    requestTimeout: 30_000,
    connectionTimeout: 60_000,
  });
  await app.register(metricsApiPlugin, o.routes);
  app.server.maxConnections = o.maxConnections ?? 1000;
  let port = NaN;
  const secure = () => (app.server as unknown as TlsServer).setSecureContext(context());
  return {
    get port() {
      return port;
    },
    async start() {
      await app.listen({ host: o.bindAddress, port: o.port });
      const address = app.server.address();
      port = typeof address === 'object' && address ? address.port : o.port;
      return port;
    },
    setTls(next) {
      tls = next;
      secure();
    },
    trustChanged: secure,
    close: () => app.close(),
  };
}
