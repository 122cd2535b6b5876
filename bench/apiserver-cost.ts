// What oversell costs the API server and etcd, measured on the local cluster's
// real node (a real kubelet with its default nodeStatusUpdateFrequency 10 s
// and nodeStatusReportFrequency 5 min): one window without oversell (the node
// not opted in, no webhook), one with it (the gateway and the agent as host
// processes, deploy/'s webhook and default OversellPolicy, the node opted in
// and inflated). In each window, from the API server's /metrics and from etcd
// itself: the node object's writes (etcd counts them per key: its `version`),
// the stored size of each (the value etcd keeps: the API server's protobuf),
// the PATCH bodies, the admission reviews, the watch events sent out, and the
// node's Lease renewals (which oversell does not touch).
//
//   flock /tmp/oversell-e2e.lock node --import tsx bench/apiserver-cost.ts        # 360 s per window
//   BENCH_QUICK=1 flock /tmp/oversell-e2e.lock node --import tsx bench/apiserver-cost.ts   # 60 s per window
//
// Needs the local control plane running with its real node (scripts/cluster/
// cluster.sh up; this does not bring it up) and dist/ built. It leaves the node
// as it found it: opted out, oversell's annotations stripped, webhook, policy
// and namespace deleted, even when it fails.
import { readFileSync } from 'node:fs';
import { request } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { join } from 'node:path';
import yaml from 'js-yaml';
import { ANNOTATION } from '../gateway/admit/node-review.js';
import { kubeConfigConnection } from '../lib/kube-connection.js';
import { parseBytes, parseMilli } from '../lib/quantity.js';
import { ADMIN_KUBECONFIG, REPO, STATE, adminConfig, cluster, clusterAsync, core, kubeletCredentials, kubeletPatchStatus } from '../test/e2e/cluster.js';
import {
  OPT_IN, POLICY_REF, UNAUTHENTICATED_AGENTS, customObjects, deleteNamespaceAndWait, eventually, installPolicyCrd, installWebhook, removeWebhook, startGatewayProcess,
  upsertPolicy, webhookFromDeploy, type GatewayProc,
} from '../test/e2e/fixtures.js';
import { run, type Proc } from '../test/e2e/processes.js';
import { findRealNode, idlePodFor, optOutNode, patchNodeMetadata, podInPhase, recordNode, restartKubelet, type NodeRecord } from '../test/e2e/real-node.js';
import { log } from './processes.js';
import { round, runIfMain, type BenchResult } from './result.js';

const NS = 'oversell-bench-apiserver';
const WEBHOOK = 'oversell-bench-apiserver';
const POLICY = 'bench-apiserver';
/** Long enough to hold one of the kubelet's 5-min unchanged reports without oversell. */
const FULL_WINDOW_S = 360;
const QUICK_WINDOW_S = 60;
/** The API server compacts etcd every 5 min by default (--etcd-compaction-interval): old revisions are kept that long. */
const COMPACTION_S = 300;
/** Idle pods of raw/6.5 memory each: about half the node requested, so the default policy has something to oversell. */
const IDLE_PODS = 3;
/** After the window's first write: the kubelet's own writes settle into their rhythm. */
const SETTLE_MS = 15_000;

type Metrics = Map<string, number>;

/** A GET on the API server as the admin, its body as sent (no client's re-encoding). */
async function getRaw(path: string): Promise<string> {
  const conn = kubeConfigConnection(adminConfig());
  const options = await conn.options();
  return new Promise((resolve, reject) => {
    const req = httpsRequest({ ...options, host: conn.server.hostname, port: conn.server.port, path, method: 'GET', headers: { ...options.headers, accept: 'application/json, text/plain' } }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => { text += c; });
      res.on('end', () => (res.statusCode === 200 ? resolve(text) : reject(new Error(`GET ${path}: ${res.statusCode} ${text.slice(0, 200)}`))));
    });
    req.on('error', reject);
    req.end();
  });
}

/** The API server's /metrics, as series text (name{labels}) to value. */
async function apiserverMetrics(): Promise<Metrics> {
  const text = await getRaw('/metrics');
  const m: Metrics = new Map();
  for (const line of text.split('\n')) {
    if (!line || line.startsWith('#')) continue;
    const at = line.lastIndexOf(' ');
    m.set(line.slice(0, at), Number(line.slice(at + 1)));
  }
  return m;
}

