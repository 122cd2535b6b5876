// The local cluster's real node (scripts/cluster/realnode.sh) as seen from a
// test: pods placed on it, the node's writes as they happen, its kubelet
// restarted, images imported into its containerd.
import { closeSync, existsSync, mkdtempSync, openSync, readFileSync, readSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PatchStrategy, RbacAuthorizationV1Api, Watch, type V1Container, type V1Node, type V1Pod, type V1PodSpec, type V1ResourceRequirements } from '@kubernetes/client-node';
import { connect, type Connection } from '../../cli/connect.js';
import { parseMeminfo, type NodeMemory } from '../../agent/sample/meminfo.js';
import { ANNOTATION } from '../../gateway/admit/node-review.js';
import { parseBytes } from '../../lib/quantity.js';
import type { NodeStatus__Output } from '../../proto/gen/oversell/v1/NodeStatus.js';
import { REPO, STATE, adminConfig, clusterAsync, clusterAsyncWith, core, kubeletCredentials, kubeletPatchStatus, objects } from './cluster.js';
import assert from 'node:assert/strict';
import { eventually, removeInstallLeftovers } from './fixtures.js';

export const REAL_NODE_LABEL = 'oversell.io/real-node';
export const PROBE_IMAGE = 'oversell.local/probe:1'; // built and imported by cluster.sh up
/** What scripts/image/build.sh exports (the Dockerfile's output), tagged as deploy/ names it. */
export const OVERSELL_IMAGE_TAR = join(REPO, '.oversell/images/oversell.tar');

/** The real node, or undefined when the cluster runs without it (OVERSELL_REAL_NODE=0). */
export async function findRealNode(): Promise<V1Node | undefined> {
  return (await core().listNode({ labelSelector: `${REAL_NODE_LABEL}=true` })).items[0];
}

/** A container of the probe image (scripts/cluster/nodeutil): args are nodeutil's. */
export function probeContainer(name: string, args: string[], resources?: V1ResourceRequirements): V1Container {
  return { name, image: PROBE_IMAGE, imagePullPolicy: 'Never', args, ...(resources && { resources }) };
}

/** What keeps a pod the scheduler places on the real node, and only there: its label and its taint. */
export function realNodePlacement(): Required<Pick<V1PodSpec, 'nodeSelector' | 'tolerations'>> {
  return { nodeSelector: { [REAL_NODE_LABEL]: 'true' }, tolerations: [{ key: REAL_NODE_LABEL, operator: 'Exists', effect: 'NoSchedule' }] };
}

/** A pod of the probe image on the real node: args are nodeutil's. */
export function realNodePod(
  name: string,
  args: string[],
  o: { namespace?: string; resources?: V1ResourceRequirements; app?: string; nodeName?: string } = {},
): V1Pod {
  return {
    metadata: { name, namespace: o.namespace ?? 'default', labels: { app: o.app ?? 'real-node-e2e' } },
    spec: {
      restartPolicy: 'Never',
      // nodeName skips the scheduler: the kubelet's own admission decides.
      ...(o.nodeName ? { nodeName: o.nodeName, tolerations: realNodePlacement().tolerations } : realNodePlacement()),
      terminationGracePeriodSeconds: 1,
      containers: [probeContainer('probe', args, o.resources)],
    },
  };
}

/**
 * How many idle pods make the real node oversold: each requests raw/6.5 of
 * memory, so raw allocatable fits one fewer (with room for small pods beside
 * them), and the memory cap while a node learns (1.25x raw) fits them all.
 */
export const REAL_NODE_IDLE_PODS = 7;

/** An idle pod (sleeps) requesting raw/6.5 of memory and 10m CPU. */
export function idlePodFor(rawMemory: bigint, name: string, o: { namespace?: string; nodeName?: string }): V1Pod {
  const each = (rawMemory * 2n) / 13n / 1024n ** 2n;
  return realNodePod(name, ['sleep', '3600'], { ...o, resources: { requests: { cpu: '10m', memory: `${each}Mi` } } });
}

/** Waits until the pod's phase is one of `phases`; returns the pod. */
export function podInPhase(namespace: string, name: string, phases: string[], timeoutMs = 120_000): Promise<V1Pod> {
  return eventually(`pod ${namespace}/${name} ${phases.join(' or ')}`, async () => {
    const p = await core().readNamespacedPod({ namespace, name });
    return phases.includes(p.status?.phase ?? '') ? p : undefined;
  }, timeoutMs, 250).catch(async (err: Error) => assert.fail(`${err.message}; ${await whyPending(namespace, name)}`));
}

