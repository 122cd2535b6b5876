// What the e2e tests set up on the real control plane: the gateway process, the
// webhook from deploy/, fake nodes (kwok runs their pods), their agents (the
// real agent binary reading a FakeHost) and their kubelet status loops.
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ApiextensionsV1Api, CustomObjectsApi, loadYaml, type V1CustomResourceDefinition, type V1MutatingWebhook, type V1MutatingWebhookConfiguration, type V1Node, type V1Pod, type V1Taint } from '@kubernetes/client-node';
import { FakeHost, type FakeUsage } from '../helpers/fake-host.js';
import { ADMIN_KUBECONFIG, REPO, adminConfig, core, kubeletCredentials, kubeletPatchStatus, kubeletStatus, objects, type Credentials } from './cluster.js';
import { freePort, run, type Proc } from './processes.js';
import { waitUntil } from '../../scripts/harness/wait.js';

export const GI = 1024 ** 3;
export const OPT_IN = { 'oversell.io/enabled': 'true' };
const work = mkdtempSync(join(tmpdir(), 'oversell-e2e-'));

export interface GatewayProc extends Proc {
  ports: { webhook: number; grpc: number; agent: number; metrics: number };
  ca: string;
}

/**
 * With a kubeconfig the gateway authenticates agents and serves gRPC over TLS
 * unless told otherwise; tests whose agents are plain local processes say so.
 */
export const UNAUTHENTICATED_AGENTS = ['--auth', 'none', '--grpc-tls', 'off'];

/**
 * Gateway flags: one policy from flags (stale after 6 s, a 10 s window) unless a
 * test passes ['--policies', 'crd', '--kubeconfig', ...]; then its OversellPolicies
 * say both, and the gateway refuses the policy flags.
 */
export async function startGatewayProcess(ports?: GatewayProc['ports'], tlsDir = join(work, 'tls'), policyArgs: string[] = ['--policies', 'flags']): Promise<GatewayProc> {
  const p = ports ?? { webhook: await freePort(), grpc: await freePort(), agent: await freePort(), metrics: await freePort() };
  const crd = policyArgs[policyArgs.indexOf('--policies') + 1] === 'crd';
  const proc = run(`gateway-${p.grpc}`, 'gateway', [
    '--bind-address', '127.0.0.1',
    '--webhook-port', String(p.webhook),
    '--grpc-port', String(p.grpc),
    '--agent-port', String(p.agent),
    '--metrics-port', String(p.metrics),
    '--tls-dir', tlsDir,
    ...(crd ? [] : ['--stale-after', '6s', '--window', '10s']),
    ...policyArgs,
  ]);
  await proc.waitFor(/gateway serving/);
  return { ...proc, ports: p, ca: readFileSync(join(tlsDir, 'ca.crt'), 'utf8') };
}

/** deploy/base/webhook.yaml, pointed at the local gateway by URL with its CA. */
export function webhookFromDeploy(gateway: GatewayProc, name?: string): V1MutatingWebhookConfiguration {
  const config = loadYaml<V1MutatingWebhookConfiguration>(readFileSync(join(REPO, 'deploy/base/webhook.yaml'), 'utf8'));
  if (name) config.metadata = { ...config.metadata, name };
  routeTo(config, gateway.ports.webhook, Buffer.from(gateway.ca).toString('base64'));
  return config;
}

const WEBHOOK_KIND = { apiVersion: 'admissionregistration.k8s.io/v1', kind: 'MutatingWebhookConfiguration' } as const;

/**
 * Creates the webhook configuration, first removing one of the same name that
 * a run killed before its after hook left behind: a leftover must not fail
 * this file with 409 AlreadyExists (nor keep acting on nodes meanwhile).
 */
export async function installWebhook(config: V1MutatingWebhookConfiguration): Promise<V1MutatingWebhookConfiguration> {
  await removeWebhook(config.metadata?.name ?? '');
  return (await objects().create({ ...WEBHOOK_KIND, ...config })) as V1MutatingWebhookConfiguration;
}

/**
 * Replaces an installed webhook configuration in place. Removing and creating
 * it again leaves a moment with no webhook: a kubelet write then is stored raw
 * and unsigned, and a kubelet that reads back what it computed writes again
 * only after nodeStatusReportFrequency (5 min).
 */
export async function replaceWebhook(config: V1MutatingWebhookConfiguration): Promise<V1MutatingWebhookConfiguration> {
  const ref = { ...WEBHOOK_KIND, metadata: { name: config.metadata?.name ?? '' } };
  const current = (await objects().read(ref)) as V1MutatingWebhookConfiguration;
  const body = { ...WEBHOOK_KIND, ...config, metadata: { ...config.metadata, resourceVersion: current.metadata?.resourceVersion } };
  return (await objects().replace(body)) as V1MutatingWebhookConfiguration;
}

