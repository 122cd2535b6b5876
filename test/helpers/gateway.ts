// A real gateway on random 127.0.0.1 ports, with a freshly generated CA, for tests.
import assert from 'node:assert/strict';
import type { IncomingHttpHeaders } from 'node:http';
import { request, type Agent } from 'node:https';
import { createLogger } from '../../lib/log.js';
import { DEFAULT_POLICY, type Policy } from '../../gateway/decide/policy.js';
import { flagsPolicySource, type PolicySource } from '../../gateway/policies/policy-source.js';
import { selectPolicy, type PolicyEntry } from '../../gateway/decide/select-policy.js';
import { GATEWAY_DEFAULTS } from '../../gateway/config/defaults.js';
import { startGateway, type GatewayOptions, type RunningGateway } from '../../gateway/gateway.js';
import { generateServingCertificate } from '../../gateway/tls/self-signed.js';
import type { TemplateSource } from '../../gateway/inject/template-source.js';
import type { TemplateEntry } from '../../gateway/inject/sidecar-template.js';

export interface TestGateway extends RunningGateway {
  ca: string;
  /** The serving certificate and key, which every test gateway shares: a replica presents them to another. */
  serving: { cert: string; key: string };
}

// The promise, not its value: two gateways started at once (Promise.all) must share one certificate, not each
// generate one and return whichever was assigned last as the other's CA.
let certificate: ReturnType<typeof generateServingCertificate> | undefined;

export async function startTestGateway(
  over: {
    policy?: Policy;
    policies?: PolicySource;
    now?: () => number;
    grpcPort?: number;
    /** The agent streams' port (default 0: a free one). */
    agentPort?: number;
    bodyLimitBytes?: number;
    warmupMs?: number;
    sidecars?: { source: TemplateSource; excludedNamespaces: string[] };
    grpcTls?: boolean;
    auth?: GatewayOptions['auth'];
    webhookClientCa?: string;
    /** The grant-signing key; replicas that share it trust each other's records. */
    proofKey?: Buffer;
    connections?: GatewayOptions['connections'];
    queryLimits?: GatewayOptions['queryLimits'];
    grpcStreams?: GatewayOptions['grpcStreams'];
    agentSending?: GatewayOptions['agentSending'];
    /** Load shedding; off unless asked for: a busy test host must not refuse other tests' queries. */
    shedding?: GatewayOptions['shedding'];
    shard?: GatewayOptions['shard'];
  } = {},
): Promise<TestGateway> {
  certificate ??= generateServingCertificate(['localhost', '127.0.0.1']);
  const cert = await certificate;
  const gw = await startGateway({
    ...GATEWAY_DEFAULTS,
    bindAddress: '127.0.0.1',
    webhookPort: 0,
    grpcPort: over.grpcPort ?? 0,
    agentPort: over.agentPort ?? 0,
    metricsPort: 0,
    tls: cert,
    policies: over.policies ?? flagsPolicySource(over.policy ?? DEFAULT_POLICY),
    log: createLogger('test-gateway', process.env.TEST_LOG_LEVEL ?? 'silent'),
    ...(over.now && { now: over.now }),
    ...(over.bodyLimitBytes && { bodyLimitBytes: over.bodyLimitBytes }),
    ...(over.warmupMs && { warmupMs: over.warmupMs }),
    ...(over.sidecars && { sidecars: over.sidecars }),
    ...(over.grpcTls && { grpcTls: true }),
    ...(over.auth && { auth: over.auth }),
    ...(over.webhookClientCa && { webhookClientCa: over.webhookClientCa }),
    ...(over.proofKey && { proofKey: over.proofKey }),
    ...(over.connections && { connections: over.connections }),
    ...(over.queryLimits && { queryLimits: over.queryLimits }),
    ...(over.grpcStreams && { grpcStreams: over.grpcStreams }),
    ...(over.agentSending && { agentSending: over.agentSending }),
    ...(over.shard && { shard: over.shard }),
    shedding: over.shedding ?? { loopDelayMs: 0, maxSendEveryMs: 0 },
    // Ingest threads at the main thread's priority: on a test host every other test's processes share the
    // cgroup, and a thread at nice 10 yields to all of them, not only to its gateway's main thread as in a pod.
    ingestNice: 0,
  });
  return { ...gw, ca: cert.ca, serving: { cert: cert.cert, key: cert.key } };
}

export interface HttpAnswer {
  status: number;
  headers: IncomingHttpHeaders;
  body: string;
  json: () => unknown;
}

/** POST over real HTTPS, verifying the gateway's certificate against its CA. */
export function postHttps(
  gw: Pick<TestGateway, 'ports' | 'ca'>,
  path: string,
  body: string | Buffer,
  headers: Record<string, string> = { 'content-type': 'application/json' },
  agent?: Agent | false,
  clientCert?: { cert: string; key: string },
): Promise<HttpAnswer> {
  return new Promise((resolve, reject) => {
    const req = request(
      { host: '127.0.0.1', servername: 'localhost', port: gw.ports.webhook, path, method: 'POST', ca: gw.ca, ...(clientCert && { cert: clientCert.cert, key: clientCert.key }), ...(agent !== undefined && { agent }), headers: { ...headers, 'content-length': String(Buffer.byteLength(body)) } },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => {
          const text = Buffer.concat(chunks).toString();
          resolve({ status: res.statusCode ?? 0, headers: res.headers, body: text, json: () => JSON.parse(text) });
        });
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

export async function getHttp(port: number, path: string): Promise<{ status: number; body: string }> {
  const res = await fetch(`http://127.0.0.1:${port}${path}`);
  return { status: res.status, body: await res.text() };
}

/** A value the test can change, telling listeners as a watch would. */
function changeable<T>(initial: T) {
  let current = initial;
  const listeners: Array<() => void> = [];
  return {
    get: () => current,
    onChange: (l: () => void) => listeners.push(l),
    set(next: T) {
      current = next;
      for (const l of listeners) l();
    },
  };
}

/** A PolicySource over a list the test can change, as the CRD watch would. */
export function listPolicySource(entries: PolicyEntry[]): PolicySource & { set(next: PolicyEntry[]): void } {
  const list = changeable(entries);
  return {
    kind: 'crd',
    entries: list.get,
    select: (labels) => selectPolicy(list.get(), labels),
    retainMs: () => 120_000,
    notReady: () => undefined,
    onChange: list.onChange,
    stop: async () => {},
    set: list.set,
  };
}

/** A TemplateSource over a list the test can change, as the ConfigMap watch would. */
export function listTemplateSource(entries: TemplateEntry[]): TemplateSource & { set(next: TemplateEntry[]): void } {
  const list = changeable(entries);
  return { kind: 'configmap', templates: list.get, onChange: list.onChange, stop: async () => {}, set: list.set };
}

/** An AdmissionReview answer that lets the object through exactly as it came. */
export function assertAllowedUnchanged(answer: { response: { uid: string; allowed: boolean; patch?: string } }, uid: string): void {
  assert.equal(answer.response.uid, uid);
  assert.equal(answer.response.allowed, true);
  assert.equal(answer.response.patch, undefined);
}
