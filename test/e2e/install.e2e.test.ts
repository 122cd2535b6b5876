// Installing for real: certificates bootstrapped by the gateway into a Secret
// and injected into the webhook (the API server then trusts it with no manual
// step), two gateway replicas sharing that Secret, and agents that find every
// replica through EndpointSlices, so losing one loses nothing.
import { SUMMARY_SEND_EVERY_MS } from '../../gateway/config/defaults.js';
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { AdmissionregistrationV1Api, AppsV1Api, DiscoveryV1Api, type CoreV1Event, type V1MutatingWebhookConfiguration } from '@kubernetes/client-node';
import { ANNOTATION } from '../../gateway/admit/node-review.js';
import { DEFAULT_POLICY } from '../../gateway/decide/policy.js';
import { getNode, queryClient } from '../helpers/grpc.js';
import { join } from 'node:path';
import { ADMIN_KUBECONFIG, REPO, adminConfig, cluster, core, objects } from './cluster.js';
import {
  ensureNamespace, eventually, fakeNode, GI, installWebhook, OPT_IN, pod, removeInstallLeftovers, removeWebhook, routeTo, UNAUTHENTICATED_AGENTS, webhookFromDeploy, type FakeNode,
} from './fixtures.js';
import { freePort, run, type Proc } from './processes.js';

const NS = 'oversell';
const SECRET = 'oversell-gateway-tls';
const WEBHOOK = 'oversell-install-e2e';
const SERVICE = 'oversell-gateway-agents';

interface Replica extends Proc {
  ports: { webhook: number; grpc: number; agent: number; metrics: number };
}

async function replica(name: string): Promise<Replica> {
  return replicaFor(name, WEBHOOK);
}

async function replicaFor(name: string, webhookConfiguration: string): Promise<Replica> {
  const ports = { webhook: await freePort(), grpc: await freePort(), agent: await freePort(), metrics: await freePort() };
  const proc = run(`install-${name}`, 'gateway', [
    '--bind-address', '127.0.0.1',
    '--webhook-port', String(ports.webhook), '--grpc-port', String(ports.grpc), '--agent-port', String(ports.agent), '--metrics-port', String(ports.metrics),
    '--kubeconfig', ADMIN_KUBECONFIG, '--policies', 'flags', '--lease-namespace', NS, '--identity', name,
    '--tls-secret', `${NS}/${SECRET}`, '--webhook-configuration', webhookConfiguration,
    ...UNAUTHENTICATED_AGENTS,
  ]);
  await proc.waitFor(/gateway serving/);
  return { ...proc, ports };
}

/**
 * What the EndpointSlice controller would publish for pod IPs. The API server
 * refuses loopback addresses in EndpointSlices, and test servers listen on
 * 127.0.0.1 only, so these are TEST-NET addresses nobody answers on: the test
 * checks which replicas the agent follows, not that it reaches them.
 */
async function publishSlices(ips: string[]): Promise<void> {
  const api = adminConfig().makeApiClient(DiscoveryV1Api);
  const existing = await api.listNamespacedEndpointSlice({ namespace: NS, labelSelector: `kubernetes.io/service-name=${SERVICE}` });
  for (const s of existing.items) await api.deleteNamespacedEndpointSlice({ namespace: NS, name: s.metadata?.name ?? '' });
  for (const ip of ips) {
    await api.createNamespacedEndpointSlice({
      namespace: NS,
      body: {
        metadata: { name: `${SERVICE}-${ip.replaceAll('.', '-')}`, labels: { 'kubernetes.io/service-name': SERVICE } },
        addressType: 'IPv4',
        endpoints: [{ addresses: [ip], conditions: { ready: true } }],
        ports: [{ name: 'grpc', port: 50051, protocol: 'TCP' }],
      },
    });
  }
}

const webhookApi = () => adminConfig().makeApiClient(AdmissionregistrationV1Api);
let a: Replica;
let b: Replica;
let node: FakeNode;
let spread: FakeNode | undefined;
let appliedDeploy = false;
let agent: Proc;