/** Deletes the webhook configuration if it exists, and waits until it is gone. */
export async function removeWebhook(name: string): Promise<void> {
  const ref = { ...WEBHOOK_KIND, metadata: { name } };
  await objects().delete(ref).catch((err: { code?: number }) => {
    if (err.code !== 404) throw err;
  });
  await eventually(`webhook configuration ${name} gone`, () => objects().read(ref).then(() => undefined, () => true), 30_000);
}

export const POLICY_CRD = { apiVersion: 'apiextensions.k8s.io/v1', kind: 'CustomResourceDefinition', metadata: { name: 'oversellpolicies.oversell.io' } };

/**
 * What an install of deploy/ or the chart leaves if a test stops halfway: the
 * webhook configuration `oversell`, the namespace `oversell`, the CRD. Deleted
 * and waited for, so the next file's install starts clean (a leftover object
 * owned by another field manager makes a server-side apply conflict).
 */
/** Deletes a namespace (if there) and waits until the API server no longer has it; rejects after timeoutMs. */
export async function deleteNamespaceAndWait(name: string, timeoutMs: number): Promise<void> {
  await core().deleteNamespace({ name }).catch(() => {});
  await eventually(`namespace ${name} gone`, () => core().readNamespace({ name }).then(() => undefined, () => true), timeoutMs, 500);
}

export async function removeInstallLeftovers(): Promise<void> {
  await removeWebhook('oversell').catch(() => {});
  await core().deleteNamespace({ name: 'oversell' }).catch(() => {});
  await objects().delete(POLICY_CRD).catch(() => {});
  await eventually('namespace oversell and the OversellPolicy CRD gone', async () => {
    const ns = await core().readNamespace({ name: 'oversell' }).then(() => true, () => false);
    const crd = await objects().read(POLICY_CRD).then(() => true, () => false);
    return !ns && !crd ? true : undefined;
  }, 120_000, 500);
}

/**
 * Every webhook of the configuration to a local gateway port by URL, each keeping
 * its own path (/mutate/nodes, /mutate/pods): there is no kube-proxy to reach a Service.
 */
export function routeTo(config: V1MutatingWebhookConfiguration, port: number, caBundle = ''): V1MutatingWebhookConfiguration {
  for (const hook of config.webhooks ?? []) {
    const c = hook.clientConfig;
    const path = c.service?.path ?? (c.url ? new URL(c.url).pathname : '/mutate/nodes');
    hook.clientConfig = { url: `https://127.0.0.1:${port}${path}`, caBundle: caBundle || c.caBundle || '' };
    if (!hook.clientConfig.caBundle) delete hook.clientConfig.caBundle;
  }
  return config;
}

/** One webhook of a configuration by name (the nodes and pods entries share one configuration). */
export function hookNamed(config: V1MutatingWebhookConfiguration, name: string): V1MutatingWebhook {
  const hook = config.webhooks?.find((h) => h.name === name);
  if (!hook) throw new Error(`no webhook ${name} in ${config.metadata?.name}: ${config.webhooks?.map((h) => h.name).join(', ')}`);
  return hook;
}

export interface FakeNode {
  name: string;
  raw: { cpu: string; memory: string };
  host: FakeHost;
  creds: Credentials;
  agent: Proc | undefined;
  /** Stops the kubelet loop, the agent and the fake host, and deletes the Node. */
  stop(): Promise<void>;
  /** extraArgs: e.g. TLS and token flags; waitFor: the log line that means started (default: connected). */
  startAgent(gateway: GatewayProc, extraArgs?: string[], waitFor?: RegExp): Promise<Proc>;
  /** One kubelet status write; returns the stored node. */
  heartbeat(): Promise<V1Node>;
}

export async function fakeNode(
  name: string,
  opts: { labels?: Record<string, string>; annotations?: Record<string, string>; raw?: { cpu: string; memory: string }; usage?: FakeUsage; taints?: V1Taint[]; create?: boolean } = {},
): Promise<FakeNode> {
  const raw = opts.raw ?? { cpu: '4', memory: '8Gi' };
  if (opts.create !== false) {
    await core().createNode({
      body: {
        metadata: { name, labels: { 'kubernetes.io/hostname': name, type: 'kwok', ...opts.labels }, annotations: { 'kwok.x-k8s.io/node': 'fake', ...opts.annotations } },
        spec: { ...(opts.taints && { taints: opts.taints }) },
        status: kubeletStatus(raw),
      },
    });
  }
  const host = new FakeHost(join(work, name), 8, 16 * GI, opts.usage ?? { cpuMillicores: 200, memoryWorkingSetBytes: 1 * GI }).start();
  const creds = kubeletCredentials(name);
  const node: FakeNode = {
    name,
    raw,
    host,
    creds,
    agent: undefined,
    async startAgent(gateway, extraArgs = [], waitFor = /connected to gateway/) {
      node.agent = run(`agent-${name}`, 'agent', [
        '--node-name', name,
        '--gateway', `127.0.0.1:${gateway.ports.agent}`,
        '--proc-root', host.procRoot,
        '--cgroup-root', host.cgroupRoot,
        '--metrics-address', '127.0.0.1:0',
        '--interval', '500ms',
        '--kubeconfig', ADMIN_KUBECONFIG,
        ...extraArgs,
      ]);
      await node.agent.waitFor(waitFor);
      return node.agent;
    },
    async heartbeat() {
      const res = await kubeletPatchStatus(creds, name, kubeletStatus(raw));
      if (res.status !== 200) throw new Error(`kubelet patch of ${name} failed: ${res.status} ${JSON.stringify(res.body)}`);
      return res.body;
    },
    async stop() {
      host.stop();
      await node.agent?.kill();
      // The Node object too: opted-in nodes left without an agent count as stale
      // for every later gateway, and a gateway that sees most nodes stale holds
      // its status writes back (status-writer.ts holdBack), as if it lost its agents.
      await core().deleteNode({ name }).catch(() => {}); // also when the test registered it itself (create: false)
    },
  };
  return node;
}

