// Relief on the real kubelet node (issue 45, item 8): the real gateway (lease
// holder, webhook, pod watch) and the real agent reading the host. A probe
// pod's `hold` grows the node's memory working set past the policy's relief
// line; oversell evicts it through the Eviction API before the kubelet's own
// eviction or any OOM kill, while a protected (Guaranteed) pod keeps running.
// Measured: from the agent's sample that crossed the line to the accepted
// eviction (the gateway logs both clocks; agent and gateway share this host's
// clock), over TRIALS pods. Then a PodDisruptionBudget forbids the first
// candidate and oversell takes the next; that pod's replacement is not placed
// back on the node while it is hot.
//
// The lines are set from the host's memory as the test starts (a shared CI
// host has other work on it): the relief line about 3 GiB above what the
// host uses (at least the policy's lowest, 50 %), the calm line 4 % under it.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { after, before, describe, it } from 'node:test';
import { AppsV1Api, PolicyV1Api, type V1Node, type V1Pod } from '@kubernetes/client-node';
import { parseBytes } from '../../lib/quantity.js';
import { ADMIN_KUBECONFIG, adminConfig, core, kubeletCredentials, kubeletPatchStatus } from './cluster.js';
import {
  customObjects, deleteNamespaceAndWait, ensureNamespace, eventually, installPolicyCrd, installWebhook, OPT_IN, POLICY_REF, removeWebhook, startGatewayProcess, UNAUTHENTICATED_AGENTS, upsertPolicy, webhookFromDeploy, type GatewayProc,
} from './fixtures.js';
import { run, type Proc } from './processes.js';
import {
  hostMemory, findRealNode, noOtherPodsOn, optOutNode, patchNodeMetadata, podInPhase, probeContainer, REAL_NODE_LABEL, realNodePlacement, realNodePod, restartKubelet,
} from './real-node.js';

const NS = 'oversell-e2e-relief';
const POLICY = 'e2e-relief';
const WEBHOOK = 'oversell-e2e-relief';
const TRIALS = Number(process.env.OVERSELL_E2E_RELIEF_TRIALS ?? 20);
const MI = 1024 ** 2;
const GI = 1024 ** 3;
/** The target: the eviction asked within 2 s of the sample that crossed, p99. */
const TARGET_MS = 2_000;

let node: V1Node | undefined;
let nodeName = '';
let gateway: GatewayProc | undefined;
let agent: Proc | undefined;
let lines = { relief: 0, calm: 0, pressure: 0 };
let hogMib = 0;
const apps = () => adminConfig().makeApiClient(AppsV1Api);
const policyApi = () => adminConfig().makeApiClient(PolicyV1Api);

const gib = (b: number) => `${(b / GI).toFixed(2)} GiB`;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** The gateway's JSON log lines whose msg matches. */
function gatewayLines(msg: RegExp): Record<string, unknown>[] {
  const out: Record<string, unknown>[] = [];
  for (const text of readFileSync(gateway!.logFile, 'utf8').split('\n')) {
    if (!text.startsWith('{')) continue;
    try {
      const line = JSON.parse(text) as Record<string, unknown>;
      if (msg.test(String(line.msg))) out.push(line);
    } catch {
      // a line cut by the process's own write: the next read has it whole
    }
  }
  return out;
}

/** An unprotected (Burstable) pod on the real node, bound by name, whose `hold` grows its memory by `mib`. */
function hog(name: string, mib: number, labels: Record<string, string> = {}): V1Pod {
  const p = realNodePod(name, ['hold', '-mib', String(mib), '-step-mib', '256'], { namespace: NS, nodeName, resources: { requests: { cpu: '10m', memory: '64Mi' } } });
  p.metadata!.labels = { ...p.metadata!.labels, ...labels };
  return p;
}

