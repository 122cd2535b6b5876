// What the cluster benchmark's 10,000 agents are, to a real kube-apiserver:
// a Node each, an agent pod bound to it (run by no kubelet: nothing here
// starts containers), and a token from the TokenRequest API bound to that pod
// with the gateway's audience, as the kubelet gets one for the agent's
// projected volume. The gateway's TokenReview of it then names the node, as
// it does in a cluster. Plus a viewer ServiceAccount, bound to the ClusterRole
// deploy/base/rbac.yaml ships, for the query API's caller.
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { loadAllYaml, type KubernetesObject } from '@kubernetes/client-node';
import { core, objects } from '../test/e2e/cluster.js';
import { waitUntil } from '../scripts/harness/wait.js';
import { log, REPO } from './processes.js';

export const BENCH_NAMESPACE = 'oversell-bench-cluster';
export const AGENT_SERVICE_ACCOUNT = 'oversell-agent';
const VIEWER = 'viewer';
const VIEWER_BINDING = 'oversell-bench-cluster-viewer';
/** On the bench's Node objects, so they are found and deleted together (never the opt-in label). */
const NODE_LABEL = { key: 'oversell.io/bench', value: 'cluster' };
/** Requests to the API server in flight at once while setting up. */
const IN_FLIGHT = 32;
/** What the kubelet asks for a projected token (deploy/base/agent.yaml). */
const TOKEN_SECONDS = 3607;

/** fn over items, `IN_FLIGHT` at a time, with a progress line every 10 s. */
async function each<T>(what: string, items: readonly T[], fn: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  let done = 0;
  const started = Date.now();
  const progress = setInterval(() => log(`  ${what}: ${done}/${items.length} (${Math.round((Date.now() - started) / 1000)} s)`), 10_000);
  try {
    await Promise.all(Array.from({ length: IN_FLIGHT }, async () => {
      while (next < items.length) {
        await fn(items[next++]!);
        done += 1;
      }
    }));
  } finally {
    clearInterval(progress);
  }
  log(`  ${what}: ${items.length} in ${((Date.now() - started) / 1000).toFixed(1)} s`);
}

export const nodeName = (prefix: string, i: number) => `${prefix}-${i}`;

/**
 * Namespace, ServiceAccounts, the viewer binding, Nodes and agent pods
 * `from` to `count - 1` (from 0 unless more are added to an earlier call's),
 * and a token per agent: writes their `<nodeName> <token>` lines to
 * tokensFile and the viewer's token to viewerTokenFile.
 */
