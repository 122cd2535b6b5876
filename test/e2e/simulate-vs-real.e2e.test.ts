// `oversell simulate` checked against the real thing (issue 22): one scenario
// (simulate-vs-real/scenario.yaml) run by the simulator and on the local
// control plane: kwok nodes, the real scheduler placing a real Deployment, the
// real gateway writing allocatable as lease holder, and agents reporting the
// scenario's modelled usage of the pods bound to their node. Then `oversell
// record` captures that cluster from the gateway and `oversell simulate --trace`
// replays it (OVERSELL_RECORD_FIXTURE=1 keeps the trace as the test fixture).
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { copyFileSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { promisify } from 'node:util';
import { AppsV1Api, type V1Node, type V1Pod } from '@kubernetes/client-node';
import yaml from 'js-yaml';
import { value, parseQuantity } from '../../lib/quantity.js';
import { policyEntry } from '../../sim/allocators.js';
import { parseScenario, rawAllocatable, type DeploymentClass } from '../../sim/scenario.js';
import { parseTrace } from '../../sim/trace.js';
import { buildWorkload, podCpu, podMemory } from '../../sim/workload.js';
import { ADMIN_KUBECONFIG, REPO, adminConfig, core } from './cluster.js';
import {
  GI, OPT_IN, POLICY_REF, UNAUTHENTICATED_AGENTS, customObjects, eventually, fakeNode, installPolicyCrd, installWebhook, removeWebhook, startGatewayProcess, upsertPolicy, webhookFromDeploy,
  type FakeNode, type GatewayProc,
} from './fixtures.js';

const HERE = join(REPO, 'test/e2e/simulate-vs-real');
const SCENARIO_FILE = join(HERE, 'scenario.yaml');
const TRACE_FIXTURE = join(REPO, 'test/fixtures/trace/local-control-plane.jsonl');
const WEBHOOK = 'oversell-e2e-simulate';
const APP = 'sim-check';
const POOL = { pool: APP };
const NS = 'default';
const work = mkdtempSync(join(tmpdir(), 'oversell-e2e-sim-'));
const CLI = join(REPO, 'dist/cli/main.js');

const scenario = parseScenario(yaml.load(readFileSync(SCENARIO_FILE, 'utf8')));
const workload = buildWorkload(scenario);
const app = scenario.classes[0] as DeploymentClass;
const policy = scenario.policies.oversell[0]!;
const replicas = workload.replicas[0]![0]!;
/** What the fake nodes' kubelets write: the scenario's capacity less reserved and eviction threshold (4 CPUs, 8 GiB). */
const raw = rawAllocatable(scenario);

/**
 * How far the cluster may be from the simulator, in pods placed: one pod per node.
 * The model has no lag between a pod's binding and its usage showing; here it
 * is up to an agent interval (500 ms) plus this test's update loop (200 ms),
 * and a kubelet write in between may let one more pod onto a node (startupGrace
 * holds such rises, in both).
 */
const TOLERANCE = scenario.nodes;

let gateway: GatewayProc;
const nodes: FakeNode[] = [];
let feeding: NodeJS.Timeout | undefined;
/** Each fake node's kubelet status loop: rises reach allocatable only on its writes (the gateway lowers on its own). */
const kubelets: NodeJS.Timeout[] = [];
const apps = () => adminConfig().makeApiClient(AppsV1Api);

async function cli(...args: string[]): Promise<{ stdout: string; stderr: string }> {
  return promisify(execFile)(process.execPath, [CLI, ...args], { encoding: 'utf8', timeout: 120_000, maxBuffer: 64 << 20, env: { ...process.env, OVERSELL_TOKEN: '', OVERSELL_CA_FILE: '' } });
}

interface SimPolicy { name: string; podsPlaced: number; series: { placed: number[] } }

/** The simulator's pods placed at the end of the run, per policy: where the run settles. */
async function simulated(): Promise<Map<string, number>> {
  const { stdout } = await cli('simulate', '--scenario', SCENARIO_FILE, '--no-busier', '--output', 'json');
  const out = JSON.parse(stdout) as { policies: SimPolicy[] };
  return new Map(out.policies.map((p) => [p.name, p.series.placed[p.series.placed.length - 1]!]));
}

const appPods = async (): Promise<V1Pod[]> => (await core().listNamespacedPod({ namespace: NS, labelSelector: `app=${APP}` })).items.filter((p) => !p.metadata?.deletionTimestamp);
const bound = (pods: V1Pod[]) => pods.filter((p) => p.spec?.nodeName);

/** The app's bound pods, counted per node. */
async function podsPerNode(): Promise<Map<string, number>> {
  const perNode = new Map<string, number>();
  for (const p of bound(await appPods())) perNode.set(p.spec!.nodeName!, (perNode.get(p.spec!.nodeName!) ?? 0) + 1);
  return perNode;
}

/**
 * Each agent's host shows the scenario's system usage plus its model of every
 * pod bound to the node: pods numbered by creation, as the simulator numbers a
 * class's pods, and aged from their creation.
 */
async function feedUsage(startedMs: number): Promise<void> {
  const pods = (await appPods()).sort((a, b) =>
    String(a.metadata?.creationTimestamp?.toISOString()).localeCompare(String(b.metadata?.creationTimestamp?.toISOString())) || String(a.metadata?.name).localeCompare(String(b.metadata?.name)));
  const t = Math.min(workload.steps - 1, Math.floor((Date.now() - startedMs) / workload.stepMs));
  const usage = new Map(nodes.map((n) => [n.name, { cpu: scenario.node.systemUsage.cpu, memory: scenario.node.systemUsage.memory }]));
  pods.forEach((p, ordinal) => {
    const u = usage.get(p.spec?.nodeName ?? '');
    if (!u) return;
    const profile = workload.profile(0, ordinal, 0);
    const age = Math.max(0, Math.floor((Date.now() - (p.metadata?.creationTimestamp?.getTime() ?? Date.now())) / workload.stepMs));
    u.cpu += podCpu(workload, profile.cpuBase, profile.key, profile.memoryPhase, t, scenario.usage.bursts.factor, scenario.usage.bursts.share);
    u.memory += podMemory(workload, profile.memoryBase, profile.memoryPhase, t, age, scenario.usage.memoryGrowth.swing);
  });
  for (const n of nodes) {
    const u = usage.get(n.name)!;
    n.host.set({ cpuMillicores: Math.round(u.cpu), memoryWorkingSetBytes: Math.round(u.memory) });
  }
}

/** Pods bound once the count has not moved for `quietMs`: where the cluster settles. */
async function settled(what: string, quietMs: number, timeoutMs: number): Promise<number> {
  let last = -1;
  let since = Date.now();
  return eventually(what, async () => {
    const n = bound(await appPods()).length;
    if (n !== last) {
      last = n;
      since = Date.now();
      return undefined;
    }
    return Date.now() - since >= quietMs ? n : undefined;
  }, timeoutMs, 500);
}

const memoryOf = (n: V1Node) => Number(value(parseQuantity(n.status?.allocatable?.memory ?? '0')));

describe('oversell simulate against the local control plane', { timeout: 10 * 60_000 }, () => {
  before(async () => {
    // The scenario's node is the e2e fake node: its agent sees the FakeHost, its kubelet writes the raw below.
    const host = { cpu: 8000, memory: 16 * GI };
    assert.deepEqual(scenario.node.capacity, host, 'the scenario node must be the fake host (8 CPUs, 16 GiB)');
    await installPolicyCrd();
    gateway = await startGatewayProcess(undefined, undefined, ['--policies', 'crd', '--kubeconfig', ADMIN_KUBECONFIG, '--lease-namespace', NS, ...UNAUTHENTICATED_AGENTS]);
    await gateway.waitFor(/leading/);
    await installWebhook(webhookFromDeploy(gateway, WEBHOOK));
    for (let i = 0; i < scenario.nodes; i++) {
      const n = await fakeNode(`e2e-sim-${i}`, {
        labels: { ...OPT_IN, ...POOL },
        raw: { cpu: `${raw.cpu}m`, memory: String(raw.memory) },
        usage: { cpuMillicores: scenario.node.systemUsage.cpu, memoryWorkingSetBytes: scenario.node.systemUsage.memory },
      });
      nodes.push(n);
      await n.startAgent(gateway);
      kubelets.push(setInterval(() => void n.heartbeat().catch((err: Error) => console.log(`${n.name}: kubelet write failed: ${err.message}`)), workload.stepMs));
    }
  });

  after(async () => {
    clearInterval(feeding);
    for (const k of kubelets) clearInterval(k);
    await apps().deleteNamespacedDeployment({ name: APP, namespace: NS }).catch(() => {});
    await customObjects().deleteClusterCustomObject({ ...POLICY_REF, name: policy.name }).catch(() => {});
    await eventually('the Deployment\'s pods to be gone', async () => ((await appPods()).length === 0 ? true : undefined), 60_000).catch(() => {});
    for (const n of nodes) await n.stop();
    await gateway?.kill();
    await removeWebhook(WEBHOOK).catch(() => {});
    rmSync(work, { recursive: true, force: true });
  });

  it('places as many pods as the simulator says: without oversell, and with the scenario\'s OversellPolicy', async () => {
    const sim = await simulated();
    const simNone = sim.get('none')!;
    const simOversell = sim.get(policy.name)!;
    console.log(`simulator: ${simNone} pods placed without oversell, ${simOversell} with ${policy.name} (of ${replicas})`);
    // The check can fail: the policy must change the outcome by more than the tolerance.
    assert.ok(simOversell - simNone > TOLERANCE, `the scenario must separate the policies: ${simNone} vs ${simOversell}`);

    const started = Date.now();
    feeding = setInterval(() => void feedUsage(started).catch((err: Error) => console.log(`usage update failed: ${err.message}`)), 200);
    await apps().createNamespacedDeployment({
      namespace: NS,
      body: {
        metadata: { name: APP },
        spec: {
          replicas,
          selector: { matchLabels: { app: APP } },
          template: {
            metadata: { labels: { app: APP } },
            spec: {
              nodeSelector: POOL,
              tolerations: [{ key: 'kwok.x-k8s.io/node', operator: 'Exists', effect: 'NoSchedule' }],
              containers: [{ name: 'app', image: 'fake', resources: { requests: { cpu: `${app.requests.cpu}m`, memory: String(app.requests.memory) } } }],
            },
          },
        },
      },
    });
    // No policy selects the pool yet: the gateway grants the raw floor.
    const realNone = await settled('pods placed without a policy to settle', 5_000, 120_000);
    console.log(`cluster: ${realNone} pods placed without oversell`);
    assert.equal(realNone, simNone, 'requests against raw allocatable: the simulator and the scheduler must agree exactly');

    await upsertPolicy(policy.name, { nodeSelector: { matchLabels: POOL }, ...policy.spec });
    await eventually('a first pod placed above raw', async () => (bound(await appPods()).length > realNone ? true : undefined), 60_000);
    // Quiet for longer than the policy holds rises after a binding (startupGrace) and another kubelet write: nothing left to grant.
    const grace = policyEntry(policy).policy!.startupGraceMs;
    const realOversell = await settled('pods placed with the policy to settle', grace + 1.5 * workload.stepMs, 240_000);
    const perNode = await podsPerNode();
    console.log(`cluster: ${realOversell} pods placed with ${policy.name} (per node: ${[...perNode].map(([n, c]) => `${n} ${c}`).join(', ')}); tolerance ${TOLERANCE}`);
    assert.ok(Math.abs(realOversell - simOversell) <= TOLERANCE, `the cluster placed ${realOversell} pods, the simulator ${simOversell}: more than ${TOLERANCE} apart`);

    // And what the gateway wrote holds what it admitted: no node below its bound requests.
    for (const n of nodes) {
      const stored = await core().readNode({ name: n.name });
      assert.ok(memoryOf(stored) >= (perNode.get(n.name) ?? 0) * app.requests.memory, `${n.name}: allocatable memory ${memoryOf(stored)} below its bound requests`);
    }
  });

  it('oversell record captures this cluster from the gateway, and simulate --trace replays it', async () => {
    const file = join(work, 'trace.jsonl');
    const { stderr } = await cli('--address', `127.0.0.1:${gateway.ports.grpc}`, 'record', '--interval', '1s', '--duration', '5s', '--out', file);
    assert.match(stderr, /wrote .*trace\.jsonl: 5 polls/);
    const trace = parseTrace(readFileSync(file, 'utf8'));
    const perNode = await podsPerNode();
    const last = trace.polls[trace.polls.length - 1]!;
    assert.deepEqual(last.nodes.map((x) => x.name), nodes.map((n) => n.name));
    for (const x of last.nodes) {
      const n = nodes.find((y) => y.name === x.name)!;
      assert.deepEqual(x.capacity, scenario.node.capacity, `${x.name}: capacity as its agent reads the host`);
      assert.deepEqual(x.raw, raw, `${x.name}: raw allocatable as its kubelet wrote it`);
      assert.equal(x.requests.memory, (perNode.get(x.name) ?? 0) * app.requests.memory, `${x.name}: bound requests as the API server has them`);
      assert.ok(Math.abs(x.usage.memory - n.host.usage.memoryWorkingSetBytes) <= 1024 * 1024, `${x.name}: working set ${x.usage.memory} as the agent read it from its host (${n.host.usage.memoryWorkingSetBytes})`);
    }
    if (process.env.OVERSELL_RECORD_FIXTURE === '1') copyFileSync(file, TRACE_FIXTURE);

    const { stdout } = await cli('simulate', '--trace', file, '--scenario', SCENARIO_FILE, '--no-busier', '--output', 'json');
    const out = JSON.parse(stdout) as { trace: { nodes: string[]; polls: number }; policies: SimPolicy[] };
    assert.deepEqual(out.trace.nodes, nodes.map((n) => n.name));
    assert.equal(out.trace.polls, 5);
    // The recorded pods stay and fill the nodes past raw: no more of the scenario's pods fit without oversell.
    assert.equal(out.policies.find((p) => p.name === 'none')!.podsPlaced, 0);
  });
});
