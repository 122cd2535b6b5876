// A gateway rollout on a cluster of one schedulable node (issue 44): the
// local cluster's real node is the only one the gateway may use. Installed
// with its default two replicas, both run; switching the metrics API on (a
// change of the gateway's pod template: a rolling update that must add a pod
// before it removes one) finishes, and the new configuration serves: the
// APIService v1beta1.metrics.k8s.io becomes Available through the new pods.
// Both install paths, kustomize and Helm. With the spread's minDomains 2 of
// before, the second replica and every surge pod stayed Pending for good.
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { AppsV1Api, type V1Deployment, type V1Node } from '@kubernetes/client-node';
import { REPO, adminConfig, clusterAsync, core, helm, objects } from './cluster.js';
import { eventually, removeInstallLeftovers } from './fixtures.js';
import { OVERSELL_IMAGE_TAR, REAL_NODE_LABEL, applyOverlay, findRealNode, importImage, removeOverlay } from './real-node.js';

const NS = 'oversell';
const BASE = join(REPO, 'test/e2e/one-node-rollout');
const WITH_METRICS_API = join(REPO, 'test/e2e/one-node-rollout-metrics-api');
const APISERVICE = 'v1beta1.metrics.k8s.io';
// Measured on the 2-core machine: a gateway pod Ready 10-20 s after it is
// created, so a rollout of two surges about a minute; four times that.
const ROLLOUT_MS = 240_000;

let node: V1Node | undefined;
const kubectl = (...args: string[]) => clusterAsync('kubectl', ...args);
const apps = () => adminConfig().makeApiClient(AppsV1Api);

/** Why the gateway's rollout is not done, or undefined once every replica is the new template's, Ready and the old ones gone. */
function notDone(d: V1Deployment): string | undefined {
  const want = d.spec?.replicas ?? 1;
  const s = d.status ?? {};
  if ((s.observedGeneration ?? 0) < (d.metadata?.generation ?? 0)) return 'the controller has not seen the change';
  if ((s.updatedReplicas ?? 0) < want) return `${s.updatedReplicas ?? 0} of ${want} replicas updated`;
  if ((s.replicas ?? 0) > want) return `${(s.replicas ?? 0) - want} old replica(s) still running`;
  if ((s.availableReplicas ?? 0) < want) return `${s.availableReplicas ?? 0} of ${want} available`;
  return undefined;
}

/** Waits for the rollout; on a timeout says why, with the pods' scheduling events. */
async function rolledOut(what: string): Promise<V1Deployment> {
  let why = '';
  const started = Date.now();
  try {
    const d = await eventually(what, async () => {
      const dep = await apps().readNamespacedDeployment({ namespace: NS, name: 'oversell-gateway' });
      why = notDone(dep) ?? '';
      return why ? undefined : dep;
    }, ROLLOUT_MS, 500);
    console.log(`# ${what}: ${((Date.now() - started) / 1000).toFixed(1)} s`);
    return d;
  } catch (err) {
    const pods = await kubectl('get', 'pods', '-n', NS, '-l', 'app.kubernetes.io/name=oversell-gateway', '-o', 'wide').catch((e: Error) => e.message);
    const events = await kubectl('get', 'events', '-n', NS, '--field-selector', 'reason=FailedScheduling').catch((e: Error) => e.message);
    return assert.fail(`${(err as Error).message}: ${why}\n${pods}\n${events}`);
  }
}

/** Every gateway pod: on the one node, none Pending. */
async function gatewayPods(): Promise<{ name: string; node: string; phase: string }[]> {
  const pods = await core().listNamespacedPod({ namespace: NS, labelSelector: 'app.kubernetes.io/name=oversell-gateway' });
  return pods.items.filter((p) => !p.metadata?.deletionTimestamp).map((p) => ({ name: p.metadata?.name ?? '', node: p.spec?.nodeName ?? '', phase: p.status?.phase ?? '' }));
}

