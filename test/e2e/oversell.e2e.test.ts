// End to end against a real kube-apiserver, controller-manager, scheduler and
// kwok (scripts/cluster/cluster.sh), with oversell's real binaries as processes.
// Run through `npm run test:e2e`, which brings the cluster up and down.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { loadAllYaml, PatchStrategy, type KubernetesObject, type V1DaemonSet, type V1MutatingWebhookConfiguration, type V1Node } from '@kubernetes/client-node';
import { ANNOTATION } from '../../gateway/admit/node-review.js';
import { REPO, core, kubeletCredentials, kubeletRegister, kubeletStatus, objects } from './cluster.js';
import { GI, OPT_IN, eventually, fakeNode, hookNamed, installWebhook, pod, podsOn, removeInstallLeftovers, removeWebhook, startGatewayProcess, webhookFromDeploy, type FakeNode, type GatewayProc } from './fixtures.js';

let gateway: GatewayProc;
const WEBHOOK = 'oversell-e2e';
const nodes: FakeNode[] = [];

async function node(name: string, opts: Parameters<typeof fakeNode>[1] = {}): Promise<FakeNode> {
  const n = await fakeNode(name, opts);
  nodes.push(n);
  return n;
}

async function bindPods(n: FakeNode, prefix: string, count: number, cpu: string, memory: string): Promise<void> {
  for (let i = 0; i < count; i++) {
    await core().createNamespacedPod({ namespace: 'default', body: pod(`${prefix}-${i}`, cpu, memory, { nodeName: n.name }) });
  }
}

const alloc = (n: V1Node) => ({ cpu: n.status?.allocatable?.cpu, memory: n.status?.allocatable?.memory });

