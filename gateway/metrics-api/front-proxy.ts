// Who is calling the metrics API: only the API server's aggregation proxy,
// proven by its client certificate (the front-proxy CA of the
// kube-system/extension-apiserver-authentication ConfigMap, a CN among
// requestheader-allowed-names), and then the user it names in its headers,
// as k8s.io/apiserver's request-header authenticator does. Headers from any
// other caller are never read.
import { X509Certificate } from 'node:crypto';
import type { KubeConfig } from '@kubernetes/client-node';
import { kubeConfigConnection } from '../../lib/kube-connection.js';
import { BACKOFF, ListWatch, type KubeConnection, type Watching } from '../../lib/list-watch.js';
import type { Logger } from '../../lib/log.js';

export const AUTH_CONFIGMAP = { namespace: 'kube-system', name: 'extension-apiserver-authentication' } as const;

/** The requestheader-* keys of the ConfigMap (the API server's --requestheader-* flags). */
export interface RequestHeaderConfig {
  /** PEM bundle: the front-proxy CA(s). */
  clientCa: string;
  cas: X509Certificate[];
  /** Empty: any CN the CA signed. */
  allowedNames: string[];
  usernameHeaders: string[];
  uidHeaders: string[];
  groupHeaders: string[];
  extraHeaderPrefixes: string[];
}

export interface Caller {
  username: string;
  uid: string;
  groups: string[];
  extra: Record<string, string[]>;
}

export class Unauthorized extends Error {
  override name = 'Unauthorized';
}

function stringList(data: Record<string, string>, key: string): string[] {
  const text = data[key];
  if (text === undefined || text.trim() === '') return [];
  let v: unknown;
  try {
    v = JSON.parse(text);
  } catch {
    throw new Error(`${key} is not a JSON list of strings: ${text.slice(0, 100)}`);
  }
  if (!Array.isArray(v) || !v.every((s) => typeof s === 'string')) throw new Error(`${key} is not a JSON list of strings: ${text.slice(0, 100)}`);
  return v;
}

const PEM = /-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/g;

/**
 * The ConfigMap's data as a RequestHeaderConfig. Throws with what is wrong
 * when the API server has no aggregation layer configured (no
 * requestheader-client-ca-file or no username header) or a value is garbled.
 */
export function requestHeaderConfig(data: Record<string, string>): RequestHeaderConfig {
  const clientCa = data['requestheader-client-ca-file'];
  if (!clientCa?.trim()) {
    throw new Error(`${AUTH_CONFIGMAP.namespace}/${AUTH_CONFIGMAP.name} has no requestheader-client-ca-file: the API server runs without --requestheader-client-ca-file, so nothing can prove it is its aggregation proxy; give kube-apiserver the aggregation-layer flags (--requestheader-*, --proxy-client-cert-file)`);
  }
  const cas = (clientCa.match(PEM) ?? []).map((pem) => new X509Certificate(pem));
  if (cas.length === 0) throw new Error('requestheader-client-ca-file holds no PEM certificate');
  const usernameHeaders = stringList(data, 'requestheader-username-headers');
  if (usernameHeaders.length === 0) throw new Error('requestheader-username-headers is empty: the proxy\'s user cannot be read; set --requestheader-username-headers=X-Remote-User on kube-apiserver');
  return {
    clientCa,
    cas,
    allowedNames: stringList(data, 'requestheader-allowed-names'),
    usernameHeaders,
    uidHeaders: stringList(data, 'requestheader-uid-headers'),
    groupHeaders: stringList(data, 'requestheader-group-headers'),
    extraHeaderPrefixes: stringList(data, 'requestheader-extra-headers-prefix'),
  };
}

const CLIENT_AUTH = '1.3.6.1.5.5.7.3.2';

/**
 * Whether the peer certificate (DER) was issued by one of the CAs, is valid
 * at nowMs and may authenticate a client. The TLS handshake checked the
 * chain against the CA of its time; this checks it against the current one,
 * so a connection kept alive across a rotation is held to the new CA.
 */
export function signedByFrontProxy(der: Buffer, config: RequestHeaderConfig, nowMs: number): string | undefined {
  let leaf: X509Certificate;
  try {
    leaf = new X509Certificate(der);
  } catch {
    return 'the client certificate does not parse';
  }
  if (nowMs < Date.parse(leaf.validFrom) || nowMs > Date.parse(leaf.validTo)) return 'the client certificate is expired or not yet valid';
  if (leaf.keyUsage && leaf.keyUsage.length > 0 && !leaf.keyUsage.includes(CLIENT_AUTH)) return 'the client certificate is not for client authentication';
  for (const ca of config.cas) if (leaf.checkIssued(ca) && leaf.verify(ca.publicKey)) return undefined;
  return 'the client certificate is not signed by the front-proxy CA (requestheader-client-ca-file)';
}

/** Node joins repeated headers with ", ": the raw list keeps each value apart, as Go's http.Header does. */
function values(rawHeaders: readonly string[], wanted: (lowerName: string) => boolean): Array<[string, string]> {
  const out: Array<[string, string]> = [];
  for (let i = 0; i + 1 < rawHeaders.length; i += 2) {
    const name = (rawHeaders[i] ?? '').toLowerCase();
    if (wanted(name)) out.push([name, rawHeaders[i + 1] ?? '']);
  }
  return out;
}

