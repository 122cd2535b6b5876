// The sharded gateway as users deploy it (docs/install.md: OVERSELL_SHARD_COPIES=2
// and three replicas), on the local cluster's real node: the image built from
// our Dockerfile, the replicas finding each other in the agents' Service's
// real EndpointSlices, the agent DaemonSet pod narrowing its streams to its
// node's two owners, which report its decision inputs to every replica, and
// the replica that does not own the node deciding a review from their report
// and answering a get, a list and a watch with its owners' data over the pod
// network.
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { request } from 'node:https';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { DiscoveryV1Api, type V1Node, type V1Pod } from '@kubernetes/client-node';
import type { NodeEvent__Output } from '../../proto/gen/oversell/v1/NodeEvent.js';
import type { NodeSummaries__Output } from '../../proto/gen/oversell/v1/NodeSummaries.js';
import { ANNOTATION } from '../../gateway/admit/node-review.js';
import { REPO, adminConfig, clusterAsync, core } from './cluster.js';
import { OPT_IN, eventually, removeInstallLeftovers } from './fixtures.js';
import { OVERSELL_IMAGE_TAR, applyOverlay, assertRawAfterUninstall, removeOverlay, findRealNode, getNodeStatus, importImage, kubeletWritesAfter, patchNodeMetadata, queryAsViewer, recordNode, restartKubelet } from './real-node.js';

const NS = 'oversell';
const OVERLAY = join(REPO, 'test/e2e/real-node-sharded');
const REPLICAS = 3;

let node: V1Node | undefined;
let nodeName = '';
let rawMemoryText = '';

const kubectl = (...args: string[]) => clusterAsync('kubectl', ...args);

/** The gateway pods, Ready, by pod IP. */
async function readyGateways(): Promise<V1Pod[]> {
  const pods = (await core().listNamespacedPod({ namespace: NS, labelSelector: 'app.kubernetes.io/name=oversell-gateway' })).items;
  return pods.filter((p) => !p.metadata?.deletionTimestamp && p.status?.podIP && p.status.conditions?.some((c) => c.type === 'Ready' && c.status === 'True'));
}

/** One number from a replica's /metrics (the metrics port is plain HTTP, reached from this host over the node's bridge). */
async function metricOf(pod: V1Pod, name: string, labels = ''): Promise<number> {
  const text = await (await fetch(`http://${pod.status!.podIP}:9090/metrics`)).text();
  const line = text.split('\n').find((l) => l.startsWith(`${name}${labels} `));
  return line ? Number(line.split(' ')[1]) : 0;
}

/** A reason decided from an agent's samples ends with the window they filled (policy.ts); with no data there is no patch at all. */
const WINDOW = /\d+ samples in the \d+s window$/;

/** The reason annotation a review's patch writes, if it was decided from the agent's samples. */
function reasonOf(patch: string | undefined): string | undefined {
  if (!patch) return undefined;
  const ops = JSON.parse(Buffer.from(patch, 'base64').toString()) as Array<{ path: string; value?: string }>;
  const reason = ops.find((op) => op.path === `/metadata/annotations/${ANNOTATION.reason.replace('/', '~1')}`)?.value;
  return reason && WINDOW.test(reason) ? reason : undefined;
}

/** POSTs an AdmissionReview to one replica's webhook, verifying its serving certificate against the published CA. */
function postReview(pod: V1Pod, ca: string, body: object): Promise<{ status: number; json: { response?: { allowed?: boolean; patch?: string } } }> {
  const text = JSON.stringify(body);
  return new Promise((resolve, reject) => {
    const req = request({ host: pod.status!.podIP, port: 8443, path: '/mutate/nodes', method: 'POST', ca, servername: `oversell-gateway.${NS}.svc`, headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) } }, (res) => {
      let answer = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => (answer += c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, json: JSON.parse(answer || '{}') }));
    });
    req.on('error', reject);
    req.end(text);
  });
}

/** The kubelet's dry-run status write of the real node as the API server sends it to the webhook. */
function kubeletReview(stored: V1Node): object {
  // What the kubelet computes: the raw allocatable, read before the install.
  const object = { ...stored, status: { ...stored.status, allocatable: node!.status?.allocatable } };
  return {
    apiVersion: 'admission.k8s.io/v1',
    kind: 'AdmissionReview',
    request: {
      uid: randomUUID(), kind: { group: '', version: 'v1', kind: 'Node' }, resource: { group: '', version: 'v1', resource: 'nodes' }, subResource: 'status',
      name: nodeName, operation: 'UPDATE', userInfo: { username: `system:node:${nodeName}`, groups: ['system:nodes', 'system:authenticated'] },
      object, oldObject: stored, dryRun: true,
    },
  };
}

before(async () => {
  node = await findRealNode();
  if (!node) return;
  nodeName = node.metadata!.name!;
  rawMemoryText = node.status?.allocatable?.memory ?? '';
  await importImage(OVERSELL_IMAGE_TAR);
  await removeInstallLeftovers();
});

after(async () => {
  if (node) await removeOverlay(OVERLAY, nodeName);
});