/** What the API server and the kubelet say of a pod that has not reached a phase: its status, its events, the kubelet's last lines on it. */
async function whyPending(namespace: string, name: string): Promise<string> {
  const p = await core().readNamespacedPod({ namespace, name }).catch(() => undefined);
  const conditions = (p?.status?.conditions ?? []).map((c) => `${c.type}=${c.status}${c.reason ? ` (${c.reason})` : ''}`).join(', ');
  const containers = (p?.status?.containerStatuses ?? []).map((c) => `${c.name}: ${JSON.stringify(c.state)}`).join('; ');
  const events = (await core().listNamespacedEvent({ namespace, fieldSelector: `involvedObject.name=${name}` }).catch(() => undefined))?.items ?? [];
  const kubelet = kubeletLogSince(0).split('\n').filter((l) => l.includes(`pod="${namespace}/${name}"`) || l.includes(`podName="${name}"`)).slice(-8);
  return [
    `phase ${p?.status?.phase ?? 'unknown'} on ${p?.spec?.nodeName ?? 'no node'}; conditions: ${conditions || 'none'}; containers: ${containers || 'none reported'}`,
    `events: ${events.map((e) => `${e.reason}: ${e.message}`).join(' | ') || 'none'}`,
    `kubelet log on the pod (last ${kubelet.length} lines):`,
    ...kubelet.map((l) => `  ${l.slice(0, 400)}`),
  ].join('\n');
}

export interface NodeWrite {
  /** When the watch delivered it (ms since the epoch, this host's clock, which pods share). */
  at: number;
  node: V1Node;
}

/** When the kubelet last reported Ready: it changes on every kubelet status write and on no other writer's. */
export const heartbeatOf = (n: V1Node): string => String(n.status?.conditions?.find((c) => c.type === 'Ready')?.lastHeartbeatTime ?? '');

/** The status fields a write changed, the Ready heartbeat aside: why the kubelet wrote. */
export function changedStatus(before: V1Node, after: V1Node): string[] {
  const strip = (n: V1Node) => ({ ...n.status, conditions: n.status?.conditions?.map((c) => ({ ...c, lastHeartbeatTime: undefined })) });
  const a = strip(before) as Record<string, unknown>;
  const b = strip(after) as Record<string, unknown>;
  return [...new Set([...Object.keys(a), ...Object.keys(b)])].filter((k) => JSON.stringify(a[k]) !== JSON.stringify(b[k])).sort();
}

export interface NodeRecord {
  /** The node recorded. */
  name: string;
  writes: NodeWrite[];
  /** The writes that changed the Ready heartbeat: the kubelet's. */
  kubeletWrites(): NodeWrite[];
  /** The record in lines (time, heartbeat, allocatable), for a failure message. */
  summary(): string;
  stop(): void;
}

/** Every change of the node object from now on, as the API server stores it. */
export async function recordNode(name: string): Promise<NodeRecord> {
  const writes: NodeWrite[] = [];
  const req = await new Watch(adminConfig()).watch(
    '/api/v1/nodes',
    { fieldSelector: `metadata.name=${name}` },
    (type: string, node: V1Node) => {
      if (type === 'ADDED' || type === 'MODIFIED') writes.push({ at: Date.now(), node });
    },
    () => {},
  );
  return {
    name,
    writes,
    kubeletWrites: () => writes.filter((w, i) => i > 0 && heartbeatOf(w.node) !== heartbeatOf(writes[i - 1]!.node)),
    summary: () => writes.map((w, i) => `${new Date(w.at).toISOString()} heartbeat ${heartbeatOf(w.node)} cpu ${w.node.status?.allocatable?.cpu} memory ${w.node.status?.allocatable?.memory}${i > 0 ? ` changed [${changedStatus(writes[i - 1]!.node, w.node).join(', ')}]` : ''}`).join('\n'),
    stop: () => req.abort(),
  };
}

export interface KubeletRestart {
  /** The kubelet's extra flags from now on (scripts/cluster/realnode.sh reads them when it starts); null: none; absent: as the suite started it. */
  extraArgs?: string | null;
  /** Runs while the kubelet is stopped (a checkpoint to remove). */
  whileStopped?: () => void;
  /** Resolve only once the new kubelet reports this node Ready. */
  readyNode?: string;
}