/** The sum of the series named `name` whose labels include every `labels` pair. */
function sumOf(m: Metrics, name: string, labels: Record<string, string>): number {
  const want = Object.entries(labels).map(([k, v]) => `${k}="${v}"`);
  let sum = 0;
  for (const [series, value] of m) {
    if (!series.startsWith(`${name}{`)) continue;
    if (want.every((w) => series.includes(w))) sum += value;
  }
  return sum;
}

/** etcd's client URL from the cluster's ports (plain HTTP on loopback, as cluster.sh runs it). */
function etcdUrl(): URL {
  const port = /^ETCD_PORT=(\d+)/m.exec(readFileSync(join(STATE, 'ports.env'), 'utf8'))?.[1];
  if (!port) throw new Error(`no ETCD_PORT in ${join(STATE, 'ports.env')}: is the local control plane up (scripts/cluster/cluster.sh status)?`);
  return new URL(`http://127.0.0.1:${port}`);
}

/** etcd's own counters: bytes appended to its WAL, bytes of values put (every key, not only the node's). */
function etcdTotals(url: URL): Promise<{ walBytes: number; putBytes: number }> {
  return new Promise((resolve, reject) => {
    request({ host: url.hostname, port: url.port, path: '/metrics' }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => { text += c; });
      res.on('end', () => {
        const value = (name: string) => Number(new RegExp(`^${name} (\\S+)$`, 'm').exec(text)?.[1] ?? Number.NaN);
        resolve({ walBytes: value('etcd_disk_wal_write_bytes_total'), putBytes: value('etcd_debugging_mvcc_total_put_size_in_bytes') });
      });
    }).on('error', (err) => reject(new Error(`etcd metrics at ${url.href}: ${err.message}`))).end();
  });
}

interface EtcdKey {
  /** Writes to the key since it was created: etcd counts each put. */
  version: number;
  modRevision: number;
  /** The stored value's bytes (the API server's protobuf with its 4-byte prefix; no encryption at rest here). */
  size: number;
}

/** One key as etcd keeps it, through etcd's JSON gateway (POST /v3/kv/range). */
function etcdKey(url: URL, key: string): Promise<EtcdKey> {
  const body = JSON.stringify({ key: Buffer.from(key).toString('base64') });
  return new Promise((resolve, reject) => {
    const req = request({ host: url.hostname, port: url.port, path: '/v3/kv/range', method: 'POST', headers: { 'content-type': 'application/json' } }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => { text += c; });
      res.on('end', () => {
        const kv = (JSON.parse(text) as { kvs?: { version: string; mod_revision: string; value: string }[] }).kvs?.[0];
        if (!kv) return reject(new Error(`etcd has no key ${key} (answer: ${text.slice(0, 200)})`));
        resolve({ version: Number(kv.version), modRevision: Number(kv.mod_revision), size: Buffer.from(kv.value, 'base64').length });
      });
    });
    req.on('error', (err) => reject(new Error(`etcd at ${url.href}: ${err.message}`)));
    req.end(body);
  });
}

/** The node as the API server answers a JSON GET: its bytes, not a client's re-encoding. */
async function jsonSize(name: string): Promise<number> {
  return Buffer.byteLength(await getRaw(`/api/v1/nodes/${name}`));
}

interface Window {
  label: string;
  seconds: number;
  /** etcd puts of the node's key, and of its Lease's. */
  nodeWrites: number;
  leaseWrites: number;
  /** Of the node's writes the watch saw: the kubelet's (its Ready heartbeat moved) and everyone else's (the gateway's status writer). */
  kubeletWrites: number;
  otherWrites: number;
  /** PATCH nodes/status as the API server counted them, and how many of them were conflicts (409). */
  statusPatches: number;
  conflicts: number;
  /** Mean bytes of a PATCH body on nodes (status and metadata alike). */
  patchBodyBytes: number;
  /** Mean stored bytes of the node per write (etcd's value), and of the Lease. */
  storedBytes: number;
  leaseBytes: number;
  /** The node's JSON as the API server serves it, at the window's end. */
  jsonBytes: number;
  /** Admission reviews of nodes.oversell.io the API server sent. */
  reviews: number;
  /** Watch events on nodes the API server sent, and their bytes. */
  watchEvents: number;
  watchBytes: number;
  /** etcd as a whole (every key: other components' Leases, events...): WAL bytes appended, value bytes put. */
  etcdWalBytes: number;
  etcdPutBytes: number;
}

