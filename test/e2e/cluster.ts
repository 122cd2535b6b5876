// The local control plane (scripts/cluster/cluster.sh) as seen from a test: admin
// client, kubelet credentials, and the kubelet's own way of writing its status.
import { execFile, execFileSync } from 'node:child_process';
import { promisify } from 'node:util';
import { readFileSync } from 'node:fs';
import { request } from 'node:https';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { CoreV1Api, KubeConfig, KubernetesObjectApi, type V1Node } from '@kubernetes/client-node';

export const REPO = fileURLToPath(new URL('../../', import.meta.url));
export const CLUSTER_SH = join(REPO, 'scripts/cluster/cluster.sh');
export const STATE = process.env.OVERSELL_CLUSTER_DIR ?? join(REPO, '.oversell/cluster');
export const ADMIN_KUBECONFIG = join(STATE, 'admin.kubeconfig');

export function cluster(...args: string[]): string {
  return execFileSync('bash', [CLUSTER_SH, ...args], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] });
}

/** cluster() without blocking the event loop: watches and timers keep running meanwhile. */
export async function clusterAsync(...args: string[]): Promise<string> {
  return clusterAsyncWith(process.env, ...args);
}

/** clusterAsync with this environment (scripts/cluster/ reads some of its settings there). */
export async function clusterAsyncWith(env: NodeJS.ProcessEnv, ...args: string[]): Promise<string> {
  return (await promisify(execFile)('bash', [CLUSTER_SH, ...args], { encoding: 'utf8', env })).stdout;
}

/** A refused API call as a test reads it: the status code and the API server's message. */
export function apiFailure(err: unknown): { ok: false; code: number; message: string } {
  const e = err as { code?: number; body?: unknown };
  const text = typeof e.body === 'string' ? e.body : JSON.stringify(e.body ?? (err as Error).message);
  let message = text;
  try {
    message = (JSON.parse(text) as { message?: string }).message ?? text;
  } catch { /* not JSON */ }
  return { ok: false, code: e.code ?? 0, message };
}

export function adminConfig(): KubeConfig {
  const kc = new KubeConfig();
  kc.loadFromFile(ADMIN_KUBECONFIG);
  return kc;
}

export const core = () => adminConfig().makeApiClient(CoreV1Api);
export const objects = () => KubernetesObjectApi.makeApiClient(adminConfig());

export interface Credentials {
  server: URL;
  ca: Buffer;
  cert: Buffer;
  key: Buffer;
}

/** A client certificate for CN=system:node:<name>, O=system:nodes: what a kubelet holds. */
export function kubeletCredentials(name: string): Credentials {
  cluster('node-cert', name);
  const kc = new KubeConfig();
  kc.loadFromFile(join(STATE, 'nodes', `${name}.kubeconfig`));
  const server = new URL(kc.getCurrentCluster()?.server ?? '');
  return {
    server,
    ca: readFileSync(join(STATE, 'pki', 'ca.crt')),
    cert: readFileSync(join(STATE, 'nodes', `${name}.crt`)),
    key: readFileSync(join(STATE, 'nodes', `${name}.key`)),
  };
}

export interface ApiAnswer<T> {
  status: number;
  body: T;
  ms: number;
}

function call<T>(creds: Credentials, method: string, path: string, contentType: string, body: unknown): Promise<ApiAnswer<T>> {
  const payload = JSON.stringify(body);
  const started = performance.now();
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: creds.server.hostname,
        port: creds.server.port,
        path,
        method,
        ca: creds.ca,
        cert: creds.cert,
        key: creds.key,
        headers: { 'content-type': contentType, accept: 'application/json', 'content-length': Buffer.byteLength(payload) },
      },
      (res) => {
        let text = '';
        res.on('data', (c: Buffer) => (text += c));
        res.on('end', () => {
          let parsed: unknown = {};
          try {
            parsed = JSON.parse(text || '{}');
          } catch {
            parsed = { message: text }; // an API server going down may answer in plain text
          }
          resolve({ status: res.statusCode ?? 0, body: parsed as T, ms: performance.now() - started });
        });
      },
    );
    // A kubelet gives up on a request after a while too; an API server that stops mid-request must not hang the test.
    req.setTimeout(15_000, () => req.destroy(new Error(`${method} ${path}: no answer in 15 s`)));
    req.on('error', reject);
    req.end(payload);
  });
}

/** PATCH nodes/<name>/status with a strategic merge patch, as the kubelet's status loop does (dryRun: the API server persists nothing). */
export function kubeletPatchStatus(creds: Credentials, name: string, status: object, options: { dryRun?: boolean } = {}): Promise<ApiAnswer<V1Node>> {
  return call<V1Node>(creds, 'PATCH', `/api/v1/nodes/${name}/status${options.dryRun ? '?dryRun=All' : ''}`, 'application/strategic-merge-patch+json', { status });
}

/** PATCH nodes/<name> (metadata, spec) with a strategic merge patch, as a kubelet with its own credentials may. */
export function kubeletPatchNode(creds: Credentials, name: string, patch: object): Promise<ApiAnswer<V1Node>> {
  return call<V1Node>(creds, 'PATCH', `/api/v1/nodes/${name}`, 'application/strategic-merge-patch+json', patch);
}

/** POST a Node with full status, as the kubelet registers itself. */
export function kubeletRegister(creds: Credentials, node: V1Node): Promise<ApiAnswer<V1Node>> {
  return call<V1Node>(creds, 'POST', '/api/v1/nodes', 'application/json', node);
}

/** The status a kubelet computes for a node with this raw allocatable, with a fresh Ready heartbeat. */
export function kubeletStatus(raw: { cpu: string; memory: string }, capacity = raw): object {
  const now = new Date().toISOString().replace(/\.\d+Z$/, 'Z');
  return {
    capacity: { ...capacity, pods: '110' },
    allocatable: { ...raw, pods: '110' },
    conditions: [
      { type: 'Ready', status: 'True', reason: 'KubeletReady', message: 'kubelet is posting ready status', lastHeartbeatTime: now, lastTransitionTime: now },
    ],
  };
}

/** The helm binary test/deploy builds (pinned), against the local cluster: its stdout. */
export async function helm(...args: string[]): Promise<string> {
  const build = join(REPO, 'test/deploy/build-helm.sh');
  await promisify(execFile)('bash', [build]); // cached after test/deploy/check.sh: well under a second
  const bin = (await promisify(execFile)('bash', [build, '--print-path'], { encoding: 'utf8' })).stdout.trim();
  return (await promisify(execFile)(bin, ['--kubeconfig', ADMIN_KUBECONFIG, ...args], { encoding: 'utf8' })).stdout;
}