/** Stops and starts the real node's kubelet (its containers keep running, as on a kubelet upgrade). */
export async function restartKubelet(o: KubeletRestart = {}): Promise<void> {
  await clusterAsync('stop-component', 'kubelet');
  o.whileStopped?.();
  // Heartbeats have a second's resolution, and a restarted kubelet writes its status
  // within a second of starting: had the stopped one written in that same second, the
  // write would be identical, a no-op the API server drops (no watch event), and the
  // next would come 5 min later. A second stopped makes the first write a new one.
  await new Promise((r) => setTimeout(r, 1100));
  const startedAt = Math.floor(Date.now() / 1000) * 1000; // after any heartbeat of the stopped kubelet
  const env = { ...process.env };
  if (o.extraArgs === null) delete env.OVERSELL_KUBELET_EXTRA_ARGS;
  else if (o.extraArgs !== undefined) env.OVERSELL_KUBELET_EXTRA_ARGS = o.extraArgs;
  await clusterAsyncWith(env, 'start-component', 'kubelet');
  if (o.readyNode === undefined) return;
  // A kubelet just started runs no pod until its first relist (PLEG) and its runtime's network are ready: it says Ready then.
  await eventually(`the restarted kubelet reporting ${o.readyNode} Ready`, async () => {
    const ready = (await core().readNode({ name: o.readyNode! })).status?.conditions?.find((c) => c.type === 'Ready');
    return ready?.status === 'True' && new Date(ready.lastHeartbeatTime ?? 0).getTime() >= startedAt ? true : undefined;
  }, 60_000, 250);
}

/** Imports an image archive into the real node's containerd (no registry is reachable). */
export async function importImage(tar: string): Promise<void> {
  await clusterAsync('import-image', tar);
}

/** A JSON merge patch of the node's labels and annotations (null removes a key). */
export async function patchNodeMetadata(name: string, metadata: { labels?: Record<string, string | null>; annotations?: Record<string, string | null> }): Promise<void> {
  await objects().patch({ apiVersion: 'v1', kind: 'Node', metadata: { name, ...metadata } } as never, undefined, undefined, undefined, undefined, PatchStrategy.MergePatch);
}

/** The node opted out again: no oversell.io/enabled label, none of the gateway's annotations. */
export async function optOutNode(name: string): Promise<void> {
  const strip = Object.fromEntries(Object.values(ANNOTATION).map((k) => [k, null]));
  await patchNodeMetadata(name, { labels: { 'oversell.io/enabled': null }, annotations: strip });
}

/** The ServiceAccount (in the caller's namespace) and ClusterRoleBinding queryAsViewer makes; remove the binding when done. */
export const VIEWER = 'real-e2e-viewer';

/**
 * A query API client as an operator's: TLS with the gateway's published CA, a
 * viewer's token (a ServiceAccount in `namespace` bound to oversell-viewer),
 * through the Service's ClusterIP (kube-proxy routes it on this host), or to
 * one replica's `address` (its pod IP and port: the node's bridge is this host's).
 */
export async function queryAsViewer(namespace: string, installNamespace = 'oversell', address?: string): Promise<Connection> {
  await core().createNamespacedServiceAccount({ namespace, body: { metadata: { name: VIEWER } } }).catch(() => {});
  await adminConfig().makeApiClient(RbacAuthorizationV1Api).createClusterRoleBinding({
    body: { metadata: { name: VIEWER }, roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'oversell-viewer' }, subjects: [{ kind: 'ServiceAccount', name: VIEWER, namespace }] },
  }).catch(() => {});
  const token = (await core().createNamespacedServiceAccountToken({ namespace, name: VIEWER, body: { spec: { audiences: [], expirationSeconds: 600 } } })).status?.token ?? '';
  const ca = (await core().readNamespacedConfigMap({ namespace: installNamespace, name: 'oversell-gateway-ca' })).data?.['ca.crt'] ?? '';
  const caFile = join(mkdtempSync(join(tmpdir(), 'oversell-real-e2e-')), 'ca.crt');
  writeFileSync(caFile, ca);
  const svc = await core().readNamespacedService({ namespace: installNamespace, name: 'oversell-gateway' });
  return connect({ address: address ?? `${svc.spec?.clusterIP}:50051`, caFile, token, namespace: installNamespace, service: 'oversell-gateway' });
}

/** GetNode through a query connection. */
export function getNodeStatus(conn: Connection, name: string): Promise<NodeStatus__Output> {
  return new Promise((resolve, reject) => conn.client.GetNode({ name }, conn.metadata(), (err, res) => (err ? reject(err) : res ? resolve(res) : reject(new Error('empty answer')))));
}