/** Pods of NS the kubelet evicted, or whose container the kernel OOM-killed, and the kubelet's eviction Events. */
async function kubeletHarm(): Promise<string[]> {
  const harm: string[] = [];
  for (const p of (await core().listNamespacedPod({ namespace: NS })).items) {
    if (p.status?.reason === 'Evicted') harm.push(`${p.metadata?.name}: evicted by the kubelet (${p.status.message})`);
    for (const c of p.status?.containerStatuses ?? []) {
      if (c.state?.terminated?.reason === 'OOMKilled' || c.lastState?.terminated?.reason === 'OOMKilled') harm.push(`${p.metadata?.name}: OOMKilled`);
    }
  }
  for (const e of (await core().listNamespacedEvent({ namespace: NS })).items) {
    if (e.source?.component === 'kubelet' && /Evicted|OOMKilling/.test(e.reason ?? '')) harm.push(`${e.involvedObject.name}: ${e.reason} ${e.message}`);
  }
  return harm;
}

/** Until the host's working set is under the calm line again (an evicted hog has let go of its memory). */
async function calm(): Promise<void> {
  await eventually(`the host's memory under the calm line (${gib(lines.calm)})`, () => (hostMemory().workingSetBytes < lines.calm ? true : undefined), 120_000, 250);
}

async function running(name: string): Promise<V1Pod> {
  const p = await core().readNamespacedPod({ namespace: NS, name });
  assert.equal(p.status?.phase, 'Running', `${name}: ${p.status?.phase} ${p.status?.reason ?? ''}`);
  assert.equal(p.metadata?.deletionTimestamp, undefined, `${name} is being deleted`);
  assert.equal(p.status?.containerStatuses?.[0]?.restartCount ?? 0, 0, `${name} restarted`);
  return p;
}

const pct = (xs: number[], q: number) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.ceil(q * xs.length) - 1)]!;