export async function createAgents(prefix: string, count: number, tokensFile: string, viewerTokenFile: string, from = 0): Promise<void> {
  const api = core();
  // Kept from an earlier run when there was one: deleting a namespace waits on kube-controller-manager's backoff.
  await exists(api.createNamespace({ body: { metadata: { name: BENCH_NAMESPACE } } }));
  for (const name of [AGENT_SERVICE_ACCOUNT, VIEWER]) await exists(api.createNamespacedServiceAccount({ namespace: BENCH_NAMESPACE, body: { metadata: { name } } }));
  const shipped = loadAllYaml(readFileSync(join(REPO, 'deploy/base/rbac.yaml'), 'utf8')) as KubernetesObject[];
  if (!shipped.some((o) => o.kind === 'ClusterRole' && o.metadata?.name === 'oversell-viewer')) throw new Error('deploy/base/rbac.yaml no longer ships ClusterRole oversell-viewer: the query caller has no role to bind');
  const viewerRole = shipped.find((o) => o.kind === 'ClusterRole' && o.metadata?.name === 'oversell-viewer')!;
  await exists(objects().create({ ...viewerRole, metadata: { name: VIEWER_BINDING } }));
  await exists(objects().create({
    apiVersion: 'rbac.authorization.k8s.io/v1', kind: 'ClusterRoleBinding', metadata: { name: VIEWER_BINDING },
    roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: VIEWER_BINDING },
    subjects: [{ kind: 'ServiceAccount', name: VIEWER, namespace: BENCH_NAMESPACE }],
  } as KubernetesObject));

  const indexes = Array.from({ length: count - from }, (_, i) => from + i);
  await each('Nodes created', indexes, async (i) => {
    await exists(api.createNode({ body: { metadata: { name: nodeName(prefix, i), labels: { [NODE_LABEL.key]: NODE_LABEL.value } } } }));
  });
  const tokens: string[] = [];
  await each('agent pods and their tokens', indexes, async (i) => {
    const node = nodeName(prefix, i);
    const name = `agent-${node}`;
    // A pod an interrupted run left (deleting 10,000 pods at once can outlast the client's timeout) is the same pod: its token binds to it as well.
    const pod = await api.createNamespacedPod({
      namespace: BENCH_NAMESPACE,
      body: { metadata: { name }, spec: { nodeName: node, serviceAccountName: AGENT_SERVICE_ACCOUNT, containers: [{ name: 'agent', image: 'oversell:bench' }] } },
    }).catch((err: unknown) => {
      if (statusOf(err) !== 409) throw err;
      return api.readNamespacedPod({ namespace: BENCH_NAMESPACE, name });
    });
    const t = await api.createNamespacedServiceAccountToken({
      name: AGENT_SERVICE_ACCOUNT, namespace: BENCH_NAMESPACE,
      body: { spec: { audiences: ['oversell-gateway'], expirationSeconds: TOKEN_SECONDS, boundObjectRef: { apiVersion: 'v1', kind: 'Pod', name: pod.metadata?.name ?? '', uid: pod.metadata?.uid ?? '' } } },
    });
    if (!t.status?.token) throw new Error(`TokenRequest for ${node}'s agent pod returned no token`);
    tokens[i - from] = `${node} ${t.status.token}`;
  });
  writeFileSync(tokensFile, `${tokens.join('\n')}\n`, { mode: 0o600 });
  const viewer = await api.createNamespacedServiceAccountToken({ name: VIEWER, namespace: BENCH_NAMESPACE, body: { spec: { audiences: [], expirationSeconds: TOKEN_SECONDS } } });
  writeFileSync(viewerTokenFile, viewer.status?.token ?? '', { mode: 0o600 });
}

const statusOf = (err: unknown) => (err as { code?: number }).code;
/** Resolves when the create succeeded or the object was there already. */
const exists = (create: Promise<unknown>) => create.then(() => undefined, (err: unknown) => {
  if (statusOf(err) !== 409) throw err;
});

/**
 * Deletes the Nodes and agent pods createAgents made, and with `all` the
 * namespace and RBAC objects too. No kubelet confirms these pods' graceful
 * deletion: they are removed at once (grace 0), or they would wait on pod GC.
 */
export async function deleteAgents(options: { all?: boolean } = {}): Promise<void> {
  const api = core();
  await api.deleteCollectionNode({ labelSelector: `${NODE_LABEL.key}=${NODE_LABEL.value}` }).catch((err: Error) => log(`  could not delete the bench's Nodes (${err.message}); kubectl delete nodes -l ${NODE_LABEL.key}=${NODE_LABEL.value}`));
  await api.deleteCollectionNamespacedPod({ namespace: BENCH_NAMESPACE, gracePeriodSeconds: 0 }).catch((err: Error) => statusOf(err) !== 404 && log(`  could not delete the bench's pods (${err.message}); kubectl delete pods -n ${BENCH_NAMESPACE} --all --grace-period=0 --force`));
  const ns = await api.readNamespace({ name: BENCH_NAMESPACE }).catch(() => undefined);
  if (ns?.metadata?.deletionTimestamp) {
    log(`  waiting for namespace ${BENCH_NAMESPACE}, being deleted, to be gone`);
    await waitUntil(`namespace ${BENCH_NAMESPACE} deleted (kube-controller-manager empties it)`, async () => (await api.readNamespace({ name: BENCH_NAMESPACE }).then(() => undefined, () => true)), 10 * 60_000, 1000);
  }
  if (!options.all) return;
  await api.deleteNamespace({ name: BENCH_NAMESPACE }).catch(() => {});
  for (const o of [{ apiVersion: 'rbac.authorization.k8s.io/v1', kind: 'ClusterRoleBinding' }, { apiVersion: 'rbac.authorization.k8s.io/v1', kind: 'ClusterRole' }]) {
    await objects().delete({ ...o, metadata: { name: VIEWER_BINDING } }).catch(() => {});
  }
}