/** Counts, over `seconds`, what the node costs the API server and etcd as it is now. */
async function measure(label: string, nodeName: string, seconds: number): Promise<Window> {
  const etcd = etcdUrl();
  const nodeKey = `/registry/minions/${nodeName}`;
  const leaseKey = `/registry/leases/kube-node-lease/${nodeName}`;
  const record: NodeRecord = await recordNode(nodeName);
  const sizes: number[] = [];
  const leaseSizes: number[] = [];
  try {
    const m0 = await apiserverMetrics();
    const n0 = await etcdKey(etcd, nodeKey);
    const l0 = await etcdKey(etcd, leaseKey);
    const e0 = await etcdTotals(etcd);
    const started = Date.now();
    log(`${label}: measuring for ${seconds} s`);
    // Each stored revision's size, sampled: two writes inside one poll share a sample.
    let lastNode = n0.modRevision;
    let lastLease = l0.modRevision;
    while (Date.now() - started < seconds * 1000) {
      await new Promise((r) => setTimeout(r, 500));
      const n = await etcdKey(etcd, nodeKey);
      if (n.modRevision !== lastNode) { sizes.push(n.size); lastNode = n.modRevision; }
      const l = await etcdKey(etcd, leaseKey);
      if (l.modRevision !== lastLease) { leaseSizes.push(l.size); lastLease = l.modRevision; }
    }
    const elapsed = (Date.now() - started) / 1000;
    const m1 = await apiserverMetrics();
    const n1 = await etcdKey(etcd, nodeKey);
    const l1 = await etcdKey(etcd, leaseKey);
    const e1 = await etcdTotals(etcd);
    const delta = (name: string, labels: Record<string, string>) => sumOf(m1, name, labels) - sumOf(m0, name, labels);
    const status = { resource: 'nodes', subresource: 'status', verb: 'PATCH' };
    const bodies = { group: '', resource: 'nodes', verb: 'patch' };
    const seen = record.writes.filter((w) => w.at >= started);
    const kubelet = record.kubeletWrites().filter((w) => w.at >= started).length;
    const bodyCount = delta('apiserver_request_body_size_bytes_count', bodies);
    const mean = (xs: number[], fallback: number) => (xs.length ? xs.reduce((a, b) => a + b, 0) / xs.length : fallback);
    return {
      label,
      seconds: elapsed,
      nodeWrites: n1.version - n0.version,
      leaseWrites: l1.version - l0.version,
      kubeletWrites: kubelet,
      otherWrites: seen.length - kubelet,
      statusPatches: delta('apiserver_request_total', status),
      conflicts: delta('apiserver_request_total', { ...status, code: '409' }),
      patchBodyBytes: bodyCount ? delta('apiserver_request_body_size_bytes_sum', bodies) / bodyCount : 0,
      storedBytes: mean(sizes, n1.size),
      leaseBytes: mean(leaseSizes, l1.size),
      jsonBytes: await jsonSize(nodeName),
      reviews: delta('apiserver_admission_webhook_request_total', { name: 'nodes.oversell.io' }),
      watchEvents: delta('apiserver_watch_events_total', { group: '', resource: 'nodes' }),
      watchBytes: delta('apiserver_watch_events_sizes_sum', { group: '', resource: 'nodes' }),
      etcdWalBytes: e1.walBytes - e0.walBytes,
      etcdPutBytes: e1.putBytes - e0.putBytes,
    };
  } finally {
    record.stop();
  }
}

/** Webhook configurations that would act on node status writes: none may, for the window without oversell. */
async function nodeWebhooks(): Promise<string[]> {
  const list = JSON.parse(await clusterAsync('kubectl', 'get', 'mutatingwebhookconfigurations', '-o', 'json')) as { items: { metadata: { name: string }; webhooks?: { rules?: { resources?: string[] }[] }[] }[] };
  return list.items.filter((c) => c.webhooks?.some((w) => w.rules?.some((r) => r.resources?.some((x) => x === 'nodes/status' || x === 'nodes' || x === '*')))).map((c) => c.metadata.name);
}

const inflated = (node: { status?: { allocatable?: Record<string, string> } }, raw: Record<string, string>) =>
  parseMilli(node.status?.allocatable?.cpu ?? '0', 'cpu') > parseMilli(raw.cpu ?? '0', 'cpu')
  || parseBytes(node.status?.allocatable?.memory ?? '0', 'memory') > parseBytes(raw.memory ?? '0', 'memory');

