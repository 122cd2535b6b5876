// OversellPolicy on the real control plane: the CRD from deploy/, the gateway
// watching it (--policies crd), its own status writes as lease holder.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { ANNOTATION } from '../../gateway/admit/node-review.js';
import { ADMIN_KUBECONFIG, core, kubeletPatchNode } from './cluster.js';
import { GI, OPT_IN, POLICY_REF, UNAUTHENTICATED_AGENTS, customObjects, eventually, fakeNode, installPolicyCrd, installWebhook, pod, podsOn, policyObject, removeWebhook, startGatewayProcess, untilWrite, upsertPolicy, webhookFromDeploy, type FakeNode, type GatewayProc } from './fixtures.js';

const WEBHOOK = 'oversell-policy-e2e';

let gateway: GatewayProc;
const nodes: FakeNode[] = [];
/** These tests bind pods and expect a rise on the next write: no startupGrace hold (its own test sets one). */
const NOW = { startupGrace: '0s' };

async function poolNode(name: string, pool: string): Promise<FakeNode> {
  const n = await fakeNode(name, { labels: { ...OPT_IN, pool }, usage: { cpuMillicores: 200, memoryWorkingSetBytes: 1 * GI } });
  nodes.push(n);
  for (let i = 0; i < 3; i++) await core().createNamespacedPod({ namespace: 'default', body: pod(`${name}-${i}`, '1', '1Gi', { nodeName: name }) });
  await n.startAgent(gateway);
  return n;
}