export function pod(name: string, cpu: string, memory: string, placement: { nodeName?: string; nodeSelector?: Record<string, string> }): V1Pod {
  return {
    metadata: { name, namespace: 'default', labels: { app: 'e2e' } },
    spec: {
      ...placement,
      tolerations: [{ key: 'kwok.x-k8s.io/node', operator: 'Exists', effect: 'NoSchedule' }],
      containers: [{ name: 'app', image: 'fake', resources: { requests: { cpu, memory } } }],
    },
  };
}

export async function podsOn(nodeName: string): Promise<V1Pod[]> {
  const list = await core().listPodForAllNamespaces({ fieldSelector: `spec.nodeName=${nodeName}` });
  return list.items;
}

export function eventually<T>(what: string, check: () => Promise<T | undefined> | T | undefined, timeoutMs = 30_000, everyMs = 250): Promise<T> {
  return waitUntil(what, check, timeoutMs, everyMs);
}


/** Kubelet writes until the stored node satisfies check. */
export const untilWrite = (n: FakeNode, what: string, check: (node: V1Node) => boolean, timeoutMs = 20_000): Promise<V1Node> =>
  eventually(what, async () => {
    const stored = await n.heartbeat();
    return check(stored) ? stored : undefined;
  }, timeoutMs);

export const customObjects = () => adminConfig().makeApiClient(CustomObjectsApi);
export const POLICY_REF = { group: 'oversell.io', version: 'v1alpha1', plural: 'oversellpolicies' };

/** The OversellPolicy CRD from deploy/, established (kept if another file installed it). */
export async function installPolicyCrd(): Promise<void> {
  const crd = loadYaml<V1CustomResourceDefinition>(readFileSync(join(REPO, 'deploy/base/crd.yaml'), 'utf8'));
  const ext = adminConfig().makeApiClient(ApiextensionsV1Api);
  await ext.createCustomResourceDefinition({ body: crd }).catch((err: { code?: number }) => {
    if (err.code !== 409) throw err;
  });
  await eventually('the CRD to be established', async () => {
    const got = await ext.readCustomResourceDefinition({ name: 'oversellpolicies.oversell.io' });
    return got.status?.conditions?.some((c) => c.type === 'Established' && c.status === 'True') ? true : undefined;
  });
}

export function policyObject(name: string, spec: Record<string, unknown>) {
  return { apiVersion: 'oversell.io/v1alpha1', kind: 'OversellPolicy', metadata: { name }, spec };
}

export async function upsertPolicy(name: string, spec: Record<string, unknown>): Promise<void> {
  try {
    const current = (await customObjects().getClusterCustomObject({ ...POLICY_REF, name })) as { metadata: { resourceVersion: string } };
    await customObjects().replaceClusterCustomObject({ ...POLICY_REF, name, body: { ...policyObject(name, spec), metadata: { name, resourceVersion: current.metadata.resourceVersion } } });
  } catch (err) {
    if ((err as { code?: number }).code !== 404) throw err;
    await customObjects().createClusterCustomObject({ ...POLICY_REF, body: policyObject(name, spec) });
  }
}

export { objects };

/** Creates the namespace, or leaves the one already there. */
/**
 * Creates a namespace unless it is there and staying. A namespace an earlier
 * file deleted without waiting is still there, Terminating, and vanishes under
 * the next file a moment later: wait it out, then create it.
 */
export async function ensureNamespace(name: string): Promise<void> {
  const existing = await core().readNamespace({ name }).catch(() => undefined);
  if (existing?.status?.phase === 'Terminating') {
    await eventually(`namespace ${name} (Terminating) gone`, () => core().readNamespace({ name }).then(() => undefined, () => true), 120_000, 500);
  } else if (existing) return;
  await core().createNamespace({ body: { metadata: { name } } }).catch((e: { code?: number }) => {
    if (e.code !== 409) throw e;
  });
}