async function cleanUp(nodeName: string, raw: Record<string, string> | undefined, gateway?: GatewayProc, agent?: Proc): Promise<void> {
  const step = async (what: string, f: () => Promise<unknown>) => {
    try {
      await f();
    } catch (err) {
      log(`cleanup: ${what}: ${(err as Error).message}`);
    }
  };
  await step('webhook', () => removeWebhook(WEBHOOK));
  await step('policy', () => customObjects().deleteClusterCustomObject({ ...POLICY_REF, name: POLICY }).catch((e: { code?: number }) => { if (e.code !== 404) throw e; }));
  await step('agent', async () => agent?.kill());
  await step('gateway', async () => gateway?.kill());
  await step('node opt-out', () => optOutNode(nodeName));
  await step('namespace', () => deleteNamespaceAndWait(NS, 120_000));
  // The kubelet's next write (at once after a restart) puts raw allocatable back.
  await step('raw allocatable', async () => {
    await restartKubelet();
    await eventually('the node back to raw allocatable, no oversell annotation', async () => {
      const n = await core().readNode({ name: nodeName });
      const annotated = Object.values(ANNOTATION).some((k) => n.metadata?.annotations?.[k] !== undefined);
      return !annotated && !(raw && inflated(n, raw)) ? true : undefined;
    }, 60_000, 1_000);
  });
}

interface Side {
  writesPerS: number;
  apiBytesPerS: number;
  etcdBytesPerS: number;
  watchBytesPerS: number;
  reviewsPerS: number;
  leaseWritesPerS: number;
  leaseBytesPerS: number;
}

/**
 * Per node per second. Bytes to the API server: the PATCH body in and the
 * object back (its stored size: the kubelet talks protobuf); with oversell, plus
 * the admission review out and back (estimated: the object and the old object
 * in JSON, AdmissionReview v1 carries both). etcd: the whole object per write.
 */
function perNode(w: Window): Side {
  const writes = w.nodeWrites / w.seconds;
  const reviews = w.reviews / w.seconds;
  return {
    writesPerS: writes,
    apiBytesPerS: writes * (w.patchBodyBytes + w.storedBytes) + reviews * 2 * w.jsonBytes,
    etcdBytesPerS: writes * w.storedBytes,
    watchBytesPerS: w.watchBytes / w.seconds,
    reviewsPerS: reviews,
    leaseWritesPerS: w.leaseWrites / w.seconds,
    leaseBytesPerS: (w.leaseWrites / w.seconds) * w.leaseBytes,
  };
}