describe('oversell on a real control plane', { timeout: 15 * 60_000 }, () => {
  before(async () => {
    gateway = await startGatewayProcess();
  });
  after(async () => {
    for (const n of nodes) await n.stop();
    await gateway?.kill();
    await removeWebhook(WEBHOOK).catch(() => {});
    // Test 8 applies the namespace, the CRD and the agent DaemonSet for real.
    await removeInstallLeftovers().catch((err: Error) => console.log(`# cleanup: ${err.message}`));
  });

  it('1. registers the webhook from deploy/: Ignore, short timeout, opt-in by label, status UPDATE + node CREATE', async () => {
    const created = await installWebhook(webhookFromDeploy(gateway, WEBHOOK));
    const stored = (await objects().read({
      apiVersion: 'admissionregistration.k8s.io/v1', kind: 'MutatingWebhookConfiguration', metadata: { name: created.metadata?.name ?? '' },
    })) as V1MutatingWebhookConfiguration;
    const hook = hookNamed(stored, 'nodes.oversell.io');
    assert.equal(hook.failurePolicy, 'Ignore');
    assert.ok((hook.timeoutSeconds ?? 10) <= 5, `timeoutSeconds ${hook.timeoutSeconds}`);
    assert.equal(hook.sideEffects, 'NoneOnDryRun', 'it records what real writes show, never what a dry run shows');
    assert.deepEqual(hook.objectSelector?.matchLabels, OPT_IN);
    const rules = (hook.rules ?? []).map((r) => `${r.operations?.join('+')} ${r.resources?.join('+')}`).sort();
    assert.deepEqual(rules, ['CREATE nodes', 'UPDATE nodes/status']);
    assert.match(hook.clientConfig.url ?? '', /^https:\/\/127\.0\.0\.1:\d+\/mutate\/nodes$/);
  });

  it('2. kubelet status patches get inflated allocatable, raw kept in annotations, stable across many patches', async () => {
    const n = await node('e2e-inflate', { labels: OPT_IN, usage: { cpuMillicores: 200, memoryWorkingSetBytes: 1 * GI } });
    // Pods bound to the node give the policy requests to scale: 3 cpu, 6Gi of 4 cpu, 8Gi.
    await bindPods(n, 'inflate', 3, '1', '2Gi');
    await n.startAgent(gateway);
    const inflated = await eventually('inflated allocatable on e2e-inflate', async () => {
      const stored = await n.heartbeat();
      return stored.status?.allocatable?.cpu === '8' ? stored : undefined;
    });
    assert.equal(inflated.metadata?.annotations?.[ANNOTATION.rawCpu], '4');
    assert.equal(inflated.metadata?.annotations?.[ANNOTATION.rawMemory], '8Gi');
    assert.equal(inflated.status?.allocatable?.memory, '10Gi'); // the default cap while learning (no load history yet), 1.25 x 8Gi
    assert.equal(inflated.status?.allocatable?.pods, '110');
    assert.match(inflated.metadata?.annotations?.[ANNOTATION.reason] ?? '', /cpu 4000m->8000m \(capped at 2x raw/);
    // The kubelet keeps writing its raw value; the stored value must not drift or compound.
    for (let i = 0; i < 8; i++) {
      const stored = await n.heartbeat();
      assert.deepEqual(alloc(stored), { cpu: '8', memory: '10Gi' }, `patch ${i}`);
      assert.equal(stored.metadata?.annotations?.[ANNOTATION.rawCpu], '4');
      await new Promise((r) => setTimeout(r, 250));
    }
  });

  it('3. the scheduler places more pods on an oversold node than on an identical plain one', async () => {
    const pool = { 'e2e-pool': 'sched' };
    const oversold = await node('e2e-sched-oversold', { labels: { ...OPT_IN, ...pool } });
    const plain = await node('e2e-sched-plain', { labels: pool });
    await oversold.startAgent(gateway);
    await plain.startAgent(gateway);
    // An empty node is not inflated (no requests to scale): both start at raw. As
    // pods land, the oversold node's requests rise and the kubelet's next write
    // inflates it; the scheduler retries the pending pods on that node update.
    assert.equal((await plain.heartbeat()).status?.allocatable?.cpu, '4');
    // Keep both kubelets writing while pods land, as real ones would.
    const loop = setInterval(() => void Promise.allSettled([oversold.heartbeat(), plain.heartbeat()]), 2000);
    try {
      for (let i = 0; i < 14; i++) await core().createNamespacedPod({ namespace: 'default', body: pod(`sched-${i}`, '1', '512Mi', { nodeSelector: pool }) });
      const placed = await eventually('the scheduler to place 12 pods', async () => {
        const [a, b] = [(await podsOn(oversold.name)).length, (await podsOn(plain.name)).length];
        return a + b >= 12 ? { oversold: a, plain: b } : undefined;
      }, 60_000);
      assert.equal(placed.plain, 4, 'the plain node holds what its raw allocatable allows');
      assert.equal(placed.oversold, 8, 'the oversold node holds up to its 2x cap');
    } finally {
      clearInterval(loop);
      // Its pods too, even when it failed: a later run on the same cluster creates them again by name.
      for (let i = 0; i < 14; i++) await core().deleteNamespacedPod({ name: `sched-${i}`, namespace: 'default', gracePeriodSeconds: 0 }).catch(() => {});
    }
  });

  it('4. a node registering itself (CREATE with status, as system:node:<name>) is inflated on CREATE', async () => {
    const n = await node('e2e-register', { labels: OPT_IN, create: false });
    // Pods already assigned to the node's name (as after a node replacement) give it requests.
    await bindPods(n, 'register', 3, '1', '1Gi');
    await n.startAgent(gateway); // usage streams before the node exists, as on a real boot
    await new Promise((r) => setTimeout(r, 1500));
    const res = await kubeletRegister(kubeletCredentials(n.name), {
      apiVersion: 'v1',
      kind: 'Node',
      metadata: { name: n.name, labels: { ...OPT_IN, 'kubernetes.io/hostname': n.name }, annotations: { 'kwok.x-k8s.io/node': 'fake' } },
      status: kubeletStatus(n.raw) as V1Node['status'],
    });
    assert.equal(res.status, 201, JSON.stringify(res.body));
    assert.ok(Number.parseInt(res.body.status?.allocatable?.cpu ?? '0', 10) > 4, `registered with ${JSON.stringify(alloc(res.body))}`);
    assert.equal(res.body.metadata?.annotations?.[ANNOTATION.rawCpu], '4');
  });

  it('5. when the agent stops, the next kubelet patch after staleAfter leaves max(raw, bound requests)', async () => {
    const n = await node('e2e-stale', { labels: OPT_IN });
    // 6 cpu bound on a 4 cpu node, as an inflated node can hold.
    await bindPods(n, 'stale', 6, '1', '256Mi');
    await n.startAgent(gateway);
    await eventually('inflated', async () => ((await n.heartbeat()).status?.allocatable?.cpu === '8' ? true : undefined));
    await eventually('the agent to report 6 cpu of requests', async () => {
      const stored = await n.heartbeat();
      return /requests 6000m/.test(stored.metadata?.annotations?.[ANNOTATION.reason] ?? '') ? true : undefined;
    });
    await n.agent?.kill('SIGKILL');
    const after = await eventually('stale data to stop the inflation', async () => {
      const stored = await n.heartbeat();
      return stored.status?.allocatable?.cpu !== '8' ? stored : undefined;
    }, 20_000);
    assert.equal(after.status?.allocatable?.cpu, '6', 'floor at bound requests, above raw 4');
    assert.equal(after.status?.allocatable?.memory, '8Gi', 'memory: bound 1.5Gi < raw, so raw');
    assert.match(after.metadata?.annotations?.[ANNOTATION.reason] ?? '', /staleAfter 6s/);
  });

  it('6. the gateway is killed: kubelet patches still succeed and fall back to raw; inflation resumes when it returns', async () => {
    const n = await node('e2e-gateway-down', { labels: OPT_IN });
    await bindPods(n, 'gateway-down', 2, '1', '1Gi');
    await n.startAgent(gateway);
    await eventually('inflated', async () => ((await n.heartbeat()).status?.allocatable?.cpu === '8' ? true : undefined));
    const ports = gateway.ports;
    await gateway.kill('SIGKILL');
    const started = Date.now();
    const down = await n.heartbeat(); // throws unless 200
    assert.ok(Date.now() - started < 5000, 'a heartbeat must not wait on a dead webhook beyond its timeout');
    assert.deepEqual(alloc(down), { cpu: '4', memory: '8Gi' });
    gateway = await startGatewayProcess(ports);
    const back = await eventually('inflation after the gateway returned', async () => {
      const stored = await n.heartbeat();
      return stored.status?.allocatable?.cpu === '8' ? stored : undefined;
    }, 30_000);
    assert.equal(back.metadata?.annotations?.[ANNOTATION.rawCpu], '4');
  });

  it('7. unlabelled nodes and the control-plane node are never touched', async () => {
    const plain = await node('e2e-untouched', {});
    const cp = await node('e2e-control-plane', {
      labels: { 'node-role.kubernetes.io/control-plane': '' },
      taints: [{ key: 'node-role.kubernetes.io/control-plane', effect: 'NoSchedule' }],
    });
    // Requests that would inflate an opted-in node.
    await bindPods(plain, 'untouched', 3, '1', '1Gi');
    await bindPods(cp, 'control-plane', 3, '1', '1Gi');
    await plain.startAgent(gateway);
    await cp.startAgent(gateway);
    await new Promise((r) => setTimeout(r, 1500)); // the gateway has their data
    for (let i = 0; i < 3; i++) {
      for (const n of [plain, cp]) {
        const stored = await n.heartbeat();
        assert.deepEqual(alloc(stored), { cpu: '4', memory: '8Gi' });
        assert.equal(Object.keys(stored.metadata?.annotations ?? {}).filter((k) => k.startsWith('oversell.io/')).length, 0);
      }
    }
  });

  it('8. every manifest in deploy/ passes a server-side dry-run apply; the DaemonSet gets one agent pod per node', async () => {
    const api = objects();
    const base = join(REPO, 'deploy/base');
    const docs = readdirSync(base)
      .filter((f) => f.endsWith('.yaml') && f !== 'kustomization.yaml')
      .flatMap((f) => loadAllYaml(readFileSync(join(base, f), 'utf8')) as KubernetesObject[]);
    // What other objects need to exist first: the namespace, and the CRD for the default policy.
    const namespace = docs.find((d) => d.kind === 'Namespace');
    const crd = docs.find((d) => d.kind === 'CustomResourceDefinition');
    assert.ok(namespace && crd);
    await api.patch(namespace, undefined, undefined, 'oversell-e2e', true, PatchStrategy.ServerSideApply);
    await api.patch(crd, undefined, undefined, 'oversell-e2e', true, PatchStrategy.ServerSideApply);
    await eventually('the CRD to be established', async () => {
      const got = (await api.read({ apiVersion: 'apiextensions.k8s.io/v1', kind: 'CustomResourceDefinition', metadata: { name: crd.metadata?.name ?? '' } })) as { status?: { conditions?: Array<{ type: string; status: string }> } };
      return got.status?.conditions?.some((c) => c.type === 'Established' && c.status === 'True') ? true : undefined;
    });
    for (const doc of docs) {
      // Test 1 registered the webhook by URL under the same name; a dry-run of the
      // service-based manifest over it would merge both clientConfigs. Check it under its own name.
      const checked = doc.kind === 'MutatingWebhookConfiguration' ? { ...doc, metadata: { ...doc.metadata, name: 'oversell-dry-run' } } : doc;
      await assert.doesNotReject(
        api.patch(checked, undefined, 'All', 'oversell-e2e', true, PatchStrategy.ServerSideApply),
        `${doc.kind}/${doc.metadata?.name} refused by a dry-run apply`,
      );
    }
    // The Helm chart too, in its self-managed mode: every rendered object passes a server-side dry run.
    const helm = spawnSync('bash', [join(REPO, 'test/deploy/build-helm.sh'), '--print-path'], { encoding: 'utf8' }).stdout.trim();
    if (helm && existsSync(helm)) {
      const rendered = spawnSync(helm, ['template', 'oversell', join(REPO, 'deploy/helm/oversell'), '--namespace', 'oversell'], { encoding: 'utf8' });
      assert.equal(rendered.status, 0, rendered.stderr);
      const objectsFromHelm = (loadAllYaml(rendered.stdout) as KubernetesObject[]).filter(Boolean);
      assert.ok(objectsFromHelm.length > 10, `helm rendered ${objectsFromHelm.length} objects`);
      for (const doc of objectsFromHelm) {
        const checked = doc.kind === 'MutatingWebhookConfiguration' ? { ...doc, metadata: { ...doc.metadata, name: 'oversell-helm-dry-run' } } : doc;
        if (!checked.metadata?.namespace && doc.kind !== 'Namespace' && !['ClusterRole', 'ClusterRoleBinding', 'MutatingWebhookConfiguration', 'OversellPolicy', 'CustomResourceDefinition'].includes(doc.kind ?? '')) {
          checked.metadata = { ...checked.metadata, namespace: 'oversell' };
        }
        await assert.doesNotReject(
          api.patch(checked, undefined, 'All', 'oversell-e2e-helm', true, PatchStrategy.ServerSideApply),
          `helm: ${doc.kind}/${doc.metadata?.name} refused by a dry-run apply`,
        );
      }
    } else {
      console.log('# helm not built (test/deploy/build-helm.sh): skipping the chart dry run');
    }
    // For real: what the agent pods need, then the DaemonSet.
    for (const doc of docs.filter((d) => d.kind === 'ServiceAccount' || d.kind === 'DaemonSet')) {
      await api.patch(doc, undefined, undefined, 'oversell-e2e', true, PatchStrategy.ServerSideApply);
    }
    const nodeNames = (await core().listNode()).items.map((n) => n.metadata?.name ?? '').sort();
    const agents = await eventually('one agent pod per node', async () => {
      const pods = (await core().listNamespacedPod({ namespace: 'oversell', labelSelector: 'app.kubernetes.io/name=oversell-agent' })).items;
      const on = pods.map((p) => p.spec?.nodeName ?? '').filter(Boolean).sort();
      return on.length === nodeNames.length ? on : undefined;
    }, 60_000);
    assert.deepEqual(agents, nodeNames);
    const ds = (await api.read({ apiVersion: 'apps/v1', kind: 'DaemonSet', metadata: { name: 'oversell-agent', namespace: 'oversell' } })) as V1DaemonSet;
    assert.equal(ds.status?.desiredNumberScheduled, nodeNames.length);
  });
});