describe('install: certificates without manual steps, and two replicas', { timeout: 10 * 60_000 }, () => {
  before(async () => {
    await ensureNamespace(NS);
    await core().deleteNamespacedSecret({ namespace: NS, name: SECRET }).catch(() => {});
  });

  after(async () => {
    await agent?.kill();
    await node?.stop();
    await spread?.stop();
    await a?.kill();
    await b?.kill();
    await removeWebhook(WEBHOOK).catch(() => {});
    // A failed install test must not leave the installed webhooks (the required-pods entry fails closed) to the next test file.
    if (appliedDeploy) {
      try {
        cluster('kubectl', 'delete', '-k', join(REPO, 'deploy'), '--wait=false', '--ignore-not-found');
      } catch { /* some kinds already gone (the CRD before its policy): the rest is deleted below */ }
      // Whatever kubectl left (it stops at the first kind it cannot map), by name: the next file creates its own webhooks.
      await removeInstallLeftovers().catch(() => {});
    }
  });

  it('the first replica creates the Secret and injects its CA; the second serves the same certificate', async () => {
    // The webhook as installed: no caBundle yet.
    const config = webhookFromDeploy({ ports: { webhook: 1, grpc: 0, metrics: 0 }, ca: '' } as never, WEBHOOK);
    for (const h of config.webhooks ?? []) delete h.clientConfig.caBundle;
    await installWebhook(config);
    a = await replica('replica-a');
    const secret = await core().readNamespacedSecret({ namespace: NS, name: SECRET });
    const ca = Buffer.from(secret.data?.['ca.crt'] ?? '', 'base64').toString();
    assert.match(ca, /BEGIN CERTIFICATE/);
    for (const key of ['ca.key', 'tls.crt', 'tls.key']) assert.ok(secret.data?.[key], `${key} in the Secret`);
    const stored = await eventually('the caBundle to be injected', async () => {
      const c: V1MutatingWebhookConfiguration = await webhookApi().readMutatingWebhookConfiguration({ name: WEBHOOK });
      return c.webhooks?.every((w) => w.clientConfig.caBundle === Buffer.from(ca).toString('base64')) ? c : undefined;
    });
    assert.ok(stored.webhooks?.length);
    b = await replica('replica-b');
    const again = await core().readNamespacedSecret({ namespace: NS, name: SECRET });
    assert.equal(again.metadata?.resourceVersion, secret.metadata?.resourceVersion, 'the second replica reused the Secret');
  });

  it('the API server trusts the injected CA: kubelet writes through it get inflated', async () => {
    // Point the webhook at replica A by URL (in a cluster the Service does this), keeping the injected caBundle.
    const c = await webhookApi().readMutatingWebhookConfiguration({ name: WEBHOOK });
    await webhookApi().replaceMutatingWebhookConfiguration({ name: WEBHOOK, body: routeTo(c, a.ports.webhook) });
    node = await fakeNode('e2e-install-ha', { labels: OPT_IN, usage: { cpuMillicores: 200, memoryWorkingSetBytes: 1 * GI } });
    for (let i = 0; i < 3; i++) await core().createNamespacedPod({ namespace: 'default', body: pod(`install-ha-${i}`, '1', '1Gi', { nodeName: node.name }) });
    agent = run('agent-e2e-install-ha', 'agent', [
      '--node-name', node.name, '--gateway', `127.0.0.1:${a.ports.agent},127.0.0.1:${b.ports.agent}`, '--kubeconfig', ADMIN_KUBECONFIG,
      '--proc-root', node.host.procRoot, '--cgroup-root', node.host.cgroupRoot, '--metrics-address', '127.0.0.1:0', '--interval', '500ms',
    ]);
    // The pods were bound just now: rises wait out the startup grace first, then the next heartbeat.
    const inflated = await eventually('inflated through replica A', async () => {
      const s = await node.heartbeat();
      return s.status?.allocatable?.cpu === '8' ? s : undefined;
    }, DEFAULT_POLICY.startupGraceMs + 30_000);
    assert.equal(inflated.metadata?.annotations?.[ANNOTATION.rawCpu], '4');
  });

  it('the agent streams to both replicas; with one killed, the other answers with current data', async () => {
    for (const r of [a, b]) {
      await eventually(`data at ${r.ports.grpc}`, async () => ((await getNode(queryClient(r.ports.grpc), node.name)).window?.samples ?? 0) >= 2 || undefined);
    }
    await a.kill('SIGKILL');
    const fresh = await getNode(queryClient(b.ports.grpc), node.name);
    // A steady node's agent sends at least every --agent-send-every (20 s with summaries, the default).
    assert.ok(fresh.ageMs < SUMMARY_SEND_EVERY_MS + 2000, `replica B's data is ${fresh.ageMs} ms old`);
    // The Service now routes to B: the very next kubelet write is inflated, no warm-up.
    const c = await webhookApi().readMutatingWebhookConfiguration({ name: WEBHOOK });
    await webhookApi().replaceMutatingWebhookConfiguration({ name: WEBHOOK, body: routeTo(c, b.ports.webhook) });
    await new Promise((r) => setTimeout(r, 1000)); // the API server picks up the configuration change
    const s = await node.heartbeat();
    assert.equal(s.status?.allocatable?.cpu, '8');
  });

  it('an agent with --gateway-discovery follows the Service\'s EndpointSlices', async () => {
    await publishSlices(['192.0.2.10', '192.0.2.11']);
    const follower = run('agent-e2e-discovery', 'agent', [
      '--node-name', 'e2e-discovery', '--gateway-discovery', `${NS}/${SERVICE}`, '--kubeconfig', ADMIN_KUBECONFIG,
      '--proc-root', node.host.procRoot, '--cgroup-root', node.host.cgroupRoot, '--metrics-address', '127.0.0.1:0',
    ]);
    try {
      const both = await follower.waitFor(/gateway replicas changed/);
      assert.deepEqual(both.addresses, ['192.0.2.10:50051', '192.0.2.11:50051']);
      await publishSlices(['192.0.2.11']);
      const gone = await follower.waitFor(/gateway replica gone/);
      assert.equal(gone.gateway, '192.0.2.10:50051');
    } finally {
      await follower.kill();
    }
  });
  it('kubectl apply -k deploy/ installs (one agent pod per node, caBundle injected); kubectl delete -k removes it and the next kubelet write is raw', async () => {
    const kubectl = (...args: string[]) => cluster('kubectl', ...args);
    // Our test webhook goes first: from now on only the installed one acts.
    await removeWebhook(WEBHOOK);
    // Two untainted nodes before the install: the gateway's replicas spread over
    // the nodes it may use (the real node's taint keeps it out, nodeTaintsPolicy
    // Honor), so with two there they land one on each.
    spread = await fakeNode('e2e-install-spread', { labels: OPT_IN });
    try {
      kubectl('apply', '--server-side', '-k', join(REPO, 'deploy'));
    } catch {
      // On a cluster without the CRD the first apply may send the policy before the CRD is established (docs/install.md: run it again).
      kubectl('wait', '--for=condition=Established', '--timeout=60s', 'crd/oversellpolicies.oversell.io');
      kubectl('apply', '--server-side', '-k', join(REPO, 'deploy'));
    }
    appliedDeploy = true;
    const nodeNames = (await core().listNode()).items.map((n) => n.metadata?.name ?? '').sort();
    // 25 s for the whole test on a warm machine; a cold controller-manager has been seen to take longer.
    const agents = await eventually('one agent pod per node', async () => {
      const pods = (await core().listNamespacedPod({ namespace: NS, labelSelector: 'app.kubernetes.io/name=oversell-agent' })).items;
      const on = pods.map((p) => p.spec?.nodeName ?? '').filter(Boolean).sort();
      return on.length === nodeNames.length ? on : undefined;
    }, 120_000).catch(async (err: Error) => {
      // Say what the DaemonSet controller did, so a failure here can be read from the CI log.
      const ds = await adminConfig().makeApiClient(AppsV1Api).readNamespacedDaemonSet({ namespace: NS, name: 'oversell-agent' }).catch((e: Error) => e.message);
      const events = (await core().listNamespacedEvent({ namespace: NS }).catch(() => ({ items: [] as CoreV1Event[] }))).items.map((e) => `${e.involvedObject.kind}/${e.involvedObject.name}: ${e.reason} ${e.message}`);
      throw new Error(`${err.message}; nodes ${nodeNames.join(', ')}; DaemonSet status ${JSON.stringify(typeof ds === 'string' ? ds : ds.status)}; events:\n${events.join('\n')}`);
    });
    assert.deepEqual(agents, nodeNames);
    // The gateway's replicas run on different nodes wherever there are two (DoNotSchedule, maxSkew 1).
    const gatewayNodes = await eventually('both gateway replicas scheduled', async () => {
      const pods = (await core().listNamespacedPod({ namespace: NS, labelSelector: 'app.kubernetes.io/name=oversell-gateway' })).items;
      const on = pods.filter((p) => !p.metadata?.deletionTimestamp).map((p) => p.spec?.nodeName ?? '');
      return on.length === 2 && on.every(Boolean) ? on : undefined;
    }, 60_000);
    assert.notEqual(gatewayNodes[0], gatewayNodes[1], `both gateway replicas on ${gatewayNodes[0]}`);
    // A replica as the installed Deployment runs it (its pods are kwok's fakes): it injects our CA into "oversell".
    const installed = await replicaFor('replica-c', 'oversell');
    try {
      const secret = await core().readNamespacedSecret({ namespace: NS, name: SECRET });
      const config = await eventually('the caBundle in the installed webhook', async () => {
        const c = await webhookApi().readMutatingWebhookConfiguration({ name: 'oversell' });
        return c.webhooks?.every((w) => w.clientConfig.caBundle === secret.data?.['ca.crt']) ? c : undefined;
      });
      // No kube-proxy here: route the installed webhook to a live replica by URL, as the Service would.
      await webhookApi().replaceMutatingWebhookConfiguration({ name: 'oversell', body: routeTo(config, b.ports.webhook) });
      await eventually('inflated through the installed webhook', async () => ((await node.heartbeat()).status?.allocatable?.cpu === '8' ? true : undefined));
    } finally {
      await installed.kill();
    }
    kubectl('delete', '-k', join(REPO, 'deploy'), '--wait=false', '--ignore-not-found');
    const raw = await eventually('raw allocatable after uninstall', async () => {
      const s = await node.heartbeat();
      return s.status?.allocatable?.cpu === '4' ? s : undefined;
    });
    assert.equal(raw.status?.allocatable?.memory, '8Gi');
    await eventually('the namespace and the CRD to be gone', async () => {
      const ns = await core().readNamespace({ name: NS }).then(() => true, () => false);
      const crd = await objects().read({ apiVersion: 'apiextensions.k8s.io/v1', kind: 'CustomResourceDefinition', metadata: { name: 'oversellpolicies.oversell.io' } }).then(() => true, () => false);
      const hook = await webhookApi().readMutatingWebhookConfiguration({ name: 'oversell' }).then(() => true, () => false);
      return !ns && !crd && !hook ? true : undefined;
    }, 90_000);
  });

});
