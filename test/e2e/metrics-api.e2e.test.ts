// The metrics API (metrics.k8s.io/v1beta1) as users install it, on the local
// cluster's real node, with no metrics-server anywhere: `kubectl apply -k` of
// deploy/ with the metrics-api Component, the real kube-apiserver's
// aggregator calling the gateway pod through its Service, `kubectl top`
// against the kubelet's own /metrics/resource, the real
// kube-controller-manager's HorizontalPodAutoscaler scaling a real Deployment
// on it, and who may call (the API server's RBAC, the gateway's own review,
// the front-proxy certificate).
import assert from 'node:assert/strict';
import { execFile, execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { request } from 'node:https';
import { tmpdir } from 'node:os';
import { promisify } from 'node:util';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { AppsV1Api, AutoscalingV2Api, RbacAuthorizationV1Api, type V1Deployment, type V1Node, type V1Pod, type V2HorizontalPodAutoscaler } from '@kubernetes/client-node';
import { parseBytes, parseMilli } from '../../lib/quantity.js';
import { SUMMARY_SEND_EVERY_MS } from '../../gateway/config/defaults.js';
import { parseDuration } from '../../lib/duration.js';
import { REPO, STATE, adminConfig, clusterAsync, core, helm, objects } from './cluster.js';
import { deleteNamespaceAndWait, ensureNamespace, eventually, removeInstallLeftovers } from './fixtures.js';
import { OVERSELL_IMAGE_TAR, findRealNode, importImage, podInPhase, probeContainer, realNodePlacement, realNodePod } from './real-node.js';

const NS = 'oversell';
const PODS = 'oversell-metrics-e2e';
const OVERLAY = join(REPO, 'test/e2e/metrics-api-install');
const APISERVICE = 'v1beta1.metrics.k8s.io';
const APISERVICE_REF = { apiVersion: 'apiregistration.k8s.io/v1', kind: 'APIService', metadata: { name: APISERVICE } };
const READER_BINDING = 'oversell-metrics-e2e-reader';
const MI = 1024 ** 2;

let node: V1Node | undefined;
let nodeName = '';
/** Set once the install is Available: the tests after it build on it, and skip (not fail again) without it. */
let installed = false;

const kubectl = (...args: string[]) => clusterAsync('kubectl', ...args);
const BIN = execFileSync('bash', [join(REPO, 'scripts/cluster/build.sh'), '--print-bin-dir'], { encoding: 'utf8' }).trim();
/** kubectl with another kubeconfig than the admin's. */
const kubectlAs = async (kubeconfig: string, ...args: string[]) => (await promisify(execFile)(join(BIN, 'kubectl'), ['--kubeconfig', kubeconfig, ...args], { encoding: 'utf8' })).stdout;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const apps = () => adminConfig().makeApiClient(AppsV1Api);
const rbac = () => adminConfig().makeApiClient(RbacAuthorizationV1Api);
const autoscaling = () => adminConfig().makeApiClient(AutoscalingV2Api);
const errText = (e: unknown) => String((e as { stderr?: string }).stderr ?? (e as Error).message);

interface ApiServiceObject {
  metadata: { name: string; labels?: Record<string, string>; annotations?: Record<string, string>; resourceVersion?: string };
  spec: { group?: string; version?: string; groupPriorityMinimum?: number; versionPriority?: number; insecureSkipTLSVerify?: boolean; service?: { name?: string; namespace?: string; port?: number }; caBundle?: string };
  status?: { conditions?: { type: string; status: string; reason?: string; message?: string }[] };
}

async function apiServices(): Promise<ApiServiceObject[]> {
  return (JSON.parse(await kubectl('get', 'apiservices', '-o', 'json')) as { items: ApiServiceObject[] }).items;
}

/** Every APIService serving metrics.k8s.io, whatever its version or owner. */
async function metricsApiServices(): Promise<ApiServiceObject[]> {
  return (await apiServices()).filter((a) => a.spec.group === 'metrics.k8s.io');
}

const available = (a?: ApiServiceObject) => a?.status?.conditions?.find((c) => c.type === 'Available');

/** Oversell's APIService left by a killed run; a foreign one (metrics-server) stops the file: this proof needs none. */
async function removeOurApiService(): Promise<void> {
  for (const a of await metricsApiServices()) {
    if (a.metadata.labels?.['app.kubernetes.io/part-of'] !== 'oversell') continue;
    await objects().delete({ ...APISERVICE_REF, metadata: { name: a.metadata.name } }).catch(() => {});
  }
  await eventually('no oversell APIService for metrics.k8s.io', async () => ((await metricsApiServices()).some((a) => a.metadata.labels?.['app.kubernetes.io/part-of'] === 'oversell') ? undefined : true), 30_000, 250);
}

/** The take-over test's stand-in for metrics-server's APIService carries this label (and nothing of oversell's). */
const STAND_IN_LABEL = 'e2e.oversell.io/stand-in';

/**
 * metrics-server's APIService as its Helm chart (metrics-server 3.12) makes it:
 * to kube-system/metrics-server:443, insecureSkipTLSVerify, the chart's labels and
 * Helm's ownership annotations; plus a label and an annotation of its own, to see
 * them given back. There is no such Service: it stays unavailable.
 */
function standInApiService(): ApiServiceObject & { apiVersion: string; kind: string } {
  return {
    apiVersion: 'apiregistration.k8s.io/v1',
    kind: 'APIService',
    metadata: {
      name: APISERVICE,
      labels: { 'app.kubernetes.io/name': 'metrics-server', 'app.kubernetes.io/instance': 'metrics-server', 'app.kubernetes.io/managed-by': 'Helm', 'helm.sh/chart': 'metrics-server-3.12.2', [STAND_IN_LABEL]: 'metrics-server' },
      annotations: { 'meta.helm.sh/release-name': 'metrics-server', 'meta.helm.sh/release-namespace': 'kube-system', 'e2e.oversell.io/note': 'given back as created' },
    },
    spec: { group: 'metrics.k8s.io', version: 'v1beta1', groupPriorityMinimum: 100, versionPriority: 100, insecureSkipTLSVerify: true, service: { name: 'metrics-server', namespace: 'kube-system', port: 443 } },
  };
}

/** What must come back exactly: the spec, labels and annotations, as the API server holds them. */
const heldParts = (a?: ApiServiceObject) => ({ spec: a?.spec, labels: a?.metadata.labels, annotations: a?.metadata.annotations });

async function removeStandIn(): Promise<void> {
  const a = (await metricsApiServices()).find((x) => x.metadata.labels?.[STAND_IN_LABEL]);
  if (!a) return;
  await objects().delete({ ...APISERVICE_REF, metadata: { name: a.metadata.name } }).catch(() => {});
  await eventually('the stand-in APIService gone', async () => ((await metricsApiServices()).some((x) => x.metadata.labels?.[STAND_IN_LABEL]) ? undefined : true), 30_000, 250);
}

// ---------------------------------------------------------------- figures

interface Sample {
  value: number;
  /** ms since the epoch, the kubelet's (cAdvisor's) time of the reading. */
  at: number;
}

/** The kubelet's own resource metrics (Prometheus text), through the API server's node proxy. */
async function kubeletResourceMetrics(): Promise<Map<string, Sample>> {
  const text = await adminGet(`/api/v1/nodes/${nodeName}/proxy/metrics/resource`);
  const out = new Map<string, Sample>();
  for (const line of text.split('\n')) {
    if (!line || line.startsWith('#')) continue;
    // name{labels} value timestamp_ms
    const m = /^(\S+?(?:\{[^}]*\})?)\s+(\S+)(?:\s+(\d+))?$/.exec(line);
    if (m) out.set(m[1]!, { value: Number(m[2]), at: Number(m[3] ?? Number.NaN) });
  }
  return out;
}