async function apiServiceAvailable(): Promise<void> {
  let last = '';
  await eventually('the APIService Available=True, served by the new pods', async () => {
    const a = (await objects().read({ apiVersion: 'apiregistration.k8s.io/v1', kind: 'APIService', metadata: { name: APISERVICE } }).catch(() => undefined)) as { status?: { conditions?: { type: string; status: string; message?: string }[] } } | undefined;
    const c = a?.status?.conditions?.find((x) => x.type === 'Available');
    last = JSON.stringify(c ?? 'no APIService');
    return c?.status === 'True' ? true : undefined;
  }, 120_000, 500).catch((err: Error) => assert.fail(`${err.message}; last: ${last}`));
}

async function noApiService(): Promise<void> {
  await eventually('no APIService v1beta1.metrics.k8s.io', async () => ((await objects().read({ apiVersion: 'apiregistration.k8s.io/v1', kind: 'APIService', metadata: { name: APISERVICE } }).then(() => true, () => false)) ? undefined : true), 60_000, 500);
}

async function installedOnOneNode(): Promise<void> {
  const d = await rolledOut('both replicas of the install Ready on the one node');
  assert.equal(d.spec?.replicas, 2, 'the default two replicas');
  const pods = await gatewayPods();
  assert.deepEqual(pods.map((p) => [p.node, p.phase]), [[node?.metadata?.name, 'Running'], [node?.metadata?.name, 'Running']], 'both on the one node, none Pending');
}

async function switchedOn(): Promise<void> {
  const d = await rolledOut('the rollout switching the metrics API on');
  const env = d.spec?.template.spec?.containers.find((c) => c.name === 'gateway')?.env ?? [];
  assert.equal(env.find((e) => e.name === 'OVERSELL_METRICS_API')?.value, 'on', 'the new template is the one rolled out');
  assert.equal((await gatewayPods()).length, 2, 'two replicas, no surge pod left behind');
  await apiServiceAvailable();
}

before(async () => {
  node = await findRealNode();
  if (!node) return;
  if (!existsSync(OVERSELL_IMAGE_TAR)) throw new Error(`${OVERSELL_IMAGE_TAR} missing: build the image first (bash scripts/image/build.sh)`);
  await importImage(OVERSELL_IMAGE_TAR);
  await removeInstallLeftovers();
});

describe('a gateway rollout on a one-node cluster finishes', { timeout: 12 * 60_000 }, () => {
  after(async () => {
    if (node) await removeOverlay(WITH_METRICS_API, node.metadata?.name ?? '');
  });

  it('kubectl apply -k: installed with two replicas, then the metrics API Component applied: the rollout finishes and the metrics API serves', async (t) => {
    if (!node) return t.skip('no real node in this cluster (OVERSELL_REAL_NODE=0)');
    await applyOverlay(BASE);
    await installedOnOneNode();
    await applyOverlay(WITH_METRICS_API);
    await switchedOn();
    await kubectl('delete', '-k', WITH_METRICS_API, '--wait=true', '--ignore-not-found');
    await noApiService();
  });
});

describe('a gateway rollout on a one-node cluster finishes (Helm)', { timeout: 12 * 60_000 }, () => {
  const placement = ['--set-json', `gateway.nodeSelector={"${REAL_NODE_LABEL}":"true"}`, '--set-json', `gateway.tolerations=[{"key":"${REAL_NODE_LABEL}","operator":"Exists","effect":"NoSchedule"}]`];
  after(async () => {
    if (!node) return;
    await helm('uninstall', 'oversell', '-n', NS, '--ignore-not-found', '--wait').catch(() => {});
    await removeInstallLeftovers().catch(() => {});
  });

  it('helm install with two replicas, then helm upgrade --set metricsApi.enabled=true: the rollout finishes and the metrics API serves; helm uninstall leaves no APIService', async (t) => {
    if (!node) return t.skip('no real node in this cluster (OVERSELL_REAL_NODE=0)');
    await helm('install', 'oversell', join(REPO, 'deploy/helm/oversell'), '-n', NS, '--create-namespace', ...placement);
    await installedOnOneNode();
    await helm('upgrade', 'oversell', join(REPO, 'deploy/helm/oversell'), '-n', NS, '--reuse-values', '--set', 'metricsApi.enabled=true');
    await switchedOn();
    await helm('uninstall', 'oversell', '-n', NS, '--wait');
    await noApiService();
  });
});