describe('relief on the real node', { timeout: 20 * 60_000 }, () => {
  before(async () => {
    node = await findRealNode();
    if (!node) return;
    nodeName = node.metadata!.name!;
    await noOtherPodsOn(nodeName);
    await ensureNamespace(NS);
    await core().createNamespacedServiceAccount({ namespace: NS, body: { metadata: { name: 'default' } } }).catch(() => {});

    const m = hostMemory();
    const relief = Math.min(0.95, Math.max(0.5, Math.ceil(((m.workingSetBytes + 3 * GI) / m.totalBytes) * 100) / 100));
    lines = { relief: relief * m.totalBytes, calm: (relief - 0.04) * m.totalBytes, pressure: (relief - 0.06) * m.totalBytes };
    hogMib = Math.ceil((lines.relief - m.workingSetBytes) / MI) + 1536;
    console.log(`# host memory ${gib(m.totalBytes)}, working set ${gib(m.workingSetBytes)}: relief line ${relief} (${gib(lines.relief)}), calm ${gib(lines.calm)}, pressure ${gib(lines.pressure)}; each hog holds ${hogMib} MiB`);
    await installPolicyCrd();
    await upsertPolicy(POLICY, {
      nodeSelector: { matchLabels: { [REAL_NODE_LABEL]: 'true' } },
      startupGrace: '0s',
      calmPeriod: '10s',
      memory: { workingSetThreshold: relief - 0.06 },
      relief: { memoryLine: relief, calmLine: relief - 0.04, perNodePerMinute: 60 },
    });
    gateway = await startGatewayProcess(undefined, undefined, ['--policies', 'crd', '--kubeconfig', ADMIN_KUBECONFIG, '--lease-namespace', NS, ...UNAUTHENTICATED_AGENTS]);
    await gateway.waitFor(/leading/);
    await installWebhook(webhookFromDeploy(gateway, WEBHOOK));
    agent = run('agent-relief-real-node', 'agent', ['--node-name', nodeName, '--gateway', `127.0.0.1:${gateway.ports.agent}`, '--metrics-address', '127.0.0.1:0', '--kubeconfig', ADMIN_KUBECONFIG]);
    await agent.waitFor(/connected to gateway/);
    await patchNodeMetadata(nodeName, { labels: OPT_IN });
    const guaranteed = { cpu: '50m', memory: '128Mi' };
    await core().createNamespacedPod({ namespace: NS, body: realNodePod('protected', ['hold', '-mib', '32'], { namespace: NS, nodeName, resources: { requests: guaranteed, limits: guaranteed } }) });
    await podInPhase(NS, 'protected', ['Running']);
  });

  after(async () => {
    if (!node) return;
    await policyApi().deleteNamespacedPodDisruptionBudget({ namespace: NS, name: 'hog-pdb' }).catch(() => {});
    await apps().deleteNamespacedDeployment({ namespace: NS, name: 'bystander' }).catch(() => {});
    await deleteNamespaceAndWait(NS, 120_000).catch((err: Error) => console.log(`# cleanup: ${err.message}`));
    await removeWebhook(WEBHOOK).catch(() => {});
    await customObjects().deleteClusterCustomObject({ ...POLICY_REF, name: POLICY }).catch(() => {});
    await agent?.kill();
    await gateway?.kill();
    await optOutNode(nodeName).catch(() => {});
  });

  it('a PodDisruptionBudget forbids the first candidate: oversell takes the next, and its replacement is not placed back while the node is hot', async (t) => {
    if (!node) return t.skip('no real node in this cluster (OVERSELL_REAL_NODE=0)');
    await calm();
    try {
      await pdbCase(node);
    } finally {
      // The next test starts from the protected pod alone, whatever happened here.
      await apps().deleteNamespacedDeployment({ namespace: NS, name: 'bystander' }).catch(() => {});
      await policyApi().deleteNamespacedPodDisruptionBudget({ namespace: NS, name: 'hog-pdb' }).catch(() => {});
      for (const name of ['hog-pdb', 'ballast']) await core().deleteNamespacedPod({ namespace: NS, name, gracePeriodSeconds: 0 }).catch(() => {});
      await eventually('only the protected pod left', async () => ((await core().listNamespacedPod({ namespace: NS })).items.every((p) => p.metadata?.name === 'protected') ? true : undefined), 60_000, 250);
    }
  });
  it(`evicts the pod that grew past the relief line within ${TARGET_MS / 1000} s of the sample that crossed (p99 of ${TRIALS}), before the kubelet or the kernel; the protected pod keeps running`, async (t) => {
    if (!node) return t.skip('no real node in this cluster (OVERSELL_REAL_NODE=0)');
    const latencies: number[] = [];
    const seen: number[] = [];
    for (let i = 1; i <= TRIALS; i++) {
      await calm();
      const name = `hog-${i}`;
      const created = Date.now();
      await core().createNamespacedPod({ namespace: NS, body: hog(name, hogMib) });
      const line = await eventually(`relief evicts ${NS}/${name}`, () => gatewayLines(new RegExp(`^relieved: evicted ${NS}/${name}:`))[0], 90_000, 100)
        .catch(async (err: Error) => assert.fail(`${err.message}; host working set ${gib(hostMemory().workingSetBytes)}; pod ${JSON.stringify((await core().readNamespacedPod({ namespace: NS, name })).status?.phase)}; the gateway's relief lines: ${JSON.stringify(gatewayLines(/relie/).slice(-5))}`));
      latencies.push(Number(line.crossingToEvictionMs));
      seen.push(Date.now() - created);
      await eventually(`${name} gone`, () => core().readNamespacedPod({ namespace: NS, name }).then(() => undefined, () => true), 60_000, 250);
    }
    const evicted = gatewayLines(/^relieved: evicted /).map((l) => String(l.pod)).filter((p) => /\/hog-\d+$/.test(p));
    console.log(`# relief on the real node: ${TRIALS} hogs of ${hogMib} MiB; from the sample that crossed to the eviction accepted: p50 ${pct(latencies, 0.5)} ms, p99 ${pct(latencies, 0.99)} ms, max ${Math.max(...latencies)} ms (all: ${latencies.join(' ')}); hog created to eviction seen by the test: p50 ${pct(seen, 0.5)} ms, max ${Math.max(...seen)} ms`);
    console.log(`# target: p99 <= ${TARGET_MS} ms over ${TRIALS} trials: ${pct(latencies, 0.99) <= TARGET_MS ? 'met' : 'MISSED'}`);
    assert.ok(latencies.every((l) => Number.isFinite(l) && l >= 0), `every eviction logged with its sample's time: ${latencies.join(' ')}`);
    assert.ok(pct(latencies, 0.99) <= TARGET_MS, `p99 ${pct(latencies, 0.99)} ms > ${TARGET_MS} ms`);
    assert.deepEqual(evicted, Array.from({ length: TRIALS }, (_, i) => `${NS}/hog-${i + 1}`), 'each hog, once');
    assert.deepEqual(gatewayLines(/^relieved: evicted /).map((l) => String(l.pod)).filter((p) => /protected|ballast/.test(p)), [], 'never a protected pod');
    await running('protected');
    assert.deepEqual(await kubeletHarm(), [], 'no pod evicted by the kubelet or OOM-killed');
  });

  it('an OOM kill provoked on the node is counted once, and a kill at the container\'s own limit does not spend the pool\'s budget', async (t) => {
    if (!node) return t.skip('no real node in this cluster (OVERSELL_REAL_NODE=0)');
    const series = `oversell_harm_pods_total{pool="${POLICY}",tier="unprotected",by="oom-kill"}`;
    const scrape = async () => (await fetch(`http://127.0.0.1:${gateway!.ports.metrics}/metrics`)).text();
    const seriesValue = (text: string, name: string) => Number(text.split('\n').find((l) => l.startsWith(`${name} `))?.split(' ')[1] ?? 0);
    const before = seriesValue(await scrape(), series);
    // 64 MiB limit, 256 MiB held: the kernel kills it at its own limit.
    await core().createNamespacedPod({ namespace: NS, body: realNodePod('oom', ['hold', '-mib', '256', '-step-mib', '16'], { namespace: NS, nodeName, resources: { requests: { cpu: '10m', memory: '32Mi' }, limits: { memory: '64Mi' } } }) });
    const killed = await eventually('the oom pod OOM-killed', async () => {
      const p = await core().readNamespacedPod({ namespace: NS, name: 'oom' });
      return p.status?.containerStatuses?.[0]?.state?.terminated?.reason === 'OOMKilled' ? p : undefined;
    }, 60_000, 250);
    const counted = await eventually(`${series} one up`, async () => {
      const v = seriesValue(await scrape(), series);
      return v > before ? v : undefined;
    }, 15_000, 250);
    await sleep(3_000); // the pod's later status updates (Failed, the same container) must not count it again
    const text = await scrape();
    console.log(`# OOM kill: ${killed.metadata?.name} ${killed.status?.containerStatuses?.[0]?.state?.terminated?.reason}; ${series} ${before} -> ${seriesValue(text, series)}`);
    assert.equal(counted, before + 1);
    assert.equal(seriesValue(text, series), before + 1, 'counted once');
    assert.ok(!text.includes(`oversell_harm_budget_spent{pool="${POLICY}"`), 'its own limit killed it: the pool\'s budget is not spent');
  });
});