const containerKey = (metric: string, pod: string, container: string) => `${metric}{container="${container}",namespace="${PODS}",pod="${pod}"}`;

function kubeletSample(scrape: Map<string, Sample>, key: string): Sample {
  const s = scrape.get(key);
  if (!s) throw new Error(`the kubelet's /metrics/resource has no ${key}; it has: ${[...scrape.keys()].filter((k) => k.includes(PODS) || k.startsWith('node_')).join(', ')}`);
  return s;
}

/** A CPU rate in millicores between two scrapes of a counter in seconds, and the span it covers. */
function kubeletRate(a: Map<string, Sample>, b: Map<string, Sample>, key: string): { millicores: number; from: number; to: number } {
  const x = kubeletSample(a, key);
  const y = kubeletSample(b, key);
  assert.ok(y.at > x.at, `${key}: the second scrape is not newer (${x.at} -> ${y.at})`);
  return { millicores: ((y.value - x.value) / ((y.at - x.at) / 1000)) * 1000, from: x.at, to: y.at };
}

/** Two kubelet scrapes at least minSpanMs apart by the kubelet's own timestamps of `key` (cAdvisor refreshes every ~10-15 s). */
async function twoScrapes(key: string, minSpanMs: number, during?: () => Promise<void>): Promise<[Map<string, Sample>, Map<string, Sample>]> {
  const first = await eventually(`the kubelet reporting ${key}`, async () => {
    const s = await kubeletResourceMetrics();
    return s.has(key) ? s : undefined;
  }, 60_000, 1000);
  const from = kubeletSample(first, key).at;
  await during?.();
  const second = await eventually(`a kubelet reading of ${key} ${minSpanMs} ms after ${from}`, async () => {
    const s = await kubeletResourceMetrics();
    const at = s.get(key)?.at ?? 0;
    return at >= from + minSpanMs ? s : undefined;
  }, minSpanMs + 60_000, 1000);
  return [first, second];
}

interface MetricsObject {
  metadata: { name: string; namespace?: string; labels?: Record<string, string> };
  timestamp: string;
  window: string;
  usage?: { cpu: string; memory: string };
  containers?: { name: string; usage: { cpu: string; memory: string } }[];
}

/**
 * A GET as the cluster admin, in this process: what `kubectl get --raw` does,
 * without a kubectl process each time (a second or more on this busy host:
 * too few samples of a 1 s figure).
 */
async function adminGet(path: string): Promise<string> {
  const pki = join(STATE, 'pki');
  const res = await httpsGet(new URL(path, adminConfig().getCurrentCluster()?.server), { ca: readFileSync(join(pki, 'ca.crt')), cert: readFileSync(join(pki, 'admin.crt')), key: readFileSync(join(pki, 'admin.key')) });
  if (res.status !== 200) throw new Error(`GET ${path}: ${res.status} ${res.body}`);
  return res.body;
}

async function metricsApi<T>(path: string): Promise<T> {
  return JSON.parse(await adminGet(`/apis/metrics.k8s.io/v1beta1/${path}`)) as T;
}

const cpuOf = (usage: { cpu: string }) => Number(parseMilli(usage.cpu, 'cpu'));
const memoryOf = (usage: { memory: string }) => Number(parseBytes(usage.memory, 'memory'));

/** `kubectl top` rows, split on blanks, headers dropped. */
async function top(...args: string[]): Promise<string[][]> {
  return (await kubectl('top', ...args, '--no-headers')).trim().split('\n').filter(Boolean).map((l) => l.trim().split(/\s+/));
}

/** kubectl top's figures: "123m", "2" (cores), "456Mi". */
const topMilli = (text: string) => Number(parseMilli(text, 'kubectl top cpu'));
const topBytes = (text: string) => Number(parseBytes(text, 'kubectl top memory'));

/** /proc/meminfo's working set (MemTotal - MemFree - Inactive(file)), as the agent and, on cgroup v2, the kubelet compute the node's. */
function meminfoWorkingSet(): number {
  const text = readFileSync('/proc/meminfo', 'utf8');
  const kib = (k: string) => Number(new RegExp(`^${k.replace(/[()]/g, '\\$&')}:\\s+(\\d+)`, 'm').exec(text)?.[1] ?? Number.NaN);
  return (kib('MemTotal') - kib('MemFree') - kib('Inactive(file)')) * 1024;
}

const V1_ROOT_MEMORY = '/sys/fs/cgroup/memory';

/**
 * What the kubelet's node working set leaves out on a cgroup v1 host: it reads the
 * root memory cgroup (usage_in_bytes - total_inactive_file), which is not charged
 * the kernel's own memory (slab, page tables, stacks). On cgroup v2 it reads
 * /proc/meminfo for the root, as oversell's decision does: nothing left out.
 * Logged, not a tolerance: the metrics API serves the root cgroup's figure on v1.
 */
function kernelMemoryOutsideCgroups(): { bytes: number; how: string } {
  if (!existsSync(join(V1_ROOT_MEMORY, 'memory.usage_in_bytes'))) return { bytes: 0, how: 'cgroup v2: the kubelet reads /proc/meminfo for the node too' };
  const usage = Number(readFileSync(join(V1_ROOT_MEMORY, 'memory.usage_in_bytes'), 'utf8'));
  const inactive = Number(/^total_inactive_file (\d+)/m.exec(readFileSync(join(V1_ROOT_MEMORY, 'memory.stat'), 'utf8'))?.[1] ?? Number.NaN);
  const host = meminfoWorkingSet();
  const cgroup = usage - inactive;
  return { bytes: Math.max(0, host - cgroup), how: `cgroup v1: /proc/meminfo's working set ${(host / MI).toFixed(0)}Mi, the root memory cgroup's ${(cgroup / MI).toFixed(0)}Mi: ${((host - cgroup) / MI).toFixed(0)}Mi of kernel memory the kubelet's figure (and the metrics API's) leaves out and the decision counts` };
}

const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;
const stddev = (xs: number[]) => Math.sqrt(mean(xs.map((x) => (x - mean(xs)) ** 2)));

// ---------------------------------------------------------------- callers

/** A ServiceAccount's token (10 min), and a kubeconfig holding only it: what a user without the admin's certificate has. */
async function serviceAccountKubeconfig(name: string): Promise<{ token: string; kubeconfig: string }> {
  await core().createNamespacedServiceAccount({ namespace: PODS, body: { metadata: { name } } }).catch((e: { code?: number }) => {
    if (e.code !== 409) throw e;
  });
  const token = (await core().createNamespacedServiceAccountToken({ namespace: PODS, name, body: { spec: { audiences: [], expirationSeconds: 600 } } })).status?.token ?? '';
  const server = adminConfig().getCurrentCluster()?.server ?? '';
  const dir = mkdtempSync(join(tmpdir(), 'oversell-metrics-e2e-'));
  const kubeconfig = join(dir, 'kubeconfig');
  writeFileSync(kubeconfig, JSON.stringify({
    apiVersion: 'v1', kind: 'Config', 'current-context': 'sa',
    clusters: [{ name: 'local', cluster: { server, 'certificate-authority': join(STATE, 'pki', 'ca.crt') } }],
    users: [{ name, user: { token } }],
    contexts: [{ name: 'sa', context: { cluster: 'local', user: name } }],
  }));
  return { token, kubeconfig };
}