function unescapeKey(k: string): string {
  try {
    return decodeURIComponent(k).toLowerCase();
  } catch {
    return k.toLowerCase();
  }
}

/** What the handshake left on the socket: the peer's certificate, if it sent one. */
export interface PeerCertificate {
  /** DER; undefined when the client sent none. */
  raw: Buffer | undefined;
  /** The certificate's subject CN. */
  commonName: string | undefined;
}

/**
 * The caller the proxy names, or Unauthorized. The headers are read only
 * after the certificate is checked: a caller that is not the proxy gets 401
 * whatever X-Remote-User it sends.
 */
export function authenticate(config: RequestHeaderConfig | undefined, peer: PeerCertificate, rawHeaders: readonly string[], nowMs: number): Caller {
  if (!config) throw new Unauthorized('the front-proxy CA is not known (the extension-apiserver-authentication ConfigMap was not read): only the API server\'s aggregation proxy may call');
  if (!peer.raw) throw new Unauthorized('no client certificate: only the API server\'s aggregation proxy may call (kubectl get --raw /apis/metrics.k8s.io/v1beta1/nodes)');
  const bad = signedByFrontProxy(peer.raw, config, nowMs);
  if (bad) throw new Unauthorized(bad);
  if (config.allowedNames.length > 0 && !config.allowedNames.includes(peer.commonName ?? '')) {
    throw new Unauthorized(`client certificate CN ${JSON.stringify(peer.commonName ?? '')} is not in requestheader-allowed-names`);
  }
  const lower = (l: string[]) => new Set(l.map((h) => h.toLowerCase()));
  const first = (names: string[]) => {
    for (const n of names) {
      const v = values(rawHeaders, (h) => h === n.toLowerCase()).find(([, value]) => value.trim() !== '');
      if (v) return v[1].trim();
    }
    return '';
  };
  const username = first(config.usernameHeaders);
  if (!username) throw new Unauthorized(`the proxy named no user (${config.usernameHeaders.join(', ')})`);
  const groupHeaders = lower(config.groupHeaders);
  const groups = values(rawHeaders, (h) => groupHeaders.has(h)).map(([, v]) => v);
  const prefixes = config.extraHeaderPrefixes.map((p) => p.toLowerCase()).filter(Boolean);
  const extra: Record<string, string[]> = {};
  for (const [name, v] of values(rawHeaders, (h) => prefixes.some((p) => h.startsWith(p)))) {
    const prefix = prefixes.find((p) => name.startsWith(p)) ?? '';
    const k = unescapeKey(name.slice(prefix.length));
    if (k) (extra[k] ??= []).push(v);
  }
  return { username, uid: first(config.uidHeaders), groups, extra };
}

/** The ConfigMap kept watched: the front-proxy CA rotates, the allowed names change with it. */
export interface FrontProxyTrust {
  current(): RequestHeaderConfig | undefined;
  /** Why there is no current config, when there is none. */
  problem(): string | undefined;
  onChange(listener: (config: RequestHeaderConfig | undefined) => void): void;
  stop(): Promise<void>;
}

interface ConfigMapObject {
  metadata?: { name?: string; namespace?: string; uid?: string; resourceVersion?: string };
  data?: Record<string, string>;
}

export async function watchFrontProxyTrust(source: KubeConfig | KubeConnection, log: Logger): Promise<FrontProxyTrust> {
  const connection = 'server' in source ? source : kubeConfigConnection(source);
  let config: RequestHeaderConfig | undefined;
  let problem: string | undefined = `${AUTH_CONFIGMAP.namespace}/${AUTH_CONFIGMAP.name} not read yet`;
  const listeners: Array<(c: RequestHeaderConfig | undefined) => void> = [];
  const take = (data: Record<string, string> | undefined) => {
    try {
      config = requestHeaderConfig(data ?? {});
      problem = undefined;
      log.info({ allowedNames: config.allowedNames, cas: config.cas.length }, 'metrics API: front-proxy CA and request headers read');
    } catch (err) {
      config = undefined;
      problem = (err as Error).message;
      log.warn({ err: problem }, 'metrics API: every request is refused (401) until the API server\'s aggregation layer is configured');
    }
    for (const l of listeners) l(config);
  };
  const watch = new ListWatch<ConfigMapObject>({
    connection,
    path: `/api/v1/namespaces/${AUTH_CONFIGMAP.namespace}/configmaps`,
    fieldSelector: `metadata.name=${AUTH_CONFIGMAP.name}`,
    decode: (o) => o,
    target: {
      replace: (items) => take(items[0]?.data),
      apply: (type, o) => take(type === 'DELETED' ? undefined : o.data),
    },
    what: `${AUTH_CONFIGMAP.namespace}/${AUTH_CONFIGMAP.name}`,
    log,
    backoff: BACKOFF.replicas,
  });
  try {
    await watch.start();
  } catch (err) {
    throw new Error(`the metrics API cannot read ${AUTH_CONFIGMAP.namespace}/${AUTH_CONFIGMAP.name}: ${(err as Error).message}; bind the gateway's ServiceAccount to the Role extension-apiserver-authentication-reader in kube-system`);
  }
  const watching: Watching = { stop: async () => watch.stop() };
  return {
    current: () => config,
    problem: () => problem,
    onChange: (l) => listeners.push(l),
    stop: () => watching.stop(),
  };
}