export async function apiserverCost(o: { quick?: boolean } = {}): Promise<BenchResult> {
  const seconds = Number(process.env.APISERVER_COST_WINDOW_S) || (o.quick ? QUICK_WINDOW_S : FULL_WINDOW_S);
  try {
    cluster('status');
  } catch {
    throw new Error('the local control plane is not running: bring it up with its real node (OVERSELL_REAL_NODE=1 bash scripts/cluster/cluster.sh up)');
  }
  const node = await findRealNode();
  if (!node) throw new Error('the local cluster runs without its real node (OVERSELL_REAL_NODE=0): this measures a real kubelet');
  const nodeName = node.metadata!.name!;
  const others = await nodeWebhooks();
  if (others.length) throw new Error(`webhook configurations act on nodes (${others.join(', ')}): the window without oversell needs none; a test left them? (kubectl delete mutatingwebhookconfiguration ...)`);
  const pods = (await core().listPodForAllNamespaces({ fieldSelector: `spec.nodeName=${nodeName}` })).items.filter((p) => !['Succeeded', 'Failed'].includes(p.status?.phase ?? ''));
  if (pods.length) log(`the real node runs ${pods.length} other pod(s): ${pods.map((p) => `${p.metadata?.namespace}/${p.metadata?.name}`).join(', ')}`);
  let gateway: GatewayProc | undefined;
  let agent: Proc | undefined;
  let raw: Record<string, string> | undefined;
  try {
    // Pods that request memory, in both windows: with none bound the policy grants raw (nothing to oversell).
    await core().createNamespace({ body: { metadata: { name: NS } } }).catch((e: { code?: number }) => { if (e.code !== 409) throw e; });
    await core().createNamespacedServiceAccount({ namespace: NS, body: { metadata: { name: 'default' } } }).catch(() => {});
    const rawMemory = parseBytes(node.status?.allocatable?.memory ?? '0', 'allocatable memory');
    for (let i = 1; i <= IDLE_PODS; i++) await core().createNamespacedPod({ namespace: NS, body: idlePodFor(rawMemory, `idle-${i}`, { namespace: NS, nodeName }) });
    for (let i = 1; i <= IDLE_PODS; i++) await podInPhase(NS, `idle-${i}`, ['Running']);

    // Without: opted out, raw, its status written only on change or every 5 min.
    await optOutNode(nodeName);
    await restartKubelet();
    await new Promise((r) => setTimeout(r, SETTLE_MS));
    raw = (await core().readNode({ name: nodeName })).status?.allocatable ?? {};
    if (inflated({ status: { allocatable: raw } }, node.status?.capacity ?? {})) throw new Error(`allocatable ${JSON.stringify(raw)} above capacity with no webhook: something else writes this node`);
    const without = await measure('without oversell', nodeName, seconds);

    // With: as deployed (deploy/'s webhook and default policy, the gateway leading and writing status), host processes.
    await installPolicyCrd();
    const spec = (yaml.load(readFileSync(join(REPO, 'deploy/base/policy-default.yaml'), 'utf8')) as { spec: Record<string, unknown> }).spec;
    await upsertPolicy(POLICY, spec);
    gateway = await startGatewayProcess(undefined, undefined, ['--policies', 'crd', '--kubeconfig', ADMIN_KUBECONFIG, '--lease-namespace', NS, ...UNAUTHENTICATED_AGENTS]);
    await gateway.waitFor(/leading/, 60_000);
    await installWebhook(webhookFromDeploy(gateway, WEBHOOK));
    agent = run('agent-apiserver-cost', 'agent', ['--node-name', nodeName, '--gateway', `127.0.0.1:${gateway.ports.agent}`, '--metrics-address', '127.0.0.1:0', '--kubeconfig', ADMIN_KUBECONFIG]);
    await agent.waitFor(/connected to gateway/, 60_000);
    await patchNodeMetadata(nodeName, { labels: OPT_IN });
    // A dry-run write as the kubelet shows when the webhook inflates (after the policy's startup grace and a full window).
    const creds = kubeletCredentials(nodeName);
    let last = 'no answer';
    await eventually('a dry-run kubelet write inflated by the webhook', async () => {
      const res = await kubeletPatchStatus(creds, nodeName, { allocatable: raw }, { dryRun: true });
      last = `${res.status} allocatable ${JSON.stringify(res.body.status?.allocatable)}, reason ${res.body.metadata?.annotations?.[ANNOTATION.reason] ?? '(none)'}`;
      return res.status === 200 && inflated(res.body, raw!) ? true : undefined;
    }, 180_000, 1_000).catch((err: Error) => { throw new Error(`${err.message}; last answer: ${last}`); });
    // An unchanged status waits 5 min for the kubelet's next write; a restart writes at once.
    await restartKubelet();
    await eventually('the kubelet\'s write stored inflated', async () => inflated(await core().readNode({ name: nodeName }), raw!) ? true : undefined, 60_000, 500);
    await new Promise((r) => setTimeout(r, SETTLE_MS));
    const withIt = await measure('with oversell', nodeName, seconds);
    const stored = await core().readNode({ name: nodeName });
    if (!inflated(stored, raw)) throw new Error(`the node was not inflated at the window's end (allocatable ${JSON.stringify(stored.status?.allocatable)}): the window with oversell measured nothing`);

    const a = perNode(without);
    const b = perNode(withIt);
    const k = (v: number) => round(v * 1000, 1);
    const figures: Record<string, number | string> = {
      window_s: round(without.seconds, 0),
      pods_on_node: pods.length + IDLE_PODS,
      without_node_writes: without.nodeWrites,
      with_node_writes: withIt.nodeWrites,
      with_kubelet_writes: withIt.kubeletWrites,
      with_gateway_writes: withIt.otherWrites,
      without_status_patches: without.statusPatches,
      with_status_patches: withIt.statusPatches,
      with_conflicts: withIt.conflicts,
      without_patch_body_bytes: round(without.patchBodyBytes, 0),
      with_patch_body_bytes: round(withIt.patchBodyBytes, 0),
      without_stored_bytes: round(without.storedBytes, 0),
      with_stored_bytes: round(withIt.storedBytes, 0),
      without_json_bytes: without.jsonBytes,
      with_json_bytes: withIt.jsonBytes,
      with_reviews: withIt.reviews,
      without_watch_events_per_write: without.nodeWrites ? round(without.watchEvents / without.nodeWrites, 1) : 0,
      with_watch_events_per_write: withIt.nodeWrites ? round(withIt.watchEvents / withIt.nodeWrites, 1) : 0,
      lease_writes_per_node_s: round((without.leaseWrites + withIt.leaseWrites) / (without.seconds + withIt.seconds), 3),
      lease_stored_bytes: round(withIt.leaseBytes, 0),
      without_writes_per_1000_nodes_s: k(a.writesPerS),
      with_writes_per_1000_nodes_s: k(b.writesPerS),
      added_writes_per_1000_nodes_s: k(b.writesPerS - a.writesPerS),
      without_api_kib_per_1000_nodes_s: round(k(a.apiBytesPerS) / 1024, 1),
      with_api_kib_per_1000_nodes_s: round(k(b.apiBytesPerS) / 1024, 1),
      added_api_kib_per_1000_nodes_s: round(k(b.apiBytesPerS - a.apiBytesPerS) / 1024, 1),
      without_etcd_kib_per_1000_nodes_s: round(k(a.etcdBytesPerS) / 1024, 1),
      with_etcd_kib_per_1000_nodes_s: round(k(b.etcdBytesPerS) / 1024, 1),
      added_etcd_kib_per_1000_nodes_s: round(k(b.etcdBytesPerS - a.etcdBytesPerS) / 1024, 1),
      added_etcd_mib_per_1000_nodes_per_compaction: round(((b.etcdBytesPerS - a.etcdBytesPerS) * 1000 * COMPACTION_S) / 1024 ** 2, 0),
      etcd_wal_kib_per_s_without: round(without.etcdWalBytes / without.seconds / 1024, 2),
      etcd_wal_kib_per_s_with: round(withIt.etcdWalBytes / withIt.seconds / 1024, 2),
      etcd_put_kib_per_s_without: round(without.etcdPutBytes / without.seconds / 1024, 2),
      etcd_put_kib_per_s_with: round(withIt.etcdPutBytes / withIt.seconds / 1024, 2),
      with_watch_bytes_per_event: withIt.watchEvents ? round(withIt.watchBytes / withIt.watchEvents, 0) : 0,
      with_reviews_per_1000_nodes_s: k(b.reviewsPerS),
      without_watch_kib_per_1000_nodes_s: round(k(a.watchBytesPerS) / 1024, 1),
      with_watch_kib_per_1000_nodes_s: round(k(b.watchBytesPerS) / 1024, 1),
      added_watch_kib_per_1000_nodes_s: round(k(b.watchBytesPerS - a.watchBytesPerS) / 1024, 1),
      lease_writes_per_1000_nodes_s: k((a.leaseWritesPerS + b.leaseWritesPerS) / 2),
      lease_etcd_kib_per_1000_nodes_s: round(k((a.leaseBytesPerS + b.leaseBytesPerS) / 2) / 1024, 1),
    };
    return {
      name: 'apiserver-cost',
      summary: `per 1,000 nodes oversell adds ${figures.added_writes_per_1000_nodes_s} node writes/s (${figures.without_writes_per_1000_nodes_s} -> ${figures.with_writes_per_1000_nodes_s}), ${figures.added_api_kib_per_1000_nodes_s} KiB/s to the API server, ${figures.added_etcd_kib_per_1000_nodes_s} KiB/s to etcd (${figures.added_etcd_mib_per_1000_nodes_per_compaction} MiB of old revisions between two compactions), ${figures.with_reviews_per_1000_nodes_s} reviews/s; Lease renewals ${figures.lease_writes_per_1000_nodes_s}/s either way`,
      figures,
      targets: [],
      notes: [
        `real node ${nodeName} (kubelet ${node.status?.nodeInfo?.kubeletVersion}, ${pods.length + IDLE_PODS} pods), windows of ${round(without.seconds, 0)} s and ${round(withIt.seconds, 0)} s`,
        `without: ${JSON.stringify(without)}`,
        `with: ${JSON.stringify(withIt)}`,
        'writes and stored sizes: etcd (the key\'s version and value); PATCH bodies, reviews, watch events: the API server\'s /metrics; review bytes estimated as twice the node\'s JSON',
      ],
    };
  } finally {
    await cleanUp(nodeName, raw, gateway, agent);
  }
}

runIfMain(import.meta.url, apiserverCost, (r) => {
  console.log(r.summary);
  for (const [k, v] of Object.entries(r.figures)) console.log(`  ${k}: ${v}`);
  for (const n of r.notes ?? []) console.log(`  ${n}`);
});
