// Reaching the gateway: a given address, or through the current kubeconfig by
// port-forwarding to a ready pod of the gateway Service, the way
// `kubectl port-forward svc/...` does. The kubeconfig's user is authenticated
// by @kubernetes/client-node, as kubectl would: tokens, token files, client
// certificates, exec credential plugins (EKS, GKE, AKS, kubelogin) and OIDC.
import { existsSync, readFileSync } from 'node:fs';
import type { RequestOptions } from 'node:https';
import { createServer, type Server } from 'node:net';
import { homedir } from 'node:os';
import { delimiter, join } from 'node:path';
import * as grpc from '@grpc/grpc-js';
import { CoreV1Api, KubeConfig, PortForward } from '@kubernetes/client-node';
import type { NodeUsageClient } from '../proto/gen/oversell/v1/NodeUsage.js';
import { nodeUsageClient } from '../wire/node-summaries-codec.js';

export interface Connection {
  client: NodeUsageClient;
  /** Per-call metadata: the bearer token, if any. */
  metadata(): grpc.Metadata;
  /** Where it went, for error messages. */
  target: string;
  /** Why no token was sent, when that may be why the gateway refuses: for error messages. */
  noToken?: string;
  close(): void;
}

export interface ConnectOptions {
  address?: string;
  kubeconfig?: string;
  namespace: string;
  service: string;
  /** Gateway CA (PEM file); through a kubeconfig the oversell-gateway-ca ConfigMap is used when this is absent. */
  caFile?: string;
  /** Name the gateway certificate is checked against (default: the Service's DNS name). */
  serverName?: string;
  /** Bearer token for the query API (default: the kubeconfig user's bearer token, if its credentials are one). */
  token?: string;
}

interface Security {
  ca?: Buffer;
  serverName: string;
  token?: string;
}

export class ConnectError extends Error {
  override name = 'ConnectError';
}

function client(address: string, s: Security): NodeUsageClient {
  // A full list of a large cluster is several MB; the default 4 MB receive limit would refuse it.
  const options: grpc.ChannelOptions = { 'grpc.max_receive_message_length': 256 * 1024 * 1024 };
  if (s.ca) Object.assign(options, { 'grpc.ssl_target_name_override': s.serverName, 'grpc.default_authority': s.serverName });
  return new (nodeUsageClient())(address, s.ca ? grpc.credentials.createSsl(s.ca) : grpc.credentials.createInsecure(), options);
}

function connection(c: NodeUsageClient, target: string, s: Security, close: () => void, noToken?: string): Connection {
  return {
    client: c,
    target,
    ...(!s.token && noToken && { noToken }),
    metadata: () => {
      const md = new grpc.Metadata();
      if (s.token) md.set('authorization', `Bearer ${s.token}`);
      return md;
    },
    close,
  };
}

/**
 * Why the connection may not carry its token, or undefined: a bearer token
 * goes only inside TLS, where nobody on the path can read and replay it.
 */
export function plaintextTokenProblem(s: { token?: string; ca?: Buffer }, where: { target: string; namespace: string; tokenFrom: 'flag' | 'kubeconfig' }): string | undefined {
  if (!s.token || s.ca) return undefined;
  const getCa = `kubectl -n ${where.namespace} get configmap oversell-gateway-ca -o jsonpath='{.data.ca\\.crt}' > gateway-ca.crt`;
  const whose = where.tokenFrom === 'flag' ? 'the bearer token (--token / OVERSELL_TOKEN)' : 'the kubeconfig user\'s token';
  return `refusing to send ${whose} to ${where.target} in plain text: pass --ca-file with the gateway's CA (${getCa}), or, for a local-mode gateway (--auth none), send no token (--token '')`;
}

function readCa(file: string): Buffer {
  try {
    return readFileSync(file);
  } catch (err) {
    throw new ConnectError(`cannot read --ca-file ${file} (${(err as Error).message})`);
  }
}