/** The PodDisruptionBudget case on the node; the test cleans up after it. */
async function pdbCase(node: V1Node): Promise<void> {
  // The node oversold, so that while it is hot its floor is what is bound there: a Guaranteed
  // ballast (protected, raw room kept) with the protected pod fills raw to 64 MiB; the bystander
  // and the hog pass it, admitted against the inflated allocatable.
  const raw = parseBytes(node.status!.allocatable!.memory!, 'raw memory');
  // The policy grants requests plus headroom: with the ballast's, past raw.
  const ballast = { cpu: '10m', memory: `${(raw - 128n * BigInt(MI) - 64n * BigInt(MI)) / BigInt(MI)}Mi` };
  await core().createNamespacedPod({ namespace: NS, body: realNodePod('ballast', ['sleep', '3600'], { namespace: NS, nodeName, resources: { requests: ballast, limits: ballast } }) });
  await podInPhase(NS, 'ballast', ['Running']);
  const inflated = (n: V1Node) => parseBytes(n.status?.allocatable?.memory ?? '0', 'allocatable') >= raw + 512n * BigInt(MI);
  // The decision first (a dry-run kubelet write through the webhook), then the kubelet's own write:
  // with its status unchanged a kubelet writes every 5 min, a restarted one at once.
  const creds = kubeletCredentials(nodeName);
  let last = '';
  await eventually('the webhook inflating the kubelet\'s write past raw by 512 MiB', async () => {
    const res = await kubeletPatchStatus(creds, nodeName, { allocatable: node!.status!.allocatable }, { dryRun: true });
    last = `${res.status} ${res.body.status?.allocatable?.memory} ${res.body.metadata?.annotations?.['oversell.io/reason'] ?? ''}`;
    return res.status === 200 && inflated(res.body) ? true : undefined;
  }, 120_000, 1_000).catch((err: Error) => assert.fail(`${err.message}; last answer: ${last}`));
  await restartKubelet();
  await eventually('the node inflated past raw by 512 MiB', async () => (inflated(await core().readNode({ name: nodeName })) ? true : undefined), 60_000, 500);
  await apps().createNamespacedDeployment({
    namespace: NS,
    body: {
      metadata: { name: 'bystander' },
      spec: {
        replicas: 1,
        selector: { matchLabels: { app: 'bystander' } },
        template: {
          metadata: { labels: { app: 'bystander' } },
          spec: { ...realNodePlacement(), terminationGracePeriodSeconds: 1, containers: [probeContainer('probe', ['hold', '-mib', '16'], { requests: { cpu: '10m', memory: '64Mi' } })] },
        },
      },
    },
  });
  const bystander = await eventually('the bystander Running', async () => (await core().listNamespacedPod({ namespace: NS, labelSelector: 'app=bystander' })).items.find((p) => p.status?.phase === 'Running'), 120_000, 250);
  await policyApi().createNamespacedPodDisruptionBudget({ namespace: NS, body: { metadata: { name: 'hog-pdb' }, spec: { minAvailable: 1, selector: { matchLabels: { app: 'hog-pdb' } } } } });
  await core().createNamespacedPod({ namespace: NS, body: hog('hog-pdb', hogMib, { app: 'hog-pdb' }) });
  await podInPhase(NS, 'hog-pdb', ['Running']);
  await eventually('the PodDisruptionBudget allows no disruption', async () => {
    const pdb = await policyApi().readNamespacedPodDisruptionBudget({ namespace: NS, name: 'hog-pdb' });
    return pdb.status?.currentHealthy === 1 && pdb.status.disruptionsAllowed === 0 ? true : undefined;
  }, 60_000, 250);

  const refused = await eventually('relief told the PodDisruptionBudget refused hog-pdb', () => gatewayLines(new RegExp(`PodDisruptionBudget refuses evicting ${NS}/hog-pdb`))[0], 90_000, 100);
  const next = await eventually('relief evicts the next pod in order', () => gatewayLines(new RegExp(`^relieved: evicted ${NS}/${bystander.metadata!.name}:`))[0], 30_000, 100);
  console.log(`# PDB: hog-pdb refused (${String(refused.msg).slice(0, 80)}...), the bystander ${bystander.metadata!.name} evicted ${Date.parse(String(next.time)) - Date.parse(String(refused.time))} ms later`);
  await running('hog-pdb');
  await running('protected');
  await running('ballast');

  // The replacement, while the node is hot (hog-pdb holds it past the line): not on it.
  const hotUntil = Date.now() + 30_000;
  let replacement: V1Pod | undefined;
  while (Date.now() < hotUntil) {
    assert.ok(hostMemory().workingSetBytes > lines.pressure, 'the node is hot while the test looks');
    replacement = (await core().listNamespacedPod({ namespace: NS, labelSelector: 'app=bystander' })).items.find((p) => p.metadata?.name !== bystander.metadata!.name);
    assert.notEqual(replacement?.spec?.nodeName, nodeName, `the replacement ${replacement?.metadata?.name} was placed back on the hot node`);
    await sleep(250);
  }
  console.log(`# the replacement ${replacement?.metadata?.name ?? '(not created)'}: ${replacement?.status?.phase} for 30 s while the node was hot, not placed on it`);
  assert.ok(replacement, 'the Deployment made a replacement');
  assert.deepEqual(await kubeletHarm(), [], 'no pod evicted by the kubelet or OOM-killed');
  assert.deepEqual(gatewayLines(/^relieved: evicted /).map((l) => String(l.pod)).filter((p) => /protected|ballast|hog-pdb/.test(p)), [], 'never a protected pod, never the one its budget keeps');
}