describe('OversellPolicy on a real control plane', { timeout: 10 * 60_000 }, () => {
  before(async () => {
    await installPolicyCrd();
    gateway = await startGatewayProcess(undefined, undefined, ['--policies', 'crd', '--kubeconfig', ADMIN_KUBECONFIG, '--lease-namespace', 'default', ...UNAUTHENTICATED_AGENTS]);
    await gateway.waitFor(/leading/);
    await installWebhook(webhookFromDeploy(gateway, WEBHOOK));
  });

  after(async () => {
    for (const n of nodes) await n.stop();
    await gateway?.kill();
    await removeWebhook(WEBHOOK).catch(() => {});
    for (const name of ['pool-a', 'pool-p', 'pool-s', 'pool-k', 'pool-r']) await customObjects().deleteClusterCustomObject({ ...POLICY_REF, name }).catch(() => {});
  });

  it('a policy selecting on a label the kubelet may set warns in its status; under node-restriction.kubernetes.io/ the kubelet cannot move its node', async () => {
    type Status = { status?: { valid?: boolean; warnings?: string[] } };
    const status = async (name: string) => ((await customObjects().getClusterCustomObject({ ...POLICY_REF, name })) as Status).status;
    await upsertPolicy('pool-k', { nodeSelector: { matchLabels: { 'oversell.io/pool': 'gold' } }, cpu: { maxRatio: 4 } });
    await upsertPolicy('pool-r', { nodeSelector: { matchLabels: { 'node-restriction.kubernetes.io/oversell-pool': 'gold' } }, cpu: { maxRatio: 4 } });
    const warned = await eventually('pool-k\'s status warns', async () => ((await status('pool-k'))?.warnings?.length ? status('pool-k') : undefined));
    assert.match(warned?.warnings?.[0] ?? '', /"oversell\.io\/pool", which a node's own kubelet may set/);
    const clean = await eventually('pool-r\'s status written', async () => ((await status('pool-r'))?.valid === true ? status('pool-r') : undefined));
    assert.deepEqual(clean?.warnings, []);
    // What the warning means, with the node's own credentials (the NodeRestriction admission plugin is on).
    const n = await fakeNode('e2e-policy-self-label', { labels: OPT_IN });
    nodes.push(n);
    const settable = await kubeletPatchNode(n.creds, n.name, { metadata: { labels: { 'oversell.io/pool': 'gold' } } });
    assert.equal(settable.status, 200, 'a kubelet may move its own node into pool-k');
    const restricted = await kubeletPatchNode(n.creds, n.name, { metadata: { labels: { 'node-restriction.kubernetes.io/oversell-pool': 'gold' } } });
    assert.equal(restricted.status, 403, 'but not into pool-r');
    assert.match(JSON.stringify(restricted.body), /node-restriction\.kubernetes\.io/);
  });

  it('the API server refuses invalid policies', async () => {
    const invalid: Array<[Record<string, unknown>, RegExp]> = [
      [{ nodeSelector: {} }, /empty selector would select every node/],
      [{ nodeSelector: { matchLabels: { pool: 'x' } }, cpu: { maxRatio: 0.5 } }, /maxRatio/],
      [{ nodeSelector: { matchLabels: { pool: 'x' } }, memory: { targetUtilization: 1.5 } }, /targetUtilization/],
      [{ nodeSelector: { matchLabels: { pool: 'x' } }, mode: 'Maybe' }, /mode/],
      [{ nodeSelector: { matchLabels: { pool: 'x' } }, window: 'soon' }, /window/],
      [{ nodeSelector: { matchLabels: { pool: 'x' } }, memory: { riskBudget: { overShare: 0.001, margin: 0.01 } } }, /needs a margin of at least 0.05/],
      [{ nodeSelector: { matchLabels: { pool: 'x' } }, memory: { riskBudget: { overShare: 0.05 } } }, /overShare/],
      [{ nodeSelector: { matchLabels: { pool: 'x' } }, history: { minSpan: '200h' } }, /minSpan must be between 0s and 168h/],
    ];
    for (const [spec, message] of invalid) {
      await assert.rejects(customObjects().createClusterCustomObject({ ...POLICY_REF, body: policyObject('invalid', spec) }), (err: { code?: number; body?: string }) => {
        assert.equal(err.code, 422);
        assert.match(String(err.body), message);
        return true;
      });
    }
  });

  it('creating, changing and deleting a policy changes allocatable on the next write; status counts the nodes', async () => {
    const n = await poolNode('e2e-policy-a', 'a');
    // No policy yet: the webhook handles the node but grants only the floor.
    const before = await untilWrite(n, 'a reason without policy', (s) => /no valid OversellPolicy/.test(s.metadata?.annotations?.[ANNOTATION.reason] ?? ''));
    assert.equal(before.status?.allocatable?.cpu, '4');

    await upsertPolicy('pool-a', { ...NOW, nodeSelector: { matchLabels: { pool: 'a' } }, cpu: { maxRatio: 1.5 } });
    const created = await untilWrite(n, 'the 1.5x cap', (s) => s.status?.allocatable?.cpu === '6');
    assert.match(created.metadata?.annotations?.[ANNOTATION.reason] ?? '', /^policy pool-a; cpu 4000m->6000m \(capped at 1.5x raw/);
    await eventually('status.matchedNodes = 1', async () => {
      const p = (await customObjects().getClusterCustomObject({ ...POLICY_REF, name: 'pool-a' })) as { status?: { matchedNodes?: number } };
      return p.status?.matchedNodes === 1 ? true : undefined;
    });

    await upsertPolicy('pool-a', { ...NOW, nodeSelector: { matchLabels: { pool: 'a' } }, cpu: { maxRatio: 2 } });
    await untilWrite(n, 'the 2x cap after the change', (s) => s.status?.allocatable?.cpu === '8');

    await customObjects().deleteClusterCustomObject({ ...POLICY_REF, name: 'pool-a' });
    const deleted = await untilWrite(n, 'raw after the delete', (s) => s.status?.allocatable?.cpu === '4');
    assert.match(deleted.metadata?.annotations?.[ANNOTATION.reason] ?? '', /no valid OversellPolicy selects this node/);
  });

  it('DryRun leaves allocatable raw and reports the would-be grant in annotations', async () => {
    const n = nodes.find((x) => x.name === 'e2e-policy-a') ?? (await poolNode('e2e-policy-a', 'a'));
    await upsertPolicy('pool-a', { ...NOW, nodeSelector: { matchLabels: { pool: 'a' } }, mode: 'DryRun' });
    const dry = await untilWrite(n, 'the DryRun annotation', (s) => s.metadata?.annotations?.[ANNOTATION.dryRunCpu] === '8');
    assert.equal(dry.status?.allocatable?.cpu, '4');
    assert.equal(dry.status?.allocatable?.memory, '8Gi');
    assert.match(dry.metadata?.annotations?.[ANNOTATION.reason] ?? '', /DryRun: allocatable not changed/);
  });

  it('a pod just bound holds a rise for startupGrace: the next write keeps the previous grant and says why, a write after the grace rises', async () => {
    await upsertPolicy('pool-s', { nodeSelector: { matchLabels: { pool: 's' } }, startupGrace: '12s' });
    const n = await poolNode('e2e-policy-starting', 's'); // its three pods are bound now
    const held = await untilWrite(n, 'a write decided while the pods start', (s) => /held: a pod bound \d+s ago may not show its usage yet \(startupGrace 12s\)/.test(s.metadata?.annotations?.[ANNOTATION.reason] ?? ''));
    assert.equal(held.status?.allocatable?.cpu, '4001m', 'no previous grant: the floor (one millicore above raw)');
    const started = Date.now();
    const risen = await untilWrite(n, 'the rise once the newest pod is 12 s old', (s) => s.status?.allocatable?.cpu === '8', 30_000);
    assert.match(risen.metadata?.annotations?.[ANNOTATION.reason] ?? '', /cpu 4000m->8000m \(capped at 2x raw/);
    const created = Math.max(...(await podsOn(n.name)).map((p) => p.metadata!.creationTimestamp!.getTime()));
    assert.ok(Date.now() - created >= 11_000, `rose ${Date.now() - created} ms after the newest binding`);
    console.log(`# startupGrace 12s: held, then risen ${Date.now() - started} ms later`);
  });

  it('a pressure spike reported by the agent lowers allocatable within 2 s, with no kubelet write', async () => {
    await upsertPolicy('pool-p', { ...NOW, nodeSelector: { matchLabels: { pool: 'p' } } });
    const n = await poolNode('e2e-policy-pressure', 'p');
    await untilWrite(n, 'inflated', (s) => s.status?.allocatable?.cpu === '8');
    const started = Date.now();
    n.host.set({ ...n.host.usage, cpuSomeAvg10: 75 });
    const lowered = await eventually('allocatable lowered by the gateway', async () => {
      const stored = await core().readNode({ name: n.name });
      // The floor, one millicore above raw so the kubelet keeps writing (docs/policy.md).
      return stored.status?.allocatable?.cpu === '4001m' ? stored : undefined;
    }, 5000, 50);
    const ms = Date.now() - started;
    assert.ok(ms <= 2000, `lowered after ${ms} ms`);
    assert.match(lowered.metadata?.annotations?.[ANNOTATION.reason] ?? '', /cpu 4000m->4001m \(pressure: floor until calm; one unit above raw/);
    assert.equal(lowered.status?.allocatable?.memory, '10Gi', 'memory had no pressure and stays inflated (1.25x while learning)');
    // The kubelet's next write keeps it down while the pressure lasts.
    assert.equal((await n.heartbeat()).status?.allocatable?.cpu, '4001m');
    console.log(`# pressure -> allocatable lowered in ${ms} ms`);
  });

  it('a memory rise without pressure lowers allocatable at its first sample, not at the next 2 s sweep', async () => {
    const ms: number[] = [];
    // Three nodes: a sweep that happened to run right after the sample would pass once by luck (sweep only: ~10% for all three).
    for (const name of ['e2e-policy-rise-a', 'e2e-policy-rise-b', 'e2e-policy-rise-c']) {
      const n = await poolNode(name, 'p');
      await untilWrite(n, 'memory inflated', (s) => s.status?.allocatable?.memory === '10Gi'); // 1.25x while learning
      // 1 -> 4 GiB of 16: no pressure (90%), but 3 Gi bound using 4 Gi leaves headroom under raw: the floor, 8Gi.
      const started = Date.now();
      n.host.set({ ...n.host.usage, memoryWorkingSetBytes: 4 * GI });
      const lowered = await eventually('memory lowered by the gateway', async () => {
        const stored = await core().readNode({ name });
        return stored.status?.allocatable?.memory === '8Gi' ? stored : undefined;
      }, 5000, 25);
      ms.push(Date.now() - started);
      assert.match(lowered.metadata?.annotations?.[ANNOTATION.reason] ?? '', /memory 8GiB->8GiB \(floor/);
    }
    console.log(`# memory rise -> allocatable lowered in ${ms.join(', ')} ms (agent interval 500 ms)`);
    // The agent's interval (500 ms) plus the write, with margin: a sweep-only writer waits up to 2 s more.
    for (const t of ms) assert.ok(t <= 1200, `lowered after ${ms.join(', ')} ms`);
  });
});