interface HttpsAnswer {
  status: number;
  body: string;
}

/** One HTTPS GET; `tls` carries the CA to check the server by and, if any, a client certificate. */
function httpsGet(url: URL, tls: { ca: string | Buffer; servername?: string; cert?: Buffer; key?: Buffer }, headers: Record<string, string> = {}): Promise<HttpsAnswer> {
  return new Promise((resolve, reject) => {
    const req = request({ host: url.hostname, port: url.port, path: url.pathname + url.search, method: 'GET', headers: { accept: 'application/json', ...headers }, ...tls }, (res) => {
      let body = '';
      res.on('data', (c: Buffer) => (body += c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.setTimeout(15_000, () => req.destroy(new Error(`GET ${url}: no answer in 15 s`)));
    req.on('error', reject);
    req.end();
  });
}

// ---------------------------------------------------------------- install

async function gatewayPod(): Promise<V1Pod | undefined> {
  const pods = (await core().listNamespacedPod({ namespace: NS, labelSelector: 'app.kubernetes.io/name=oversell-gateway' })).items;
  return pods.find((p) => !p.metadata?.deletionTimestamp && p.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True'));
}

async function waitInstalled(): Promise<void> {
  await eventually('the agent pod Running on the real node, the gateway pod Ready', async () => {
    const pods = (await core().listNamespacedPod({ namespace: NS })).items.filter((p) => !p.metadata?.deletionTimestamp);
    const agent = pods.find((p) => p.metadata?.labels?.['app.kubernetes.io/name'] === 'oversell-agent' && p.spec?.nodeName === nodeName);
    const gateway = await gatewayPod();
    return agent?.status?.phase === 'Running' && gateway?.spec?.nodeName === nodeName ? true : undefined;
  }, 180_000, 500);
}

async function gatewayLog(): Promise<string> {
  return kubectl('logs', '-n', NS, 'deploy/oversell-gateway', '--tail=40').catch((e: Error) => e.message);
}

/** What a failed wait on the APIService shows: its conditions and the gateway's log. */
async function explain(err: Error): Promise<never> {
  const a = (await metricsApiServices()).find((x) => x.metadata.name === APISERVICE);
  assert.fail(`${err.message}; APIService conditions: ${JSON.stringify(a?.status?.conditions)}; the gateway's log:\n${await gatewayLog()}`);
}

// ---------------------------------------------------------------- the HPA's Deployment

const HPA_APP = 'metrics-hpa';
/** The Deployment's container: its CFS limit holds a burning pod at 100m, twice its 50m request (200 % of it). */
const HPA_RESOURCES = { requests: { cpu: '50m', memory: '16Mi' }, limits: { cpu: '100m', memory: '32Mi' } };
const IDLE = ['sleep', '3600'];
const BURN = ['burn', '-threads', '1'];

function hpaDeployment(): V1Deployment {
  return {
    metadata: { name: HPA_APP, namespace: PODS },
    spec: {
      replicas: 1,
      selector: { matchLabels: { app: HPA_APP } },
      template: {
        metadata: { labels: { app: HPA_APP } },
        spec: { ...realNodePlacement(), terminationGracePeriodSeconds: 1, containers: [probeContainer('app', IDLE, HPA_RESOURCES)] },
      },
    },
  };
}

const MAX_REPLICAS = 3;

function hpa(): V2HorizontalPodAutoscaler {
  // No stabilization and small steps: the test sees each direction within a few 15 s syncs.
  const policy = { type: 'Pods', value: 2, periodSeconds: 15 };
  return {
    metadata: { name: HPA_APP, namespace: PODS },
    spec: {
      scaleTargetRef: { apiVersion: 'apps/v1', kind: 'Deployment', name: HPA_APP },
      minReplicas: 1,
      maxReplicas: MAX_REPLICAS,
      metrics: [{ type: 'Resource', resource: { name: 'cpu', target: { type: 'Utilization', averageUtilization: 50 } } }],
      behavior: { scaleUp: { stabilizationWindowSeconds: 0, policies: [policy] }, scaleDown: { stabilizationWindowSeconds: 0, policies: [policy] } },
    },
  };
}

async function setArgs(args: string[]): Promise<void> {
  await kubectl('patch', 'deployment', HPA_APP, '-n', PODS, '--type=json', '-p', JSON.stringify([{ op: 'replace', path: '/spec/template/spec/containers/0/args', value: args }]));
}

async function readHpa(): Promise<V2HorizontalPodAutoscaler> {
  return autoscaling().readNamespacedHorizontalPodAutoscaler({ namespace: PODS, name: HPA_APP });
}

const hpaLine = (h: V2HorizontalPodAutoscaler) => {
  const m = h.status?.currentMetrics?.[0];
  const conds = (h.status?.conditions ?? []).map((c) => `${c.type}=${c.status} (${c.reason})`).join(', ');
  return `replicas ${h.status?.currentReplicas} -> ${h.status?.desiredReplicas}, current ${m?.type ?? '-'} ${m?.resource?.name ?? ''} ${m?.resource?.current?.averageUtilization ?? '-'}% (${m?.resource?.current?.averageValue ?? '-'}); ${conds}`;
};

// ---------------------------------------------------------------- setup

before(async () => {
  node = await findRealNode();
  if (!node) return;
  nodeName = node.metadata!.name!;
  await removeStandIn(); // left by a killed run of the take-over test
  const foreign = (await metricsApiServices()).filter((a) => a.metadata.labels?.['app.kubernetes.io/part-of'] !== 'oversell');
  assert.deepEqual(foreign.map((a) => a.metadata.name), [], 'an APIService for metrics.k8s.io that is not oversell\'s (metrics-server?): this file proves the API with none');
  await importImage(OVERSELL_IMAGE_TAR).catch((err: Error) => assert.fail(`${err.message}; build the image first (bash scripts/image/build.sh)`));
  await removeOurApiService();
  await removeInstallLeftovers();
  await ensureNamespace(PODS);
});

after(async () => {
  if (!node) return;
  // Whatever a failed test left: the install, our APIService (given back: none left), the callers' binding, the pods.
  await kubectl('delete', '-k', OVERLAY, '--wait=false', '--ignore-not-found').catch(() => {});
  await removeOurApiService().catch(() => {});
  await removeInstallLeftovers().catch(() => {});
  await rbac().deleteClusterRoleBinding({ name: READER_BINDING }).catch(() => {});
  await deleteNamespaceAndWait(PODS, 180_000).catch(() => {});
  // A later file asserts the node runs no other pods: wait until the kubelet has let go of ours.
  await eventually(`no pod of ${PODS} or ${NS} on ${nodeName}`, async () => {
    const left = (await core().listPodForAllNamespaces({ fieldSelector: `spec.nodeName=${nodeName}` })).items.filter((p) => [PODS, NS].includes(p.metadata?.namespace ?? ''));
    return left.length === 0 ? true : undefined;
  }, 120_000, 500).catch((err: Error) => console.log(`# cleanup: ${err.message}`));
});

describe('the metrics API on the real node, installed with kubectl apply -k and the metrics-api Component', { timeout: 25 * 60_000 }, () => {
  it('installs; the APIService v1beta1.metrics.k8s.io, the only one for metrics.k8s.io, becomes Available with the gateway\'s CA injected', async (t) => {
    if (!node) return t.skip('no real node in this cluster (OVERSELL_REAL_NODE=0)');
    assert.deepEqual(await metricsApiServices(), [], 'no APIService for metrics.k8s.io before the install');
    const started = Date.now();
    try {
      await kubectl('apply', '--server-side', '-k', OVERLAY);
    } catch {
      // The first apply may send the policy before its CRD is established (docs/install.md: run it again).
      await kubectl('wait', '--for=condition=Established', '--timeout=60s', 'crd/oversellpolicies.oversell.io');
      await kubectl('apply', '--server-side', '-k', OVERLAY);
    }
    await waitInstalled();
    const ready = Date.now();
    const a = await eventually('the APIService Available=True', async () => {
      const x = (await metricsApiServices()).find((y) => y.metadata.name === APISERVICE);
      return available(x)?.status === 'True' ? x : undefined;
    }, 120_000, 250).catch(explain);
    const availableAt = Date.now();
    console.log(`# APIService ${APISERVICE} Available ${((availableAt - started) / 1000).toFixed(1)} s after kubectl apply, ${((availableAt - ready) / 1000).toFixed(1)} s after the gateway pod was Ready (${available(a)?.reason}: ${available(a)?.message ?? ''})`);
    assert.deepEqual(a.spec.service, { name: 'oversell-gateway', namespace: NS, port: 4443 });
    const ca = (await core().readNamespacedConfigMap({ namespace: NS, name: 'oversell-gateway-ca' })).data?.['ca.crt'] ?? '';
    assert.ok(ca, 'the gateway publishes its CA');
    assert.equal(Buffer.from(a.spec.caBundle ?? '', 'base64').toString().trim(), ca.trim(), 'the caBundle is the gateway\'s CA, injected by the gateway');
    const all = await metricsApiServices();
    assert.deepEqual(all.map((x) => [x.metadata.name, x.metadata.labels?.['app.kubernetes.io/part-of']]), [[APISERVICE, 'oversell']], 'one APIService for metrics.k8s.io: oversell\'s');
    // No metrics-server anywhere: no pod, no Service of that name in any namespace.
    const ms = (await core().listPodForAllNamespaces()).items.filter((p) => /metrics-server/.test(p.metadata?.name ?? ''));
    assert.deepEqual(ms.map((p) => p.metadata?.name), []);
    installed = true;
  });

  it('kubectl top nodes and kubectl top pods -A show the real node and a probe pod, agreeing with the kubelet\'s /metrics/resource', async (t) => {
    if (!node) return t.skip('no real node in this cluster (OVERSELL_REAL_NODE=0)');
    if (!installed) return t.skip('the install test above failed');
    const HOLD_MIB = 200;
    const BURN_LIMIT = 200;
    const probe = realNodePod('probe', BURN, { namespace: PODS, nodeName, resources: { requests: { cpu: '50m', memory: '16Mi' }, limits: { cpu: `${BURN_LIMIT}m`, memory: '64Mi' } } });
    probe.spec!.containers[0]!.name = 'burn';
    probe.spec!.containers.push(probeContainer('hold', ['hold', '-mib', String(HOLD_MIB)], { requests: { cpu: '10m', memory: `${HOLD_MIB + 64}Mi` }, limits: { memory: `${HOLD_MIB + 64}Mi` } }));
    await core().createNamespacedPod({ namespace: PODS, body: probe });
    const running = await podInPhase(PODS, 'probe', ['Running']);
    const startedAt = Date.parse(String(running.status?.startTime ?? new Date()));

    // kubectl top pods -A lists it once oversell has a windowed report of both containers.
    const row = await eventually('the probe pod in kubectl top pods -A', async () => (await top('pods', '-A')).find((r) => r[0] === PODS && r[1] === 'probe'), 90_000, 1000).catch(async (err: Error) => assert.fail(`${err.message}; the gateway's log:\n${await gatewayLog()}`));
    const allPods = await top('pods', '-A');
    console.log(`# kubectl top pods -A (${((Date.now() - startedAt) / 1000).toFixed(0)} s after the probe started):\n${allPods.map((r) => `#   ${r.join('  ')}`).join('\n')}`);
    assert.ok(allPods.some((r) => r[0] === NS && r[1]!.startsWith('oversell-agent-')), 'oversell\'s own agent pod is listed');
    assert.ok(allPods.some((r) => r[0] === NS && r[1]!.startsWith('oversell-gateway-')), 'oversell\'s own gateway pod is listed');
    assert.ok(row, 'the probe pod is listed');

    // The containers: the burner at its CFS limit, the holder at its pages. The kubelet's
    // rate covers its two readings; oversell's figure, read meanwhile, its last ~10 s.
    const burnKey = containerKey('container_cpu_usage_seconds_total', 'probe', 'burn');
    const holdKey = containerKey('container_memory_working_set_bytes', 'probe', 'hold');
    const tops: { burn: number; hold: number; burnRaw: number; holdRaw: number }[] = [];
    const [a, b] = await twoScrapes(burnKey, 15_000, async () => {
      for (let i = 0; i < 4; i++) {
        const rows = await top('pod', 'probe', '-n', PODS, '--containers');
        const raw = await metricsApi<MetricsObject>(`namespaces/${PODS}/pods/probe`);
        const c = (n: string) => raw.containers?.find((x) => x.name === n)?.usage;
        tops.push({
          burn: topMilli(rows.find((r) => r[1] === 'burn')?.[2] ?? 'NaN'),
          hold: topBytes(rows.find((r) => r[1] === 'hold')?.[3] ?? 'NaN'),
          burnRaw: cpuOf(c('burn')!),
          holdRaw: memoryOf(c('hold')!),
        });
        await sleep(4000);
      }
    });
    const kBurn = kubeletRate(a, b, burnKey).millicores;
    const kHold = kubeletSample(b, holdKey).value;
    const oBurn = mean(tops.map((x) => x.burn));
    const oHold = tops.at(-1)!.hold;
    console.log(`# container burn (CFS limit ${BURN_LIMIT}m): kubectl top ${tops.map((x) => `${x.burn}m`).join(' ')} (API ${tops.map((x) => x.burnRaw).join(' ')}m) mean ${oBurn.toFixed(0)}m; kubelet ${kBurn.toFixed(1)}m over ${((kubeletSample(b, burnKey).at - kubeletSample(a, burnKey).at) / 1000).toFixed(1)} s`);
    console.log(`# container hold (${HOLD_MIB} MiB held): kubectl top ${tops.map((x) => `${(x.hold / MI).toFixed(0)}Mi`).join(' ')} (API ${tops.map((x) => `${(x.holdRaw / MI).toFixed(2)}Mi`).join(' ')}); kubelet ${(kHold / MI).toFixed(2)}Mi`);
    // Both read the same cgroup (cpuacct.usage, memory usage - inactive_file) of a
    // container the CFS quota holds at its limit: 10 % of the limit covers a period
    // lost or gained at a window's edge (100 ms periods, 10 s and 15 s windows).
    assert.ok(Math.abs(oBurn - kBurn) <= BURN_LIMIT * 0.1, `burn: oversell ${oBurn.toFixed(0)}m vs kubelet ${kBurn.toFixed(0)}m, more than 10 % of ${BURN_LIMIT}m apart`);
    assert.ok(Math.abs(oBurn - BURN_LIMIT) <= BURN_LIMIT * 0.15, `burn: oversell ${oBurn.toFixed(0)}m, not at its ${BURN_LIMIT}m limit`);
    // The held pages do not move; kubectl top rounds to Mi: 4 MiB covers the Go runtime's own heap moving between readings.
    assert.ok(Math.abs(oHold - kHold) <= 4 * MI, `hold: oversell ${(oHold / MI).toFixed(1)}Mi vs kubelet ${(kHold / MI).toFixed(1)}Mi`);
    assert.ok(oHold >= HOLD_MIB * MI, `hold: oversell ${(oHold / MI).toFixed(1)}Mi < the ${HOLD_MIB} MiB held`);

    // The node: with summaries (the default) oversell's figure is the agent's mean
    // CPU over its send interval (--agent-send-every, 20 s), its window that
    // interval; the kubelet's is its rate between two readings. Compared: the
    // kubelet's rate over a span against the mean of oversell's figures whose
    // windows lie within it.
    const nodeSamples = new Map<string, { cpu: number; memory: number; at: number; windowMs: number }>();
    const topNodes: string[][] = [];
    let gap = { bytes: 0, how: '' };
    // Read all along, from before the kubelet's first reading to after its second.
    let polling = true;
    let reads = 0;
    /** How old the figure was when read (its timestamp has whole seconds). */
    const ages: number[] = [];
    const pollStart = Date.now();
    const poller = (async () => {
      while (polling) {
        const n = await metricsApi<MetricsObject>(`nodes/${nodeName}`).catch(() => undefined);
        if (n?.usage) {
          nodeSamples.set(n.timestamp, { cpu: cpuOf(n.usage), memory: memoryOf(n.usage), at: Date.parse(n.timestamp), windowMs: parseDuration(n.window, 'window') });
          ages.push(Date.now() - Date.parse(n.timestamp));
        }
        reads++;
        await sleep(250);
      }
    })();
    let na: Map<string, Sample>;
    let nb: Map<string, Sample>;
    try {
      // 90 s: at one figure per 20 s, at least three whole windows within the span.
      [na, nb] = await twoScrapes('node_cpu_usage_seconds_total', 90_000, async () => {
        topNodes.push(...(await top('nodes')));
      });
      gap = kernelMemoryOutsideCgroups();
    } finally {
      polling = false;
      await poller;
    }
    const kNode = kubeletRate(na, nb, 'node_cpu_usage_seconds_total');
    // The timestamp has whole seconds: a window may start up to 1 s before it seems to.
    const within = [...nodeSamples.values()].filter((s) => s.at - s.windowMs + 1000 > kNode.from && s.at <= kNode.to);
    const cpus = within.map((s) => s.cpu);
    const windows = within.map((s) => s.windowMs).sort((x, y) => x - y);
    const oNode = mean(cpus);
    const spread = stddev(cpus);
    const kMem = kubeletSample(nb, 'node_memory_working_set_bytes').value;
    const oMem = [...nodeSamples.values()].at(-1)!.memory;
    const topRow = topNodes.find((r) => r[0] === nodeName);
    console.log(`# kubectl top nodes: ${topNodes.map((r) => r.join('  ')).join(' | ')}`);
    console.log(`# node CPU: oversell mean ${oNode.toFixed(0)}m of ${cpus.length} figures within the span (of ${nodeSamples.size} distinct in ${reads} reads over ${((Date.now() - pollStart) / 1000).toFixed(0)} s; windows ${windows.join(', ')} ms; sd ${spread.toFixed(0)}m, min ${Math.min(...cpus)}m, max ${Math.max(...cpus)}m); kubelet ${kNode.millicores.toFixed(0)}m over ${((kNode.to - kNode.from) / 1000).toFixed(1)} s`);
    console.log(`# node memory: oversell ${(oMem / MI).toFixed(0)}Mi; kubelet ${(kMem / MI).toFixed(0)}Mi (${(((oMem - kMem) / kMem) * 100).toFixed(1)} %); ${gap.how}`);
    ages.sort((x, y) => x - y);
    console.log(`# node figure's age when read: median ${ages[ages.length >> 1]} ms, max ${ages.at(-1)} ms (${ages.length} reads)`);
    // A steady node's agent sends every --agent-send-every (20 s; a change at
    // once), its sample taken up to 1 s before: 21 s, plus the timestamp's lost
    // fraction of a second and a second for the read on a busy host.
    assert.ok(ages.at(-1)! <= SUMMARY_SEND_EVERY_MS + 3000, `the node's figure was ${ages.at(-1)} ms old when read`);
    // Each figure covers the agent's send interval of 1 s samples (the window served), not one sample's second.
    assert.ok(windows.length > 0 && windows.every((w) => w >= SUMMARY_SEND_EVERY_MS - 2000 && w <= SUMMARY_SEND_EVERY_MS + 2000), `windows served: ${windows.join(', ')} ms`);
    assert.ok(topRow, `kubectl top nodes lists ${nodeName}`);
    assert.ok(topMilli(topRow[1]!) > 0 && topBytes(topRow[3]!) > 0, `kubectl top nodes: ${topRow.join(' ')}`);
    // Three whole 20 s windows fit in the 90 s span; a change sent at once adds figures.
    assert.ok(cpus.length >= 3, `${cpus.length} node figures within the kubelet's span`);
    // The probe alone burns 200m: both must see at least that.
    assert.ok(oNode >= BURN_LIMIT && kNode.millicores >= BURN_LIMIT, 'the node uses at least what the probe burns');
    // The means of the same host's CPU over nearly the same span: apart by the
    // figures' sampling error (3 sd/sqrt(n)) and 10 % (what /proc/stat counts that
    // the root cgroup does not: interrupts, and the part of the span no window covers).
    const cpuTolerance = 3 * (spread / Math.sqrt(cpus.length)) + 0.1 * kNode.millicores;
    assert.ok(Math.abs(oNode - kNode.millicores) <= cpuTolerance, `node CPU: oversell ${oNode.toFixed(0)}m vs kubelet ${kNode.millicores.toFixed(0)}m, tolerance ${cpuTolerance.toFixed(0)}m`);
    // Memory: the same working set. On a cgroup v1 host the kubelet reads the root
    // memory cgroup, which leaves out the kernel's own memory (slab, page tables), and
    // so does oversell's metrics API, from the agent's root-cgroup figure (the gap
    // logged above is what /proc/meminfo's figure, the decision's, would be off by).
    // 256 MiB: the host's memory moving between the kubelet's reading (up to ~15 s
    // old) and oversell's, with other tests running.
    const memTolerance = 256 * MI;
    assert.ok(Math.abs(oMem - kMem) <= memTolerance, `node memory: oversell ${(oMem / MI).toFixed(0)}Mi vs kubelet ${(kMem / MI).toFixed(0)}Mi, tolerance ${(memTolerance / MI).toFixed(0)}Mi`);
    await core().deleteNamespacedPod({ namespace: PODS, name: 'probe', gracePeriodSeconds: 0 });
  });

  it('a HorizontalPodAutoscaler (autoscaling/v2, CPU utilization 50 %) scales a real Deployment up while its pods burn and down when they stop, from oversell\'s figures', async (t) => {
    if (!node) return t.skip('no real node in this cluster (OVERSELL_REAL_NODE=0)');
    if (!installed) return t.skip('the install test above failed');
    await apps().createNamespacedDeployment({ namespace: PODS, body: hpaDeployment() });
    await autoscaling().createNamespacedHorizontalPodAutoscaler({ namespace: PODS, body: hpa() });
    const fail = async (err: Error): Promise<never> => assert.fail(`${err.message}; the HPA: ${hpaLine(await readHpa())}\n${await kubectl('describe', 'hpa', HPA_APP, '-n', PODS).catch((e: Error) => e.message)}`);

    // Idle: the controller reads the pods' figures (ScalingActive) and keeps one replica.
    const created = Date.now();
    const idle = await eventually('the HPA reading resource metrics of the idle pod', async () => {
      const h = await readHpa();
      const m = h.status?.currentMetrics?.[0];
      return m?.resource?.current?.averageUtilization !== undefined ? h : undefined;
    }, 180_000, 1000).catch(fail);
    console.log(`# idle: ${hpaLine(idle)} (${((Date.now() - created) / 1000).toFixed(0)} s after the HPA was created)`);
    const idleMetric = idle.status!.currentMetrics![0]!;
    assert.equal(idleMetric.type, 'Resource');
    assert.equal(idleMetric.resource?.name, 'cpu');
    assert.ok(idleMetric.resource!.current!.averageUtilization! < 50, 'an idle pod is below the target');
    assert.equal(idle.status?.conditions?.find((c) => c.type === 'ScalingActive')?.status, 'True', hpaLine(idle));
    assert.equal(idle.status?.desiredReplicas, 1);

    // Burning: each pod at its 100m limit is 200 % of its 50m request: up to the maximum.
    const burnAt = Date.now();
    await setArgs(BURN);
    const up = await eventually(`the HPA at ${MAX_REPLICAS} replicas`, async () => {
      const h = await readHpa();
      return h.status?.desiredReplicas === MAX_REPLICAS ? h : undefined;
    }, 240_000, 1000).catch(fail);
    const upMs = Date.now() - burnAt;
    console.log(`# burning: ${hpaLine(up)} (${(upMs / 1000).toFixed(0)} s after the burn began)`);
    const upMetric = up.status!.currentMetrics![0]!;
    assert.equal(upMetric.type, 'Resource');
    assert.ok(upMetric.resource!.current!.averageUtilization! > 50, hpaLine(up));
    assert.equal(up.status?.conditions?.find((c) => c.type === 'ScalingActive')?.status, 'True', hpaLine(up));
    await eventually(`${MAX_REPLICAS} pods of the Deployment running`, async () => {
      const d = await apps().readNamespacedDeployment({ namespace: PODS, name: HPA_APP });
      return d.status?.readyReplicas === MAX_REPLICAS ? true : undefined;
    }, 120_000, 1000);

    // Stopped: the pods idle again; without stabilization, back to one.
    const stopAt = Date.now();
    await setArgs(IDLE);
    const down = await eventually('the HPA back at 1 replica', async () => {
      const h = await readHpa();
      return h.status?.desiredReplicas === 1 ? h : undefined;
    }, 240_000, 1000).catch(fail);
    const downMs = Date.now() - stopAt;
    console.log(`# stopped: ${hpaLine(down)} (${(downMs / 1000).toFixed(0)} s after the burn stopped)`);
    assert.equal(down.status?.conditions?.find((c) => c.type === 'ScalingActive')?.status, 'True', hpaLine(down));
    const events = await kubectl('get', 'events', '-n', PODS, '--field-selector', `involvedObject.kind=HorizontalPodAutoscaler,involvedObject.name=${HPA_APP}`, '-o', 'custom-columns=REASON:.reason,MESSAGE:.message', '--no-headers');
    console.log(`# the HPA's events:\n${events.trim().split('\n').map((l) => `#   ${l}`).join('\n')}`);
    assert.match(events, /SuccessfulRescale.*New size: 3; reason: cpu resource utilization \(percentage of request\) above target/);
    assert.match(events, /SuccessfulRescale.*New size: 1; reason: All metrics below target/);
    await autoscaling().deleteNamespacedHorizontalPodAutoscaler({ namespace: PODS, name: HPA_APP });
    await apps().deleteNamespacedDeployment({ namespace: PODS, name: HPA_APP });
  });

  it('callers: no RBAC is refused 403, oversell:aggregated-metrics-reader is allowed; the gateway\'s :4443 refuses anyone but the API server\'s proxy (401) and reviews the proxied user itself (403)', async (t) => {
    if (!node) return t.skip('no real node in this cluster (OVERSELL_REAL_NODE=0)');
    if (!installed) return t.skip('the install test above failed');
    const nobody = await serviceAccountKubeconfig('metrics-nobody');
    const reader = await serviceAccountKubeconfig('metrics-reader');
    await rbac().createClusterRoleBinding({
      body: { metadata: { name: READER_BINDING }, roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'oversell:aggregated-metrics-reader' }, subjects: [{ kind: 'ServiceAccount', name: 'metrics-reader', namespace: PODS }] },
    });
    const raw = (kubeconfig: string) => kubectlAs(kubeconfig, 'get', '--raw', '/apis/metrics.k8s.io/v1beta1/nodes');
    const refused = await raw(nobody.kubeconfig).then((out) => `allowed: ${out}`, errText);
    console.log(`# without RBAC: ${refused.trim()}`);
    assert.match(refused, /Forbidden.*cannot list resource "nodes" in API group "metrics.k8s.io"/s);
    // RBAC caches refresh within a moment of the binding.
    const allowed = await eventually('the reader allowed', async () => JSON.parse(await raw(reader.kubeconfig)) as { items: MetricsObject[] }, 30_000, 500);
    assert.ok(allowed.items.some((n) => n.metadata.name === nodeName), 'the reader lists the real node');
    // The status codes, as the API server answers them.
    const server = new URL(adminConfig().getCurrentCluster()?.server ?? '');
    const apiCa = readFileSync(join(STATE, 'pki', 'ca.crt'));
    const path = new URL('/apis/metrics.k8s.io/v1beta1/nodes', server);
    assert.equal((await httpsGet(path, { ca: apiCa }, { authorization: `Bearer ${nobody.token}` })).status, 403);
    assert.equal((await httpsGet(path, { ca: apiCa }, { authorization: `Bearer ${reader.token}` })).status, 200);

    // Straight to the gateway pod, past the API server.
    const pod = await gatewayPod();
    assert.ok(pod?.status?.podIP, 'the gateway pod has an IP');
    const gatewayCa = (await core().readNamespacedConfigMap({ namespace: NS, name: 'oversell-gateway-ca' })).data?.['ca.crt'] ?? '';
    const direct = new URL(`https://${pod.status.podIP}:4443/apis/metrics.k8s.io/v1beta1/nodes`);
    const tls = { ca: gatewayCa, servername: `oversell-gateway.${NS}.svc` };
    const asUser = (user: string) => ({ 'x-remote-user': user, 'x-remote-group': 'system:authenticated' });
    const noCert = await httpsGet(direct, tls, asUser('system:admin'));
    assert.equal(noCert.status, 401, `no client certificate, X-Remote-User system:admin: ${noCert.status} ${noCert.body}`);
    const adminCert = { ...tls, cert: readFileSync(join(STATE, 'pki', 'admin.crt')), key: readFileSync(join(STATE, 'pki', 'admin.key')) };
    const clusterCa = await httpsGet(direct, adminCert, asUser('system:admin'));
    assert.equal(clusterCa.status, 401, `the cluster CA's admin certificate (not the front-proxy CA): ${clusterCa.status} ${clusterCa.body}`);
    const token = await httpsGet(direct, tls, { authorization: `Bearer ${reader.token}` });
    assert.equal(token.status, 401, `a reader's bearer token: ${token.status} ${token.body}`);
    // With the API server's own proxy certificate: the gateway asks the API server
    // (SubjectAccessReview) about the user the headers name, not just the certificate.
    const proxy = { ...tls, cert: readFileSync(join(STATE, 'pki', 'front-proxy-client.crt')), key: readFileSync(join(STATE, 'pki', 'front-proxy-client.key')) };
    const deniedByGateway = await httpsGet(direct, proxy, asUser(`system:serviceaccount:${PODS}:metrics-nobody`));
    assert.equal(deniedByGateway.status, 403, `the proxy naming a user without RBAC: ${deniedByGateway.status} ${deniedByGateway.body}`);
    const allowedByGateway = await httpsGet(direct, proxy, asUser(`system:serviceaccount:${PODS}:metrics-reader`));
    assert.equal(allowedByGateway.status, 200, `the proxy naming the reader: ${allowedByGateway.status} ${allowedByGateway.body}`);
    console.log(`# direct to ${direct.host}: no certificate ${noCert.status}, the cluster CA's admin certificate ${clusterCa.status}, a bearer token ${token.status}; the proxy certificate naming nobody ${deniedByGateway.status} (${(JSON.parse(deniedByGateway.body) as { message?: string }).message}), naming the reader ${allowedByGateway.status}`);
  });

  it('kubectl delete -k uninstalls and leaves no APIService for metrics.k8s.io; kubectl top then says the API is not available', async (t) => {
    if (!node) return t.skip('no real node in this cluster (OVERSELL_REAL_NODE=0)');
    const started = Date.now();
    await kubectl('delete', '-k', OVERLAY, '--wait=false', '--ignore-not-found');
    await eventually('no APIService for metrics.k8s.io', async () => ((await metricsApiServices()).length === 0 ? true : undefined), 60_000, 250);
    console.log(`# APIService gone ${((Date.now() - started) / 1000).toFixed(1)} s after kubectl delete -k`);
    const topAfter = await kubectl('top', 'nodes').then((out) => `answered: ${out}`, errText);
    assert.match(topAfter, /Metrics API not available/);
    await eventually('the namespace oversell gone', () => core().readNamespace({ name: NS }).then(() => undefined, () => true), 120_000, 500);
  });
});

/** helm install of the chart on the real node (one gateway replica there), with the metrics API and `more` --set. */
const helmInstall = (...more: string[]) => helm('install', 'oversell', join(REPO, 'deploy/helm/oversell'), '-n', NS, '--create-namespace',
  '--set', 'metricsApi.enabled=true',
  '--set', 'gateway.replicas=1',
  '--set-json', `gateway.nodeSelector={"${Object.keys(realNodePlacement().nodeSelector)[0]}":"true"}`,
  '--set-json', `gateway.tolerations=${JSON.stringify(realNodePlacement().tolerations)}`,
  ...more);

describe('the metrics API on the real node, installed with helm install --set metricsApi.enabled=true', { timeout: 10 * 60_000 }, () => {
  after(async () => {
    if (!node) return;
    await helm('uninstall', 'oversell', '-n', NS, '--ignore-not-found', '--no-hooks').catch(() => {});
    // A hook that failed keeps its objects (hook-delete-policy hook-succeeded): the cluster-scoped ones outlive the namespace.
    await rbac().deleteClusterRoleBinding({ name: 'oversell-metrics-api-handover' }).catch(() => {});
    await rbac().deleteClusterRole({ name: 'oversell-metrics-api-handover' }).catch(() => {});
    await removeOurApiService().catch(() => {});
    await removeInstallLeftovers().catch(() => {});
  });

  it('helm install: the APIService, Helm\'s, becomes Available and kubectl top nodes shows the real node; helm uninstall leaves no APIService', async (t) => {
    if (!node) return t.skip('no real node in this cluster (OVERSELL_REAL_NODE=0)');
    // What the kubectl tests left if they failed halfway.
    await kubectl('delete', '-k', OVERLAY, '--wait=false', '--ignore-not-found').catch(() => {});
    await removeOurApiService();
    await removeInstallLeftovers();
    assert.deepEqual(await metricsApiServices(), [], 'no APIService for metrics.k8s.io before the install');
    const started = Date.now();
    await helmInstall();
    await waitInstalled();
    const a = await eventually('the APIService Available=True', async () => {
      const x = (await metricsApiServices()).find((y) => y.metadata.name === APISERVICE);
      return available(x)?.status === 'True' ? x : undefined;
    }, 120_000, 250).catch(explain);
    console.log(`# helm: APIService ${APISERVICE} Available ${((Date.now() - started) / 1000).toFixed(1)} s after helm install`);
    assert.equal(a.metadata.labels?.['app.kubernetes.io/managed-by'], 'Helm');
    assert.deepEqual((await metricsApiServices()).map((x) => x.metadata.name), [APISERVICE]);
    const row = await eventually('the real node in kubectl top nodes', async () => (await top('nodes')).find((r) => r[0] === nodeName), 60_000, 1000);
    console.log(`# helm: kubectl top nodes: ${row.join('  ')}`);
    assert.ok(topMilli(row[1]!) > 0 && topBytes(row[3]!) > 0);

    // The post-delete hook (give-back: nothing was saved, so it removes ours if Helm left it) must run and finish.
    const gone = Date.now();
    await helm('uninstall', 'oversell', '-n', NS, '--wait', '--timeout', '180s').catch(async (err: Error) => {
      const jobs = await kubectl('get', 'jobs,pods', '-n', NS, '-o', 'wide').catch((e: Error) => e.message);
      const events = await kubectl('get', 'events', '-n', NS, '--sort-by=.lastTimestamp').catch((e: Error) => e.message);
      assert.fail(`helm uninstall: ${errText(err)}\n${jobs}\n${events.split('\n').slice(-15).join('\n')}`);
    });
    console.log(`# helm uninstall (with its give-back hook) took ${((Date.now() - gone) / 1000).toFixed(1)} s`);
    assert.deepEqual(await metricsApiServices(), [], 'no APIService for metrics.k8s.io after helm uninstall');
  });
});

describe('helm install where metrics-server\'s APIService exists: refused, taken over with metricsApi.takeOver=true, given back on helm uninstall', { timeout: 12 * 60_000 }, () => {
  const PREVIOUS = 'oversell-metrics-api-previous';
  const current = async () => (await metricsApiServices()).find((a) => a.metadata.name === APISERVICE);

  after(async () => {
    if (!node) return;
    await helm('uninstall', 'oversell', '-n', NS, '--ignore-not-found', '--no-hooks').catch(() => {});
    await rbac().deleteClusterRoleBinding({ name: 'oversell-metrics-api-handover' }).catch(() => {});
    await rbac().deleteClusterRole({ name: 'oversell-metrics-api-handover' }).catch(() => {});
    // The stand-in first: an unavailable APIService holds a namespace's deletion (discovery fails).
    await removeStandIn().catch(() => {});
    await removeOurApiService().catch(() => {});
    await removeInstallLeftovers().catch(() => {});
  });

  it('refuses without metricsApi.takeOver and changes nothing; takes over with it (Available, kubectl top, the previous one saved); helm uninstall gives it back exactly', async (t) => {
    if (!node) return t.skip('no real node in this cluster (OVERSELL_REAL_NODE=0)');
    await helm('uninstall', 'oversell', '-n', NS, '--ignore-not-found', '--no-hooks').catch(() => {});
    await removeOurApiService();
    await removeInstallLeftovers();
    assert.deepEqual(await metricsApiServices(), [], 'no APIService for metrics.k8s.io before the stand-in');
    await objects().create(standInApiService());
    const created = await current();
    assert.ok(created, 'the stand-in exists');
    const want = standInApiService();
    assert.deepEqual(heldParts(created), heldParts(want), 'the API server holds the stand-in as sent');

    // (a) No takeOver: the chart's own refusal, before anything is created.
    const refused = await helmInstall().then((out) => `installed: ${out}`, errText);
    console.log(`# helm install without takeOver: ${refused.trim().split('\n').slice(0, 3).join(' | ')}`);
    assert.match(refused, /The APIService v1beta1\.metrics\.k8s\.io exists and is not oversell's: it sends the metrics API to the Service kube-system\/metrics-server/);
    assert.match(refused, /--set metricsApi\.takeOver=true \(the current one is saved in the ConfigMap oversell\/oversell-metrics-api-previous and given back on helm uninstall\)/);
    const after1 = await current();
    assert.equal(after1?.metadata.resourceVersion, created.metadata.resourceVersion, 'the stand-in was not written to');
    assert.deepEqual(heldParts(after1), heldParts(created));
    assert.deepEqual(await metricsApiServices().then((l) => l.map((a) => a.metadata.name)), [APISERVICE]);
    const release = await helm('status', 'oversell', '-n', NS).then((out) => `exists: ${out}`, errText);
    assert.match(release, /release: not found/, 'no Helm release after the refusal');
    const ns = await core().readNamespace({ name: NS }).then(() => true, () => false);
    assert.equal(ns, false, `the namespace ${NS} was not created`);

    // (b) takeOver: the post-install Job saves the stand-in and puts oversell's in its place.
    const started = Date.now();
    await helmInstall('--set', 'metricsApi.takeOver=true');
    const installedIn = Date.now() - started;
    const saved = await core().readNamespacedConfigMap({ namespace: NS, name: PREVIOUS });
    const savedObject = JSON.parse(saved.data?.['apiservice.json'] ?? 'null') as ApiServiceObject;
    assert.deepEqual(heldParts(savedObject), heldParts(created), `the ConfigMap ${NS}/${PREVIOUS} holds the stand-in`);
    const ours = await current();
    assert.equal(ours?.metadata.labels?.['app.kubernetes.io/part-of'], 'oversell', 'oversell\'s APIService in place');
    assert.equal(ours?.metadata.labels?.[STAND_IN_LABEL], undefined, 'none of the stand-in\'s labels');
    assert.equal(ours?.metadata.annotations?.['meta.helm.sh/release-name'], 'oversell', 'Helm\'s ownership, for the next upgrade');
    assert.deepEqual(ours?.spec.service, { name: 'oversell-gateway', namespace: NS, port: 4443 });
    assert.equal(ours?.spec.insecureSkipTLSVerify ?? false, false);
    await waitInstalled();
    const a = await eventually('oversell\'s APIService Available=True', async () => {
      const x = await current();
      return available(x)?.status === 'True' && x?.metadata.labels?.['app.kubernetes.io/part-of'] === 'oversell' ? x : undefined;
    }, 120_000, 250).catch(explain);
    const availableIn = Date.now() - started;
    console.log(`# take-over: helm install returned after ${(installedIn / 1000).toFixed(1)} s (the take-over Job done), Available ${(availableIn / 1000).toFixed(1)} s after it began; the gateway's log of it:`);
    console.log((await kubectl('logs', '-n', NS, 'deploy/oversell-gateway', '--tail=200')).split('\n').filter((l) => /apiService/.test(l)).map((l) => `#   ${l}`).join('\n'));
    // The gateway found the stand-in in place when it started, before the Job: it
    // retries the CA's injection within seconds, not the TLS keeper's minute
    // (65 s after helm install began when it did; 24-31 s for a plain install).
    assert.ok(availableIn - installedIn < 40_000, `Available ${((availableIn - installedIn) / 1000).toFixed(1)} s after the take-over Job was done`);
    assert.ok(a.spec.caBundle, 'the gateway injected its CA into the APIService it now owns');
    assert.deepEqual((await metricsApiServices()).map((x) => x.metadata.name), [APISERVICE]);
    const row = await eventually('the real node in kubectl top nodes', async () => (await top('nodes')).find((r) => r[0] === nodeName), 60_000, 1000);
    console.log(`# take-over: kubectl top nodes: ${row.join('  ')}`);
    assert.ok(topMilli(row[1]!) > 0 && topBytes(row[3]!) > 0);

    // (c) helm uninstall: the post-delete Job gives the stand-in back and forgets it.
    const gone = Date.now();
    await helm('uninstall', 'oversell', '-n', NS, '--wait', '--timeout', '180s').catch(async (err: Error) => {
      const jobs = await kubectl('get', 'jobs,pods', '-n', NS, '-o', 'wide').catch((e: Error) => e.message);
      assert.fail(`helm uninstall: ${errText(err)}\n${jobs}`);
    });
    console.log(`# give-back: helm uninstall took ${((Date.now() - gone) / 1000).toFixed(1)} s`);
    const back = await current();
    assert.deepEqual(heldParts(back), heldParts(created), 'the stand-in given back: spec, labels and annotations as created');
    assert.deepEqual((await metricsApiServices()).map((x) => x.metadata.name), [APISERVICE]);
    const left = await core().readNamespacedConfigMap({ namespace: NS, name: PREVIOUS }).then(() => 'still there', (e: { code?: number }) => e.code);
    assert.equal(left, 404, `the ConfigMap ${NS}/${PREVIOUS} deleted`);
    assert.match(await helm('status', 'oversell', '-n', NS).then((out) => `exists: ${out}`, errText), /release: not found/);
    await removeStandIn();
    await removeInstallLeftovers();
  });
});
