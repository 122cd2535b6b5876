// The protected-room check on the real control plane: the real scheduler binds
// pods to an inflated kwok node, and bindings.oversell.io (deploy/base/webhook.yaml)
// refuses a protected pod whose requests, with the node's other protected pods',
// would not fit in raw allocatable. Measured here: how long the refused pod
// waits and how many binding attempts the scheduler makes meanwhile. A protected
// pod that names its node (spec.nodeName) is refused at its creation instead.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { CoreV1Event, V1Pod } from '@kubernetes/client-node';
import { ADMIN_KUBECONFIG, core } from './cluster.js';
import { GI, OPT_IN, POLICY_REF, UNAUTHENTICATED_AGENTS, customObjects, eventually, fakeNode, installPolicyCrd, installWebhook, pod, removeWebhook, startGatewayProcess, upsertPolicy, webhookFromDeploy, type FakeNode, type GatewayProc } from './fixtures.js';

const WEBHOOK = 'oversell-protected-room-e2e';
const POLICY = 'pool-room';
const NODE = 'e2e-room';
const PODS = ['room-held', 'room-guaranteed', 'room-burstable', 'room-fits', 'room-direct', 'room-direct-burstable'];

let gateway: GatewayProc;
let node: FakeNode | undefined;

/** A pod the scheduler places on NODE; Guaranteed when `guaranteed` (limits equal to requests). */
function scheduled(name: string, cpu: string, memory: string, guaranteed: boolean, nodeName?: string): V1Pod {
  const p = pod(name, cpu, memory, nodeName ? { nodeName } : { nodeSelector: { 'kubernetes.io/hostname': NODE } });
  if (guaranteed) p.spec!.containers[0]!.resources!.limits = { cpu, memory };
  return p;
}

const boundTo = async (name: string) => (await core().readNamespacedPod({ namespace: 'default', name })).spec?.nodeName;

async function eventsOf(name: string): Promise<CoreV1Event[]> {
  return (await core().listNamespacedEvent({ namespace: 'default', fieldSelector: `involvedObject.name=${name}` })).items;
}

async function removePods(): Promise<void> {
  for (const name of PODS) await core().deleteNamespacedPod({ namespace: 'default', name, gracePeriodSeconds: 0 }).catch(() => {});
}

describe('protected room on a real control plane', { timeout: 6 * 60_000 }, () => {
  before(async () => {
    await removePods();
    await installPolicyCrd();
    await upsertPolicy(POLICY, { nodeSelector: { matchLabels: { pool: 'room' } }, startupGrace: '0s' });
    gateway = await startGatewayProcess(undefined, undefined, ['--policies', 'crd', '--kubeconfig', ADMIN_KUBECONFIG, '--lease-namespace', 'default', ...UNAUTHENTICATED_AGENTS]);
    await gateway.waitFor(/leading/);
    await installWebhook(webhookFromDeploy(gateway, WEBHOOK));
  });

  after(async () => {
    await removePods();
    await node?.stop();
    await gateway?.kill();
    await removeWebhook(WEBHOOK).catch(() => {});
    await customObjects().deleteClusterCustomObject({ ...POLICY_REF, name: POLICY }).catch(() => {});
  });

  it('a protected pod is refused oversold room and lands once raw room frees; unprotected pods take the oversold room', async () => {
    // 4 CPUs raw, 3 of them held by a Guaranteed pod (bound by name: no scheduler, no binding review).
    node = await fakeNode(NODE, { labels: { ...OPT_IN, pool: 'room' }, usage: { cpuMillicores: 200, memoryWorkingSetBytes: 1 * GI } });
    await core().createNamespacedPod({ namespace: 'default', body: scheduled('room-held', '3', '2Gi', true, NODE) });
    await node.startAgent(gateway);
    const n = node;
    await eventually('the node inflated past 5 CPUs', async () => {
      const stored = await n.heartbeat();
      return Number(stored.status?.allocatable?.cpu ?? 0) >= 5 ? stored : undefined;
    }, 60_000);

    // Fits the inflated allocatable (3 + 2 <= 8) but not raw for protected pods (3 + 2 > 4).
    const refusedAt = Date.now();
    await core().createNamespacedPod({ namespace: 'default', body: scheduled('room-guaranteed', '2', '1Gi', true) });
    const refusals = await eventually('the scheduler told why the binding failed', async () => {
      const said = (await eventsOf('room-guaranteed')).filter((e) => /no raw room/.test(e.message ?? ''));
      return said.length > 0 ? said : undefined;
    });
    assert.match(refusals[0]!.message ?? '', /bindings\.oversell\.io/);
    assert.equal(await boundTo('room-guaranteed'), undefined);

    // Unprotected (Burstable): the oversold room is for it.
    await core().createNamespacedPod({ namespace: 'default', body: scheduled('room-burstable', '2', '1Gi', false) });
    await eventually('room-burstable bound to the node', async () => ((await boundTo('room-burstable')) === NODE ? true : undefined));
    // Protected, and fits raw: 3 + 1 <= 4.
    await core().createNamespacedPod({ namespace: 'default', body: scheduled('room-fits', '1', '1Gi', true) });
    await eventually('room-fits bound to the node', async () => ((await boundTo('room-fits')) === NODE ? true : undefined));
    assert.equal(await boundTo('room-guaranteed'), undefined, 'still refused: protected requests are now 4 of 4 CPUs');

    // A protected pod that names its node skips the scheduler: its creation is refused instead, and an unprotected one is created.
    const direct = await core().createNamespacedPod({ namespace: 'default', body: scheduled('room-direct', '1', '1Gi', true, NODE) }).then(
      () => undefined,
      (err: { code?: number; body?: unknown }) => err,
    );
    assert.equal(direct?.code, 403, 'the API server refuses the creation');
    assert.match(String(direct?.body), /bindings\.oversell\.io.*no raw room/s);
    await assert.rejects(core().readNamespacedPod({ namespace: 'default', name: 'room-direct' }), 'not created');
    await core().createNamespacedPod({ namespace: 'default', body: scheduled('room-direct-burstable', '1', '1Gi', false, NODE) });
    await core().deleteNamespacedPod({ namespace: 'default', name: 'room-direct-burstable', gracePeriodSeconds: 0 });

    // Raw room frees: the refused pod lands on the scheduler's next try.
    await core().deleteNamespacedPod({ namespace: 'default', name: 'room-held', gracePeriodSeconds: 0 });
    await core().deleteNamespacedPod({ namespace: 'default', name: 'room-fits', gracePeriodSeconds: 0 });
    const freedAt = Date.now();
    await eventually('room-guaranteed bound once raw room freed', async () => ((await boundTo('room-guaranteed')) === NODE ? true : undefined), 90_000);
    const attempts = (await eventsOf('room-guaranteed')).filter((e) => /no raw room/.test(e.message ?? '')).reduce((sum, e) => sum + (e.count ?? 1) + (e.series?.count ?? 0), 0);
    console.log(`# protected room: refused ${attempts} time(s) over ${((freedAt - refusedAt) / 1000).toFixed(1)} s while the node had no raw room; bound ${((Date.now() - freedAt) / 1000).toFixed(1)} s after room freed`);
    assert.ok(attempts >= 1);
  });
});
