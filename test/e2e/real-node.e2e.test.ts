// The real node of the local cluster (scripts/cluster/realnode.sh): a kubelet
// with containerd, runc and a CNI bridge runs real pods; they reach the API
// server through the `kubernetes` Service (kube-proxy); their cgroups are under
// the kubelet's cgroup root. Skipped when the cluster runs without it
// (OVERSELL_REAL_NODE=0).
import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { V1Node, V1Pod } from '@kubernetes/client-node';
import { core } from './cluster.js';
import { eventually } from './fixtures.js';
import { REAL_NODE_LABEL as LABEL, findRealNode, podInPhase, realNodePod } from './real-node.js';

const NS = 'default';
const created: string[] = [];
const SERVICE = 'real-node-web';
let node: V1Node | undefined;

async function create(pod: V1Pod): Promise<V1Pod> {
  created.push(pod.metadata!.name!);
  return core().createNamespacedPod({ namespace: NS, body: pod });
}

/** The kubelet's cgroup root for CPU (cgroup v1 hierarchy here, or the unified one). */
function cpuCgroupRoot(): string {
  for (const d of ['/sys/fs/cgroup/cpu', '/sys/fs/cgroup/cpu,cpuacct', '/sys/fs/cgroup']) {
    if (existsSync(join(d, 'kubepods'))) return d;
  }
  throw new Error('no kubepods cgroup under /sys/fs/cgroup');
}

describe('the real node', { timeout: 5 * 60_000 }, () => {
  before(async () => {
    node = await findRealNode();
  });

  after(async () => {
    for (const name of created) await core().deleteNamespacedPod({ namespace: NS, name, gracePeriodSeconds: 0 }).catch(() => {});
    await core().deleteNamespacedService({ namespace: NS, name: SERVICE }).catch(() => {});
  });

  it('is Ready, runs kubelet v1.36.3 on containerd, is tainted for opt-in tests and not opted in to oversell', async (t) => {
    if (!node) return t.skip('no real node in this cluster (OVERSELL_REAL_NODE=0)');
    const ready = await eventually('the real node Ready', async () => {
      const n = await core().readNode({ name: node!.metadata!.name! });
      return n.status?.conditions?.find((c) => c.type === 'Ready')?.status === 'True' ? n : undefined;
    }, 60_000);
    assert.equal(ready.status?.nodeInfo?.kubeletVersion, 'v1.36.3');
    assert.match(ready.status?.nodeInfo?.containerRuntimeVersion ?? '', /^containerd:\/\//);
    const taints = (ready.spec?.taints ?? []).filter((x) => x.key === LABEL).map(({ key, value, effect }) => ({ key, value, effect }));
    assert.deepEqual(taints, [{ key: LABEL, value: 'true', effect: 'NoSchedule' }]);
    assert.equal(ready.metadata?.labels?.['oversell.io/enabled'], undefined);
    assert.match(ready.status?.addresses?.find((a) => a.type === 'InternalIP')?.address ?? '', /^198\.18\./);
  });

  it('a pod reaches the API server through the kubernetes Service ClusterIP (kube-proxy) with its service account', async (t) => {
    if (!node) return t.skip('no real node in this cluster (OVERSELL_REAL_NODE=0)');
    const svc = await core().readNamespacedService({ namespace: 'default', name: 'kubernetes' });
    assert.match(svc.spec?.clusterIP ?? '', /^198\.19\./);
    const pod = await create(realNodePod('real-node-apicheck', ['apicheck', '-timeout', '60s']));
    const done = await podInPhase(NS, pod.metadata!.name!, ['Succeeded', 'Failed']);
    // Logs come from the kubelet through the API server (its kubelet client cert).
    const log = await core().readNamespacedPodLog({ namespace: NS, name: pod.metadata!.name! });
    assert.equal(done.status?.phase, 'Succeeded', log);
    assert.match(log, new RegExp(`GET https://${svc.spec!.clusterIP!.replaceAll('.', '\\.')}:443/version -> 200`));
    assert.match(log, /"gitVersion": "v1\.36\.3"/);
    assert.equal(done.spec?.nodeName, node.metadata?.name);
    assert.match(done.status?.podIP ?? '', /^198\.18\./);
    // The container ran in the pod's cgroup under the kubelet's root (QoS besteffort).
    assert.match(log, new RegExp(`:/kubepods/besteffort/pod${done.metadata!.uid}/`));
  });

  it("a running pod's cgroup is under the kubelet's cgroup root, with its CPU limit applied", async (t) => {
    if (!node) return t.skip('no real node in this cluster (OVERSELL_REAL_NODE=0)');
    const p = await create(realNodePod('real-node-sleep', ['sleep', '600'], { resources: { requests: { cpu: '100m', memory: '32Mi' }, limits: { cpu: '200m', memory: '64Mi' } } }));
    const running = await podInPhase(NS, p.metadata!.name!, ['Running']);
    const dir = join(cpuCgroupRoot(), 'kubepods', 'burstable', `pod${running.metadata!.uid}`);
    assert.ok(existsSync(dir), `${dir} exists`);
    if (existsSync(join(dir, 'cpu.cfs_quota_us'))) {
      // cgroup v1: 200m = 20000 us per 100000 us period.
      assert.equal(readFileSync(join(dir, 'cpu.cfs_quota_us'), 'utf8').trim(), '20000');
    } else {
      assert.match(readFileSync(join(dir, 'cpu.max'), 'utf8'), /^20000 100000/);
    }
    await core().deleteNamespacedPod({ namespace: NS, name: p.metadata!.name!, gracePeriodSeconds: 0 });
    await eventually('the pod cgroup removed after the pod is deleted', async () => (existsSync(dir) ? undefined : true), 60_000, 500);
  });

  it('a Service routes to a pod on the real node, from another pod there and from the host (the path the API server takes to a webhook)', async (t) => {
    if (!node) return t.skip('no real node in this cluster (OVERSELL_REAL_NODE=0)');
    await create(realNodePod('real-node-web', ['serve', ':8080'], { app: SERVICE }));
    const svc = await core().createNamespacedService({
      namespace: NS,
      body: { metadata: { name: SERVICE }, spec: { selector: { app: SERVICE }, ports: [{ port: 80, targetPort: 8080 }] } },
    });
    await podInPhase(NS, 'real-node-web', ['Running']);
    const url = `http://${svc.spec!.clusterIP}/`;
    // Pod -> ClusterIP -> pod on the same bridge (br_netfilter, hairpin).
    const client = await create(realNodePod('real-node-web-client', ['httpget', '-timeout', '60s', url]));
    const done = await podInPhase(NS, client.metadata!.name!, ['Succeeded', 'Failed']);
    const log = await core().readNamespacedPodLog({ namespace: NS, name: client.metadata!.name! });
    assert.equal(done.status?.phase, 'Succeeded', log);
    assert.match(log, /-> 200 .*\nok real-node-web/);
    // Host -> ClusterIP (kube-proxy's OUTPUT rules) -> pod.
    const body = await eventually('the Service answering the host', async () => {
      const r = await fetch(url, { signal: AbortSignal.timeout(3_000) }).catch(() => undefined);
      return r?.ok ? r.text() : undefined;
    }, 30_000, 500);
    assert.equal(body, 'ok real-node-web\n');
  });
});