/**
 * Waits for `count` kubelet status writes after `from` in the record; returns them.
 * A timeout says whether the API server stores a heartbeat the record missed (a
 * watch that ended) and what the kubelet logged meanwhile (pass `logFrom`, a
 * kubeletLogSize() taken before the restart).
 */
export async function kubeletWritesAfter(record: NodeRecord, from: number, count: number, timeoutMs: number, logFrom?: number): Promise<NodeWrite[]> {
  return eventually(`${count} kubelet status write(s)`, () => {
    const w = record.kubeletWrites().filter((x) => x.at > from);
    return w.length >= count ? w : undefined;
  }, timeoutMs, 100).catch(async (err: Error) => {
    const last = record.writes.at(-1);
    const stored = await core().readNode({ name: record.name }).then((n) => heartbeatOf(n), (e: Error) => `unread: ${e.message}`);
    const log = logFrom === undefined ? '' : kubeletLogSince(logFrom).split('\n').filter((l) => /^[EW]\d{4}|error|fail/i.test(l)).slice(-25).join('\n');
    throw new Error(`${err.message}; the API server stores heartbeat ${stored} (the record's last: ${last ? heartbeatOf(last.node) : 'none'}); the node's writes:\n${record.summary()}${logFrom === undefined ? '' : `\nthe kubelet's warnings and errors since:\n${log}`}`);
  });
}

/**
 * After an uninstall began at `since`: the node is back to raw (whoever wrote it:
 * the gateway lowers to the floor when its policy is deleted, else the kubelet's
 * next write, 10 s apart while what it reads back differs), and a kubelet write
 * then stays raw (a restart makes one at once: unchanged, it writes every 5 min).
 */
export async function assertRawAfterUninstall(record: NodeRecord, since: number, how: string, rawMemoryText: string): Promise<void> {
  const fail = (err: Error) => assert.fail(`${err.message}; the node's writes:\n${record.summary()}`);
  const raw = await eventually('raw allocatable', () => record.writes.find((w) => w.at > since && w.node.status?.allocatable?.memory === rawMemoryText), 30_000, 100).catch(fail);
  const previous = record.writes[record.writes.indexOf(raw) - 1];
  const by = previous && heartbeatOf(previous.node) === heartbeatOf(raw.node) ? 'the gateway' : 'the kubelet';
  console.log(`# ${how}: raw allocatable back ${raw.at - since} ms after it began, written by ${by}`);
  await eventually('the webhook configuration gone', () => objects().read({ apiVersion: 'admissionregistration.k8s.io/v1', kind: 'MutatingWebhookConfiguration', metadata: { name: 'oversell' } }).then(() => undefined, () => true), 60_000, 250);
  await new Promise((r) => setTimeout(r, 1000)); // the API server's view of webhook configurations follows within a second
  const restartedAt = Date.now();
  await restartKubelet();
  const [next] = await kubeletWritesAfter(record, restartedAt, 1, 60_000);
  assert.equal(next!.node.status?.allocatable?.memory, rawMemoryText, 'the kubelet\'s write after the uninstall is raw');
}

/**
 * `kubectl apply --server-side -k dir`, as docs/install.md has users run it:
 * the first apply may send the policy before its CRD is established, so
 * once that is, it is run again.
 */
export async function applyOverlay(dir: string): Promise<void> {
  try {
    await clusterAsync('kubectl', 'apply', '--server-side', '-k', dir);
  } catch {
    await clusterAsync('kubectl', 'wait', '--for=condition=Established', '--timeout=60s', 'crd/oversellpolicies.oversell.io');
    await clusterAsync('kubectl', 'apply', '--server-side', '-k', dir);
  }
}

/** Whatever an install from `dir` left, whether its test passed or not: the objects, the viewer's binding, the node's opt-in. */
export async function removeOverlay(dir: string, nodeName: string): Promise<void> {
  try {
    await clusterAsync('kubectl', 'delete', '-k', dir, '--wait=false', '--ignore-not-found');
  } catch { /* some kinds already gone: the rest by name below */ }
  await removeInstallLeftovers().catch(() => {});
  await adminConfig().makeApiClient(RbacAuthorizationV1Api).deleteClusterRoleBinding({ name: VIEWER }).catch(() => {});
  await optOutNode(nodeName).catch(() => {});
}

const KUBELET_LOG = join(STATE, 'logs', 'kubelet.log');

/** How far the real node's kubelet log goes now: an offset for kubeletLogSince. */
export const kubeletLogSize = (): number => (existsSync(KUBELET_LOG) ? statSync(KUBELET_LOG).size : 0);

/** The bytes the real node's kubelet logged since `offset`. */
export function kubeletLogSince(offset: number): string {
  if (!existsSync(KUBELET_LOG)) return '';
  const size = statSync(KUBELET_LOG).size;
  if (size <= offset) return '';
  const buf = Buffer.alloc(size - offset);
  const fd = openSync(KUBELET_LOG, 'r');
  try {
    readSync(fd, buf, 0, buf.length, offset);
  } finally {
    closeSync(fd);
  }
  return buf.toString('utf8');
}

/** Until the real node runs no pod of another file (one may still be terminating): their usage and requests would count. */
export async function noOtherPodsOn(nodeName: string): Promise<void> {
  let others: string[] = [];
  await eventually('no other pods on the real node', async () => {
    others = (await core().listPodForAllNamespaces({ fieldSelector: `spec.nodeName=${nodeName}` })).items
      .filter((p) => !['Succeeded', 'Failed'].includes(p.status?.phase ?? ''))
      .map((p) => `${p.metadata?.namespace}/${p.metadata?.name}${p.metadata?.deletionTimestamp ? ' (terminating)' : ''}`);
    return others.length === 0 ? true : undefined;
  }, 120_000, 1_000).catch(() => assert.fail(`the real node must run no other pods, and after 120 s it still runs ${others.join(', ')} (a test left them?)`));
}

/** The host's memory as the kubelet and the agent compute it (MemTotal - MemFree - Inactive(file)): the real node is this host. */
export const hostMemory = (): NodeMemory => parseMeminfo(readFileSync('/proc/meminfo', 'utf8'));

/** Memory requested by the pods bound to the node and not terminal, as the scheduler and the kubelet add them up. */
export async function boundMemoryOn(nodeName: string): Promise<bigint> {
  const pods = (await core().listPodForAllNamespaces({ fieldSelector: `spec.nodeName=${nodeName}` })).items;
  let sum = 0n;
  for (const p of pods) {
    if (p.status?.phase === 'Succeeded' || p.status?.phase === 'Failed') continue;
    for (const c of p.spec?.containers ?? []) sum += parseBytes(c.resources?.requests?.memory ?? '0', 'request');
  }
  return sum;
}

/**
 * deploy/ on the real node (namespace oversell): the agent Running there, the
 * gateway Ready there, and a dry-run kubelet write inflated past raw through
 * the Service. Ready is not reachable: kube-proxy programs the Service's new
 * endpoint a moment later, and a kubelet write meanwhile passes raw
 * (failurePolicy Ignore) and is then not repeated for 5 min. A dry-run write
 * as the kubelet shows the API server's own path to the webhook, and changes
 * nothing (sideEffects NoneOnDryRun).
 */
export async function waitInstalledOn(node: V1Node, rawMemory: bigint): Promise<void> {
  const NS = 'oversell';
  const nodeName = node.metadata!.name!;
  await eventually('the agent pod Running on the real node, the gateway pod Ready', async () => {
    const pods = (await core().listNamespacedPod({ namespace: NS })).items.filter((p) => !p.metadata?.deletionTimestamp);
    const agent = pods.find((p) => p.metadata?.labels?.['app.kubernetes.io/name'] === 'oversell-agent' && p.spec?.nodeName === nodeName);
    const gateway = pods.find((p) => p.metadata?.labels?.['app.kubernetes.io/name'] === 'oversell-gateway');
    const ready = (p?: V1Pod) => p?.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True');
    return agent?.status?.phase === 'Running' && ready(gateway) && gateway?.spec?.nodeName === nodeName ? true : undefined;
  }, 180_000, 500);
  const creds = kubeletCredentials(nodeName);
  let last = 'no answer';
  await eventually('a dry-run kubelet write inflated through the Service', async () => {
    const res = await kubeletPatchStatus(creds, nodeName, { allocatable: node.status!.allocatable }, { dryRun: true });
    last = `${res.status} allocatable memory ${res.body.status?.allocatable?.memory}, reason ${res.body.metadata?.annotations?.[ANNOTATION.reason] ?? '(none: the webhook did not answer)'}`;
    return res.status === 200 && parseBytes(res.body.status?.allocatable?.memory ?? '0', 'allocatable memory') > rawMemory ? true : undefined;
  }, 60_000, 250).catch(async (err: Error) => {
    const logs = await clusterAsync('kubectl', 'logs', '-n', NS, 'deploy/oversell-gateway', '--tail=30').catch((e: Error) => e.message);
    assert.fail(`${err.message}; last answer: ${last}; the gateway's log:\n${logs}`);
  });
}
