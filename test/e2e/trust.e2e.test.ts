// Issue 19 on a real control plane: what others can write does not decide a
// node's allocatable. A user with only `nodes` patch annotates with kubectl;
// another identity writes nodes/status; a kubelet's write arrives as a dry
// run; an agent reports more bound requests than the cap allows.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { request } from 'node:https';
import { after, before, describe, it } from 'node:test';
import { PatchStrategy, RbacAuthorizationV1Api, setHeaderOptions, type V1MutatingWebhookConfiguration, type V1Node } from '@kubernetes/client-node';
import { ANNOTATION } from '../../gateway/admit/node-review.js';
import { sumRequests } from '../../lib/pod-requests.js';
import { formatMilli } from '../../lib/quantity.js';
import { scrapeMetric } from '../helpers/metrics.js';
import { kubeletReview } from '../helpers/node-reviews.js';
import { ADMIN_KUBECONFIG, REPO, adminConfig, core, kubeletPatchStatus, kubeletStatus, objects } from './cluster.js';
import { OPT_IN, UNAUTHENTICATED_AGENTS, eventually, fakeNode, installWebhook, pod, podsOn, removeWebhook, startGatewayProcess, webhookFromDeploy, type FakeNode, type GatewayProc } from './fixtures.js';

const NS = 'oversell-e2e-trust';
const WEBHOOK = 'oversell-e2e-trust';
const BIN = execFileSync('bash', [join(REPO, 'scripts/cluster/build.sh'), '--print-bin-dir'], { encoding: 'utf8' }).trim();
const rbac = () => adminConfig().makeApiClient(RbacAuthorizationV1Api);
const work = mkdtempSync(join(tmpdir(), 'oversell-e2e-trust-'));

let gateway: GatewayProc;
const nodes: FakeNode[] = [];
const cleanups: Array<() => Promise<unknown>> = [];

/** kubectl as the admin, or impersonating `as` (with its groups). */
function kubectl(args: string[], as?: { user: string; groups?: string[] }): string {
  const who = as ? ['--as', as.user, ...(as.groups ?? []).flatMap((g) => ['--as-group', g])] : [];
  return execFileSync(join(BIN, 'kubectl'), ['--kubeconfig', ADMIN_KUBECONFIG, ...who, ...args], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
}

/** A user bound to a ClusterRole with exactly these rules. */
async function userWith(user: string, rules: Array<{ apiGroups: string[]; resources: string[]; verbs: string[] }>): Promise<void> {
  const name = `${NS}-${user}`;
  await rbac().createClusterRole({ body: { metadata: { name }, rules } });
  await rbac().createClusterRoleBinding({
    body: { metadata: { name }, roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name }, subjects: [{ apiGroup: 'rbac.authorization.k8s.io', kind: 'User', name: user }] },
  });
  cleanups.push(() => rbac().deleteClusterRoleBinding({ name }), () => rbac().deleteClusterRole({ name }));
}

async function bindPods(n: FakeNode, prefix: string, count: number, cpu: string, memory: string): Promise<void> {
  for (let i = 0; i < count; i++) {
    const name = `${prefix}-${i}`;
    await core().createNamespacedPod({ namespace: NS, body: { ...pod(name, cpu, memory, { nodeName: n.name }), metadata: { name, namespace: NS } } });
  }
}

/** A 4-cpu, 8Gi node with 3 cpu and 6Gi bound and an agent: inflated to 8 cpu (the 2x learning cap: the node has no day of history). */
async function node(name: string): Promise<FakeNode> {
  const n = await fakeNode(name, { labels: OPT_IN, raw: { cpu: '4', memory: '8Gi' } });
  nodes.push(n);
  cleanups.push(() => core().deleteNode({ name }));
  await bindPods(n, name, 3, '1', '2Gi');
  await n.startAgent(gateway);
  await eventually(`${name} inflated`, async () => ((await n.heartbeat()).status?.allocatable?.cpu === '8' ? true : undefined));
  return n;
}

const cpuOf = (n: V1Node) => n.status?.allocatable?.cpu;

async function namespaceGone(): Promise<void> {
  await eventually(`namespace ${NS} gone`, async () => {
    try {
      await core().readNamespace({ name: NS });
      return undefined;
    } catch (err) {
      return (err as { code?: number }).code === 404 ? true : undefined;
    }
  }, 60_000, 500);
}