/** Where a kubeconfig would come from, or why there is none. */
function kubeconfigProblem(): string | undefined {
  const home = process.env.HOME || homedir();
  const inCluster = !!process.env.KUBERNETES_SERVICE_HOST && existsSync('/var/run/secrets/kubernetes.io/serviceaccount/token');
  if (inCluster || (home && existsSync(join(home, '.kube', 'config')))) return undefined;
  return (
    `no kubeconfig to find the gateway through ($KUBECONFIG is not set, ${home ? join(home, '.kube', 'config') : '~/.kube/config'} does not exist, and this is not a pod in a cluster): ` +
    'pass --address host:port to reach a gateway directly (127.0.0.1:50051 for `npm start` or a local oversell-gateway), or --kubeconfig <file>'
  );
}

export function loadKubeConfig(kubeconfig: string | undefined): KubeConfig {
  const kc = new KubeConfig();
  if (!kubeconfig) {
    const problem = kubeconfigProblem();
    if (problem) throw new ConnectError(problem);
  }
  try {
    // A list, as in $KUBECONFIG: merged the way kubectl merges it, the first file's current context winning.
    const files = kubeconfig?.split(delimiter).filter(Boolean) ?? [];
    if (files.length === 0) kc.loadFromDefault();
    for (const [i, file] of files.entries()) {
      if (i === 0) kc.loadFromFile(file);
      else {
        const more = new KubeConfig();
        more.loadFromFile(file);
        kc.mergeConfig(more, true);
      }
    }
  } catch (err) {
    throw new ConnectError(`cannot load a kubeconfig (${(err as Error).message}); pass --address host:port to reach a gateway directly`);
  }
  if (!kc.getCurrentCluster()) throw new ConnectError('no current cluster in the kubeconfig; pass --address host:port, or --kubeconfig');
  return kc;
}

/**
 * The kubeconfig user's bearer token for the gateway, as client-node would
 * send it to the API server: a static token, a token file, an exec
 * credential plugin's or an OIDC provider's. A user who authenticates with a
 * client certificate or a password has none (the gateway cannot check those):
 * `why` says so.
 */
export async function kubeconfigToken(kc: KubeConfig): Promise<{ token?: string; why?: string }> {
  const opts: RequestOptions = {};
  try {
    await kc.applyToHTTPSOptions(opts);
  } catch (err) {
    const user = kc.getCurrentUser();
    const how = user?.exec ? `its credential plugin (${user.exec.command})` : user?.authProvider ? `its auth provider (${user.authProvider.name})` : 'its credentials';
    throw new ConnectError(`cannot get a token for kubeconfig user ${JSON.stringify(user?.name ?? '')} from ${how}: ${(err as Error).message}; check that \`kubectl get --raw /version\` works, or pass --token`);
  }
  const header = Object.entries(opts.headers ?? {}).find(([k]) => k.toLowerCase() === 'authorization')?.[1];
  const token = typeof header === 'string' ? /^Bearer\s+(\S+)$/i.exec(header)?.[1] : undefined;
  if (token) return { token };
  const how = opts.cert ? 'a client certificate' : opts.auth ? 'a username and password' : 'no credentials';
  return { why: `the kubeconfig user ${JSON.stringify(kc.getCurrentUser()?.name ?? '')} has ${how}, no bearer token, and the gateway takes only tokens: pass --token (e.g. --token "$(kubectl create token <service account> -n <namespace>)" for a ServiceAccount bound to the oversell-viewer ClusterRole)` };
}

