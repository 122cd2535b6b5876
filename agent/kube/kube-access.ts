// How the agent reaches the API server, without @kubernetes/client-node: that
// library loads every API model, more memory than the whole agent may use on
// a node. The agent needs one list and one watch, so it carries just the
// credentials for them: the in-cluster
// service account (token re-read on every request: projected tokens rotate),
// or a kubeconfig with certificate, key, token and CA (files or inline data).
import { readFileSync } from 'node:fs';
import { dirname, isAbsolute, join } from 'node:path';
import yaml from 'js-yaml';
import type { KubeConnection } from '../../lib/list-watch.js';

export interface KubeAccess {
  server: URL;
  ca?: Buffer;
  cert?: Buffer;
  key?: Buffer;
  /** Read on every request. */
  token?: () => string;
  insecureSkipTlsVerify?: boolean;
}

const SA = '/var/run/secrets/kubernetes.io/serviceaccount';

export function inClusterAccess(env = process.env, saDir = SA): KubeAccess {
  const host = env.KUBERNETES_SERVICE_HOST;
  const port = env.KUBERNETES_SERVICE_PORT ?? '443';
  if (!host) throw new Error('not in a pod (KUBERNETES_SERVICE_HOST unset); pass --kubeconfig');
  const h = host.includes(':') ? `[${host}]` : host;
  return { server: new URL(`https://${h}:${port}`), ca: readFileSync(join(saDir, 'ca.crt')), token: () => readFileSync(join(saDir, 'token'), 'utf8').trim() };
}

interface KubeconfigFile {
  'current-context'?: string;
  contexts?: Array<{ name: string; context: { cluster: string; user: string } }>;
  clusters?: Array<{ name: string; cluster: Record<string, string | boolean> }>;
  users?: Array<{ name: string; user: Record<string, unknown> }>;
}

export function kubeconfigAccess(path: string): KubeAccess {
  let doc: KubeconfigFile;
  try {
    doc = yaml.load(readFileSync(path, 'utf8')) as KubeconfigFile;
  } catch (err) {
    throw new Error(`cannot read kubeconfig ${path}: ${(err as Error).message}`);
  }
  const ctx = doc.contexts?.find((c) => c.name === doc['current-context'])?.context;
  const cluster = doc.clusters?.find((c) => c.name === ctx?.cluster)?.cluster;
  const user = doc.users?.find((u) => u.name === ctx?.user)?.user ?? {};
  if (!cluster || typeof cluster.server !== 'string') throw new Error(`kubeconfig ${path}: no cluster for the current context`);
  if (user.exec || user['auth-provider']) {
    throw new Error(`kubeconfig ${path}: exec and auth-provider credentials are not supported by the agent; use a certificate or token`);
  }
  const base = dirname(path);
  const bytes = (dataKey: string, fileKey: string, from: Record<string, unknown>): Buffer | undefined => {
    const data = from[dataKey];
    if (typeof data === 'string') return Buffer.from(data, 'base64');
    const file = from[fileKey];
    if (typeof file === 'string') return readFileSync(isAbsolute(file) ? file : join(base, file));
    return undefined;
  };
  const token = typeof user.token === 'string' ? user.token : typeof user.tokenFile === 'string' ? undefined : undefined;
  const tokenFile = typeof user.tokenFile === 'string' ? user.tokenFile : undefined;
  const access: KubeAccess = { server: new URL(cluster.server) };
  const ca = bytes('certificate-authority-data', 'certificate-authority', cluster as Record<string, unknown>);
  const cert = bytes('client-certificate-data', 'client-certificate', user);
  const key = bytes('client-key-data', 'client-key', user);
  if (ca) access.ca = ca;
  if (cert) access.cert = cert;
  if (key) access.key = key;
  if (token) access.token = () => token;
  else if (tokenFile) access.token = () => readFileSync(tokenFile, 'utf8').trim();
  if (cluster['insecure-skip-tls-verify'] === true) access.insecureSkipTlsVerify = true;
  return access;
}

/** For lib/list-watch.ts: the token is read again on every request. */
export function connectionOf(access: KubeAccess): KubeConnection {
  return {
    server: access.server,
    options: () => {
      const token = access.token?.();
      return {
        headers: token ? { authorization: `Bearer ${token}` } : {},
        ...(access.ca && { ca: access.ca }),
        ...(access.cert && { cert: access.cert }),
        ...(access.key && { key: access.key }),
        ...(access.insecureSkipTlsVerify && { rejectUnauthorized: false }),
      };
    },
  };
}