/** CPU requests of the pods the API server has bound to the node, as the kubelet counts them. */
async function boundCpu(node: string): Promise<bigint> {
  return BigInt(sumRequests(await podsOn(node)).cpuMillicores);
}

describe('trust on a real control plane', { timeout: 10 * 60_000 }, () => {
  before(async () => {
    await namespaceGone(); // a run before this one may still be deleting it
    await core().createNamespace({ body: { metadata: { name: NS } } });
    cleanups.push(() => core().deleteNamespace({ name: NS }));
    gateway = await startGatewayProcess(undefined, undefined, [
      '--policies', 'flags', '--kubeconfig', ADMIN_KUBECONFIG, '--lease-namespace', NS, '--identity', 'trust-e2e',
      // These tests bind pods and read the very next write's decision: no startupGrace hold (policy.e2e shows the hold).
      '--stale-after', '6s', '--startup-grace', '0s', ...UNAUTHENTICATED_AGENTS,
    ]);
    await gateway.waitFor(/^leading/, 30_000);
    await installWebhook(webhookFromDeploy(gateway, WEBHOOK));
    cleanups.push(() => removeWebhook(WEBHOOK));
  });
  after(async () => {
    for (const n of nodes) await n.stop();
    await gateway?.kill();
    // Pods first, while their kwok nodes exist: a pod whose node is gone waits in Terminating, and the namespace with it.
    await core().deleteCollectionNamespacedPod({ namespace: NS, gracePeriodSeconds: 0 }).catch(() => {});
    for (const clean of cleanups.reverse()) await clean().catch(() => {});
    await namespaceGone().catch(() => {});
    rmSync(work, { recursive: true, force: true });
  });

  it('the grant proof key lives in a Secret of the gateway\'s namespace, made by the gateway', async () => {
    const secret = await core().readNamespacedSecret({ namespace: NS, name: 'oversell-gateway-proof-key' });
    assert.ok(Buffer.from(Buffer.from(secret.data?.key ?? '', 'base64').toString(), 'base64').length >= 32);
  });

  it('`kubectl annotate` by a user with only nodes patch changes nothing: the forged raw of 1000 cores is ignored', async () => {
    const n = await node('e2e-trust-annotate');
    await userWith('node-labeller', [{ apiGroups: [''], resources: ['nodes'], verbs: ['get', 'list', 'patch'] }]);
    // The user may write metadata, and not status: the annotations land, status does not move.
    kubectl(['annotate', 'node', n.name, '--overwrite', `${ANNOTATION.grantedCpu}=4`, `${ANNOTATION.rawCpu}=1000`, `${ANNOTATION.rawMemory}=1Ei`], { user: 'node-labeller' });
    assert.throws(() => kubectl(['patch', 'node', n.name, '--subresource=status', '--type=merge', '-p', '{"status":{"allocatable":{"cpu":"4"}}}'], { user: 'node-labeller' }), /forbidden/i);
    for (let i = 0; i < 3; i++) {
      const stored = await n.heartbeat();
      assert.equal(cpuOf(stored), '8', 'still 2 x the kubelet\'s 4 cores, not 2 x 1000');
      assert.equal(stored.metadata?.annotations?.[ANNOTATION.rawCpu], '4');
      assert.equal(stored.status?.allocatable?.memory, '10Gi', '1.25 x the kubelet\'s 8Gi (the cap while learning)');
    }
  });

  it('a nodes/status write by another identity is not inflated, by the shipped matchCondition and by the gateway itself', async () => {
    const n = await node('e2e-trust-writer');
    await userWith('status-writer', [{ apiGroups: [''], resources: ['nodes', 'nodes/status'], verbs: ['get', 'patch'] }]);
    const write = () => JSON.parse(kubectl(['patch', 'node', n.name, '--subresource=status', '--type=merge', '-o', 'json', '-p', '{"status":{"allocatable":{"cpu":"3"}}}'], { user: 'status-writer' })) as V1Node;
    const notKubelet = async () => Number((await (await fetch(`http://127.0.0.1:${gateway.ports.metrics}/metrics`)).text())
      .match(/oversell_webhook_untouched_total\{reason="not-kubelet"\} (\S+)/)?.[1] ?? 0);
    const asked = await notKubelet();
    assert.equal(cpuOf(write()), '3', 'the shipped configuration does not send it: stored as written');
    assert.equal(await notKubelet(), asked, 'the shipped matchCondition kept it away from the gateway');
    // Without the matchCondition the gateway is asked, and refuses to inflate it itself.
    const config = (await objects().read({ apiVersion: 'admissionregistration.k8s.io/v1', kind: 'MutatingWebhookConfiguration', metadata: { name: WEBHOOK } })) as V1MutatingWebhookConfiguration;
    for (const hook of config.webhooks ?? []) if (hook.name === 'nodes.oversell.io') delete hook.matchConditions;
    await objects().replace(config);
    try {
      await eventually('the API server to send the write to the gateway', async () => {
        assert.equal(cpuOf(write()), '3', 'asked or not, the write is stored as written');
        return (await notKubelet()) > asked ? true : undefined;
      });
    } finally {
      await objects().delete({ apiVersion: 'admissionregistration.k8s.io/v1', kind: 'MutatingWebhookConfiguration', metadata: { name: WEBHOOK } });
      await installWebhook(webhookFromDeploy(gateway, WEBHOOK));
    }
    await eventually('the kubelet\'s own write inflated again (the API server reloads the configuration)', async () => (cpuOf(await n.heartbeat()) === '8' ? true : undefined));
  });

  it('a dry-run kubelet write is answered but changes nothing the gateway keeps', async () => {
    const n = await node('e2e-trust-dry');
    const rawGauge = async () => (await (await fetch(`http://127.0.0.1:${gateway.ports.metrics}/metrics`)).text())
      .match(new RegExp(`oversell_node_raw_allocatable\\{node="${n.name}",resource="cpu"\\} (\\S+)`))?.[1];
    assert.equal(await rawGauge(), '4');
    const dry = await kubeletPatchStatus(n.creds, n.name, kubeletStatus({ cpu: '64', memory: '8Gi' }), { dryRun: true });
    assert.equal(dry.status, 200, JSON.stringify(dry.body));
    assert.equal(cpuOf(dry.body), '128', 'the dry run gets the answer a real write would');
    assert.equal(await rawGauge(), '4', 'the gateway still holds the last real write');
    assert.equal(cpuOf(await core().readNode({ name: n.name })), '8');
  });

  it('an agent that lies about its pods decides nothing: bound requests come from the gateway\'s own watch', async () => {
    const n = await fakeNode('e2e-trust-liar', { labels: OPT_IN, raw: { cpu: '4', memory: '8Gi' } });
    nodes.push(n);
    cleanups.push(() => core().deleteNode({ name: n.name }));
    await bindPods(n, n.name, 3, '1', '2Gi');
    const podsFile = join(work, 'liar-pods.yaml');
    writeFileSync(podsFile, 'apiVersion: v1\nkind: Pod\nmetadata: { name: huge, namespace: x }\nspec: { containers: [{ name: a, image: a, resources: { requests: { cpu: "100", memory: 100Gi } } }] }\nstatus: { phase: Running }\n');
    await n.startAgent(gateway, ['--pods-file', podsFile]);
    // What the API server has bound there: our 3 cores, and a DaemonSet's pod if another test left one.
    const bound = await boundCpu(n.name);
    assert.ok(bound >= 3000n && bound < 4000n, `${bound}m bound`);
    const stored = await eventually('a decision from the liar\'s samples', async () => {
      const s = await n.heartbeat();
      return s.metadata?.annotations?.[ANNOTATION.reason]?.includes(`requests ${bound}m`) ? s : undefined;
    });
    assert.equal(cpuOf(stored), '8', 'the 3 cores the API server has bound, scaled within the cap; not the 100 the agent claims');
  });

  it('a review posted straight to the webhook, by anyone who reaches it, moves no node\'s gauges: they follow what the API server stored', async () => {
    const n = await node('e2e-trust-gauges');
    const rawCpu = () => scrapeMetric(gateway.ports.metrics, 'oversell_node_raw_allocatable', `{node="${n.name}",resource="cpu"}`);
    await eventually('the node\'s gauges from the node watch', async () => ((await rawCpu()) === 4 ? true : undefined));
    // A kubelet-shaped review for this node and for one that does not exist, claiming 1,000 cores each.
    for (const name of [n.name, 'e2e-trust-ghost']) {
      const r = kubeletReview(name);
      Object.assign(r.request.object.status.allocatable, { cpu: '1000', memory: '8Ti' });
      Object.assign(r.request.object.status.capacity, { cpu: '1000', memory: '8Ti' });
      const status = await new Promise<number>((resolve, reject) => {
        const req = request({ host: '127.0.0.1', port: gateway.ports.webhook, path: '/mutate/nodes', method: 'POST', ca: gateway.ca, headers: { 'content-type': 'application/json' } }, (res) => {
          res.resume().on('end', () => resolve(res.statusCode ?? 0));
        });
        req.on('error', reject);
        req.end(JSON.stringify(r));
      });
      assert.equal(status, 200, 'answered, as every review is');
    }
    assert.equal(await rawCpu(), 4, 'still the stored node\'s raw');
    assert.ok(Number.isNaN(await scrapeMetric(gateway.ports.metrics, 'oversell_node_raw_allocatable', '{node="e2e-trust-ghost",resource="cpu"}')), 'no series for a node the API server does not have');
  });

  it('a pod created with spec.nodeName counts past the cap only once the kubelet has admitted it', async () => {
    // kwok leaves this node alone: nothing admits its pods until the test writes their status as a kubelet would.
    const n = await fakeNode('e2e-trust-claim', { labels: OPT_IN, annotations: { 'kwok.x-k8s.io/node': 'unmanaged' }, raw: { cpu: '4', memory: '8Gi' } });
    nodes.push(n);
    cleanups.push(() => core().deleteNode({ name: n.name }));
    await n.startAgent(gateway);
    const claim = 'claim-64-cores';
    await core().createNamespacedPod({ namespace: NS, body: { ...pod(claim, '64', '256Mi', { nodeName: n.name }), metadata: { name: claim, namespace: NS } } });
    // No kubelet will finish its graceful deletion: remove it at once, before the namespace goes.
    cleanups.push(() => core().deleteNamespacedPod({ name: claim, namespace: NS, gracePeriodSeconds: 0 }));
    const held = await eventually('a decision that counts the unadmitted claim', async () => {
      const s = await n.heartbeat();
      return s.metadata?.annotations?.[ANNOTATION.reason]?.includes('requests 64000m') ? s : undefined;
    });
    assert.equal(cpuOf(held), '8', 'held at the cap of 2 x 4: an unadmitted 64-core claim does not lift the floor past it');
    assert.match(held.metadata?.annotations?.[ANNOTATION.reason] ?? '', /floor at the cap: the requests bound above it include pods the kubelet has not admitted/);
    // The kubelet admits it (its first container status, written through pods/status): now a restart must re-admit it.
    await core().patchNamespacedPodStatus(
      { name: claim, namespace: NS, body: { status: { phase: 'Pending', containerStatuses: [{ name: 'app', image: 'fake', imageID: '', ready: false, restartCount: 0, state: { waiting: { reason: 'ContainerCreating' } } }] } } },
      setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
    );
    const lifted = await eventually('the admitted claim holds the floor', async () => {
      const s = await n.heartbeat();
      return cpuOf(s) === '64' ? s : undefined;
    });
    assert.match(lifted.metadata?.annotations?.[ANNOTATION.reason] ?? '', /floor at bound requests, above the cap/);
  });

  it('bound requests above the cap (from the API server) hold allocatable above it, as a kubelet restart needs, and the node gets a Warning Event', async () => {
    const n = await node('e2e-trust-overcap');
    await bindPods(n, 'overcap', 5, '2', '256Mi');
    const bound = await boundCpu(n.name);
    assert.ok(bound >= 13_000n, `${bound}m bound`);
    const stored = await eventually('13 cpu or more bound', async () => {
      const s = await n.heartbeat();
      return s.metadata?.annotations?.[ANNOTATION.reason]?.includes(`requests ${bound}m`) ? s : undefined;
    });
    assert.equal(cpuOf(stored), formatMilli(bound), 'more bound than the cap of 2 x 4: the floor is what is bound');
    assert.match(stored.metadata?.annotations?.[ANNOTATION.reason] ?? '', /floor at bound requests, above the cap/);
    const event = await eventually('a BoundRequestsOverCap Event on the node', async () => {
      const list = await core().listNamespacedEvent({ namespace: 'default', fieldSelector: `involvedObject.kind=Node,involvedObject.name=${n.name},reason=BoundRequestsOverCap` });
      return list.items[0];
    }, 30_000);
    assert.equal(event.type, 'Warning');
    assert.match(event.message ?? '', /exceed the oversell cap for cpu/);
    cleanups.push(() => core().deleteNamespacedEvent({ namespace: 'default', name: event.metadata?.name ?? '' }));
  });
});