describe('three sharded gateway replicas on the real node', { timeout: 10 * 60_000 }, () => {
  it('the replica without the node\'s stream decides a review from its owners\' report and answers a get, a list and a watch with their data; uninstalled, raw again', async (t) => {
    if (!node) return t.skip('no real node in this cluster (OVERSELL_REAL_NODE=0)');
    await applyOverlay(OVERLAY);
    await patchNodeMetadata(nodeName, { labels: OPT_IN });
    const gateways = await eventually(`${REPLICAS} gateway replicas Ready`, async () => {
      const ready = await readyGateways();
      return ready.length === REPLICAS ? ready : undefined;
    }, 240_000, 1000);
    const discovery = adminConfig().makeApiClient(DiscoveryV1Api);
    await eventually('the agents\' Service lists the three replicas', async () => {
      const slices = (await discovery.listNamespacedEndpointSlice({ namespace: NS, labelSelector: 'kubernetes.io/service-name=oversell-gateway-agents' })).items;
      const ready = slices.flatMap((s) => s.endpoints ?? []).filter((e) => e.conditions?.ready);
      return ready.length === REPLICAS ? true : undefined;
    }, 60_000, 500);

    // The agent narrows to its node's two owners: two replicas hold its stream, one does not.
    const holding = await eventually('the agent streaming to two replicas only', async () => {
      const counts = await Promise.all(gateways.map((gw) => metricOf(gw, 'oversell_agents_connected')));
      return counts.filter((c) => c === 1).length === 2 && counts.filter((c) => c === 0).length === 1 ? counts : undefined;
    }, 90_000, 1000).catch(async (err: Error) => {
      const counts = await Promise.all(gateways.map((gw) => metricOf(gw, 'oversell_agents_connected').catch(() => -1)));
      assert.fail(`${err.message}: agents connected per replica ${counts}`);
    });
    const outsider = gateways[holding.indexOf(0)]!;
    console.log(`# agents connected per replica: ${holding.join(', ')}; the outsider is ${outsider.metadata?.name} (${outsider.status?.podIP})`);

    // A review sent to the outsider is decided there from the agent's samples, which only the owners hold, as they reported them.
    const ca = (await core().readNamespacedConfigMap({ namespace: NS, name: 'oversell-gateway-ca' })).data?.['ca.crt'] ?? '';
    const patchedBefore = await metricOf(outsider, 'oversell_webhook_request_duration_seconds_count', '{outcome="patched"}');
    let last = 'no answer';
    const reason = await eventually('the outsider\'s answer decided from the agent\'s samples', async () => {
      const a = await postReview(outsider, ca, kubeletReview(await core().readNode({ name: nodeName })));
      last = `${a.status} ${JSON.stringify(a.json.response)}`;
      return a.status === 200 ? reasonOf(a.json.response?.patch) : undefined;
    }, 60_000, 1000).catch(async (err: Error) => {
      const logs = await kubectl('logs', '-n', NS, outsider.metadata!.name!, '--tail=30').catch((e: Error) => e.message);
      assert.fail(`${err.message}; its last answer: ${last}; the outsider's log:\n${logs}`);
    });
    assert.ok(await metricOf(outsider, 'oversell_webhook_request_duration_seconds_count', '{outcome="patched"}') > patchedBefore, 'the outsider patched it itself');
    for (const gw of gateways) assert.equal(await metricOf(gw, 'oversell_peer_inputs_total', '{result="refused"}'), 0, `no report refused at ${gw.metadata?.name}`);
    console.log(`# a review at the outsider, decided there from its owners' report: ${reason}`);

    // The query API at the outsider: the node with its agent's sample, in a get, a list and a watch.
    const conn = await queryAsViewer(NS, NS, `${outsider.status!.podIP}:50051`);
    try {
      const got = await eventually('GetNode at the outsider with a sample', async () => {
        const s = await getNodeStatus(conn, nodeName).catch(() => undefined);
        return s?.latest ? s : undefined;
      }, 30_000, 500);
      assert.ok((got.latest?.memoryWorkingSetBytes ?? 0) > 0);
      const summaries = await new Promise<NodeSummaries__Output>((resolve, reject) => conn.client.ListNodeSummaries({}, conn.metadata(), (err, v) => (err || !v ? reject(err) : resolve(v))));
      const row = summaries.name.indexOf(nodeName);
      assert.ok(row >= 0 && summaries.hasSample[row], 'ListNodeSummaries at the outsider shows the node\'s sample');
      const events: NodeEvent__Output[] = [];
      const watch = conn.client.WatchNodes({}, conn.metadata());
      watch.on('data', (e: NodeEvent__Output) => events.push(e));
      watch.on('error', () => {});
      try {
        await eventually('the watch at the outsider synced', () => (events.some((e) => e.type === 'SYNCED') ? true : undefined), 30_000, 200);
        const shown = events.filter((e) => e.node?.name === nodeName && e.type === 'SNAPSHOT');
        assert.equal(shown.length, 1, 'the node once in the snapshot');
        assert.ok(shown[0]!.node?.latest, 'with its first owner\'s sample');
      } finally {
        watch.cancel();
      }
    } finally {
      conn.close();
    }

    // Through the Service as the kubelet writes (a restart makes it write at once; unchanged, it writes every 5 min):
    // decided from the samples, whichever replica the API server reaches.
    const record = await recordNode(nodeName);
    try {
      const restartedAt = Date.now();
      await restartKubelet();
      const [write] = await kubeletWritesAfter(record, restartedAt, 1, 60_000);
      const reason = write!.node.metadata?.annotations?.[ANNOTATION.reason] ?? '';
      assert.match(reason, WINDOW, 'the kubelet\'s write was decided from the agent\'s samples');
      console.log(`# the kubelet's write through the Service: cpu ${write!.node.status?.allocatable?.cpu}, memory ${write!.node.status?.allocatable?.memory} (raw ${node.status?.allocatable?.cpu}, ${rawMemoryText})`);
    } finally {
      record.stop();
    }

    const uninstall = await recordNode(nodeName);
    try {
      const gone = Date.now();
      await kubectl('delete', '-k', OVERLAY, '--wait=false', '--ignore-not-found');
      await assertRawAfterUninstall(uninstall, gone, 'kubectl delete -k (sharded)', rawMemoryText);
    } finally {
      uninstall.stop();
    }
  });
});