async function portForward(o: ConnectOptions): Promise<{ address: string; server: Server; target: string; ca?: Buffer; token?: string; noToken?: string }> {
  const kc = loadKubeConfig(o.kubeconfig);
  // First: a credential plugin that fails is reported as such, not as a Service that cannot be read.
  const credential = await kubeconfigToken(kc);
  const core = kc.makeApiClient(CoreV1Api);
  let selector: Record<string, string>;
  let grpcPort = 50051;
  try {
    const svc = await core.readNamespacedService({ name: o.service, namespace: o.namespace });
    selector = svc.spec?.selector ?? {};
    const port = svc.spec?.ports?.find((p) => p.name === 'grpc');
    if (typeof port?.targetPort === 'number') grpcPort = port.targetPort;
  } catch (err) {
    throw new ConnectError(`cannot read Service ${o.namespace}/${o.service} (${(err as Error).message}); is oversell installed there? (--namespace, --service)`);
  }
  const pods = await core.listNamespacedPod({ namespace: o.namespace, labelSelector: Object.entries(selector).map(([k, v]) => `${k}=${v}`).join(',') });
  const pod = pods.items.find((p) => p.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True'));
  const podName = pod?.metadata?.name;
  if (!podName) throw new ConnectError(`no ready gateway pod behind ${o.namespace}/${o.service}; check: kubectl -n ${o.namespace} get pods`);
  const forward = new PortForward(kc);
  const server = createServer((socket) => {
    // The forward may still deliver the gateway's bytes after the gRPC client closed its end (the CLI exiting):
    // a write to the ended socket fails, and with no listener that error would end the process.
    socket.on('error', () => socket.destroy());
    forward.portForward(o.namespace, podName, [grpcPort], socket, null, socket).catch((err: unknown) => {
      socket.destroy(err as Error);
    });
  });
  await new Promise<void>((resolve, reject) => server.once('error', reject).listen(0, '127.0.0.1', () => resolve()));
  const addr = server.address();
  const port = typeof addr === 'object' && addr ? addr.port : 0;
  // The gateway publishes its CA for agents; the CLI trusts the same one. No ConfigMap: a plain gateway (local mode).
  const caPem = await core.readNamespacedConfigMap({ name: 'oversell-gateway-ca', namespace: o.namespace }).then((cm) => cm.data?.['ca.crt'], () => undefined);
  return { address: `127.0.0.1:${port}`, server, target: `pod ${o.namespace}/${podName} (port-forward)`, ...(caPem && { ca: Buffer.from(caPem) }), ...(credential.token && { token: credential.token }), ...(credential.why && { noToken: credential.why }) };
}

export async function connect(o: ConnectOptions): Promise<Connection> {
  const serverName = o.serverName ?? `${o.service}.${o.namespace}.svc`;
  if (o.address) {
    const s: Security = { serverName, ...(o.caFile && { ca: readCa(o.caFile) }), ...(o.token && { token: o.token }) };
    const problem = plaintextTokenProblem(s, { target: o.address, namespace: o.namespace, tokenFrom: 'flag' });
    if (problem) throw new ConnectError(problem);
    const c = client(o.address, s);
    return connection(c, o.address, s, () => c.close());
  }
  const pf = await portForward(o);
  // --token (even '') wins over the kubeconfig's.
  const s: Security = { serverName, ...(o.caFile ? { ca: readCa(o.caFile) } : pf.ca && { ca: pf.ca }), ...((o.token ?? pf.token) && { token: o.token ?? pf.token }) };
  const problem = plaintextTokenProblem(s, { target: pf.target, namespace: o.namespace, tokenFrom: o.token === undefined ? 'kubeconfig' : 'flag' });
  if (problem) {
    pf.server.close();
    throw new ConnectError(problem);
  }
  const c = client(pf.address, s);
  return connection(
    c,
    pf.target,
    s,
    () => {
      c.close();
      pf.server.close();
    },
    o.token === undefined ? pf.noToken : undefined,
  );
}

/** A gRPC error in words an operator can act on (noToken: why the call carried no token, if it did not). */
export function explainGrpcError(err: grpc.ServiceError, target: string, noToken?: string): string {
  switch (err.code) {
    case grpc.status.UNAVAILABLE:
      return `cannot reach the gateway at ${target}: ${err.details}. Is it running? (--address host:port, or the kubeconfig's cluster)`;
    case grpc.status.NOT_FOUND:
    case grpc.status.INVALID_ARGUMENT:
      return err.details;
    case grpc.status.UNAUTHENTICATED:
      return `the gateway at ${target} refused the call: ${err.details}${noToken ? `; ${noToken}` : ''}`;
    case grpc.status.PERMISSION_DENIED:
      return `the gateway at ${target} refused the call: ${err.details}`;
    case grpc.status.DEADLINE_EXCEEDED:
      return `the gateway at ${target} did not answer in time`;
    default:
      return `${grpc.status[err.code] ?? err.code}: ${err.details}`;
  }
}
