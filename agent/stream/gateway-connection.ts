// How the agent reaches the gateway: plain (local mode) or TLS trusting the
// gateway's CA, with the pod's projected ServiceAccount token sent on every
// stream. The token file is read at each connect because the kubelet rewrites
// it before it expires; the gateway ends a stream when its token runs out.
import { readFileSync } from 'node:fs';
import * as grpc from '@grpc/grpc-js';

export interface GatewayConnection {
  credentials: grpc.ChannelCredentials;
  channelOptions: grpc.ChannelOptions;
  /** The bearer token for the next stream, if any. */
  token?: () => string;
}

export interface GatewayConnectionOptions {
  /** PEM CA bundle file the gateway's certificate chains to; without it, plain gRPC. */
  caFile?: string;
  /** Name the certificate must carry; agents dial replicas by IP, so the Service's DNS name. */
  serverName?: string;
  tokenFile?: string;
}

export function gatewayConnection(o: GatewayConnectionOptions): GatewayConnection {
  if (o.tokenFile && !o.caFile) {
    throw new Error('--token-file needs --gateway-ca-file: a token must not travel over plain gRPC');
  }
  let ca: Buffer | undefined;
  if (o.caFile) {
    try {
      ca = readFileSync(o.caFile);
    } catch (err) {
      throw new Error(`cannot read the gateway CA ${o.caFile} (${(err as Error).message}); is the oversell-gateway-ca ConfigMap mounted?`);
    }
  }
  const tokenFile = o.tokenFile;
  return {
    credentials: ca ? grpc.credentials.createSsl(ca) : grpc.credentials.createInsecure(),
    channelOptions: ca && o.serverName ? { 'grpc.ssl_target_name_override': o.serverName, 'grpc.default_authority': o.serverName } : {},
    ...(tokenFile && {
      token: () => {
        try {
          return readFileSync(tokenFile, 'utf8').trim();
        } catch (err) {
          throw new Error(`cannot read the ServiceAccount token ${tokenFile} (${(err as Error).message}); is the projected token volume mounted?`);
        }
      },
    }),
  };
}
