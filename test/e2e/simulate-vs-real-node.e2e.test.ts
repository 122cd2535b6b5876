// `oversell simulate` checked against the real node (issue 31, item 7): one
// scenario (simulate-vs-real-node/scenario.yaml) run by the simulator and on
// the local cluster's real kubelet node. Real pods of the probe image burn a
// modelled share of their CPU request (a CFS quota holds them at it) and hold
// a share of their memory request; the real scheduler places a Deployment on
// the node against the allocatable that the real gateway (default policy,
// lease holder and webhook) grants from the real agent's readings of the host.
// The simulator gets the same node, pods and usage shares, and as the node's
// system usage what the agent measured on the host before the pods started:
// the count placed must agree within one pod.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { AppsV1Api, type V1Node, type V1Pod } from '@kubernetes/client-node';
import yaml from 'js-yaml';
import { DEFAULT_POLICY } from '../../gateway/decide/policy.js';
import { parseBytes, parseMilli } from '../../lib/quantity.js';
import type { NodeStatus__Output } from '../../proto/gen/oversell/v1/NodeStatus.js';
import type { NodeUsageClient } from '../../proto/gen/oversell/v1/NodeUsage.js';
import { parseScenario, rawAllocatable, type DeploymentClass, type Scenario } from '../../sim/scenario.js';
import { simulate } from '../../sim/simulate.js';
import { getNode, queryClient } from '../helpers/grpc.js';
import { ADMIN_KUBECONFIG, REPO, adminConfig, core } from './cluster.js';
import {
  customObjects, deleteNamespaceAndWait, ensureNamespace, eventually, installPolicyCrd, installWebhook, OPT_IN, POLICY_REF, removeWebhook, startGatewayProcess, UNAUTHENTICATED_AGENTS, upsertPolicy, webhookFromDeploy, type GatewayProc,
} from './fixtures.js';
import { run, type Proc } from './processes.js';
import { findRealNode, noOtherPodsOn, optOutNode, patchNodeMetadata, probeContainer, realNodePlacement, restartKubelet } from './real-node.js';

const SCENARIO_FILE = join(REPO, 'test/e2e/simulate-vs-real-node/scenario.yaml');
const NS = 'oversell-e2e-sim-node';
const APP = 'sim-node';
const WEBHOOK = 'oversell-e2e-sim-node';
/** deploy/'s default OversellPolicy under a name of its own: what users install, and no clash with an install test's. */
const POLICY = 'e2e-sim-node';
const MI = 1024 ** 2;
/**
 * The simulator and the node may differ by one pod: the node's background
 * (control plane, other work on the host) moves around the figure the
 * simulator is given, and one pod's usage (150m) is what it takes to move the
 * count by one.
 */
const TOLERANCE = 1;
/** The background above which the check waits: more leaves the default policy no room the check could see. */
const QUIET_CPU_MILLICORES = 250;
/**
 * The host's own load past which the host, not oversell, decides the count:
 * the quiet threshold plus one pod's usage (what moves the count by one).
 */
const BUSY_CPU_MILLICORES = QUIET_CPU_MILLICORES + 150;
/** The kubelet's status interval once allocatable is inflated (nodeStatusUpdateFrequency). */
const KUBELET_WRITE_MS = 10_000;
const GRACE_MS = DEFAULT_POLICY.startupGraceMs;

const base = parseScenario(yaml.load(readFileSync(SCENARIO_FILE, 'utf8')));
const app = base.classes[0] as DeploymentClass;
/** What each pod uses: the burn container's CPU limit (its request defaults to it), and the MiB the hold container keeps. */
const burnMillicores = Math.round(app.requests.cpu * (1 - base.usage.cpuSlack));
const holdMib = Math.round((app.requests.memory * (1 - base.usage.memorySlack)) / MI);

let node: V1Node | undefined;
let nodeName = '';
let gateway: GatewayProc | undefined;
let agent: Proc | undefined;
let client: NodeUsageClient | undefined;
/** When the test began: the log's times count from it. */
let started = Date.now();
const apps = () => adminConfig().makeApiClient(AppsV1Api);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** The scenario with the real node's shape and background, and enough replicas to leave pods pending under the CPU cap. */
function scenarioFor(n: V1Node, system: { cpu: number; memory: number }): Scenario {
  const capacity = { cpu: Number(parseMilli(n.status?.capacity?.cpu, 'capacity cpu')), memory: Number(parseBytes(n.status?.capacity?.memory, 'capacity memory')) };
  const raw = { cpu: Number(parseMilli(n.status?.allocatable?.cpu, 'allocatable cpu')), memory: Number(parseBytes(n.status?.allocatable?.memory, 'allocatable memory')) };
  const evictionHardMemory = Math.min(100 * MI, capacity.memory - raw.memory); // the kubelet's default; the rest is reserved
  const replicas = Math.floor((DEFAULT_POLICY.cpu.maxRatio * raw.cpu) / app.requests.cpu) + 2;
  const s: Scenario = {
    ...base,
    node: {
      capacity,
      reserved: { cpu: capacity.cpu - raw.cpu, memory: capacity.memory - raw.memory - evictionHardMemory },
      evictionHardMemory,
      systemUsage: system,
      maxPods: Number(n.status?.allocatable?.pods ?? 110),
    },
    classes: [{ ...app, replicasPerNode: { min: replicas, max: replicas } }],
  };
  assert.deepEqual(rawAllocatable(s), raw, 'the scenario node has the real node\'s allocatable');
  return s;
}

/** The scenario as `oversell simulate --scenario` reads it (quantities as text: a bare number is cores or bytes), to repeat the run by hand. */
function scenarioText(s: Scenario): string {
  const q = (x: { cpu: number; memory: number }) => ({ cpu: `${Math.round(x.cpu)}m`, memory: `${Math.round(x.memory / 1024)}Ki` });
  const n = s.node;
  return yaml.dump({
    seed: s.seed, nodes: s.nodes, hours: s.hours, tickSeconds: s.tickSeconds,
    node: { capacity: q(n.capacity), reserved: q(n.reserved), evictionHardMemory: `${n.evictionHardMemory / 1024}Ki`, systemUsage: q(n.systemUsage), maxPods: n.maxPods },
    usage: s.usage,
    classes: s.classes.map((c) => ({ ...c, requests: q(c.requests) })),
  }, { flowLevel: 2 });
}

/** The simulator's pods placed at the end of the run, for none and for the default policy (named oversell). */
function simulated(s: Scenario): { none: number; oversell: number } {
  const out = simulate(s);
  const last = (name: string) => out.policies.find((p) => p.name === name)!.series.placed.at(-1)!;
  return { none: last('none'), oversell: last('oversell') };
}

const appPods = async (): Promise<V1Pod[]> => (await core().listNamespacedPod({ namespace: NS, labelSelector: `app=${APP}` })).items.filter((p) => !p.metadata?.deletionTimestamp);
/** Placed: bound to the node and not refused by its kubelet. */
const placed = (pods: V1Pod[]) => pods.filter((p) => p.spec?.nodeName === nodeName && p.status?.phase !== 'Failed');
const status = () => getNode(client!, nodeName);
const cpuOf = (n: V1Node) => n.status?.allocatable?.cpu;
/** The host's own CPU load now: the node's p95 less what the placed pods are modelled to use. */
const backgroundOf = (s: NodeStatus__Output, placedCount: number) => (s.window?.cpuP95Millicores ?? 0) - placedCount * burnMillicores;
/** A verdict the host's own load made meaningless: skipped, loudly, or failed with OVERSELL_E2E_REQUIRE_QUIET=1. */
class HostBusy extends Error {}
async function busyHost(why: string): Promise<never> {
  const s = await status().catch(() => undefined);
  const placedNow = placed(await appPods()).length;
  const background = s ? backgroundOf(s, placedNow) : Number.NaN;
  if (process.env.OVERSELL_E2E_REQUIRE_QUIET !== '1' && background > BUSY_CPU_MILLICORES) {
    throw new HostBusy(`the host got busy during the check (its own load ${background}m, past ${BUSY_CPU_MILLICORES}m): ${why}`);
  }
  assert.fail(`${why} (the host's own load ${background}m)`);
}
const describeDecision = (s: NodeStatus__Output) =>
  `allocatable cpu ${s.decision?.allocatable?.cpuMillicores}m (${s.decision?.cpuBound}), window p95 ${s.window?.cpuP95Millicores}m over ${s.window?.spanMs} ms: ${s.decision?.reason}`;

/**
 * Pods placed once the count has not moved for longer than a rise takes (the
 * startup grace after the last binding, then two kubelet writes), with the
 * policy free to rise: a node under pressure holds its floor, and a count
 * that does not move then has not settled.
 */
async function settledCount(timeoutMs: number): Promise<{ count: number; status: NodeStatus__Output }> {
  const quietMs = GRACE_MS + 2 * KUBELET_WRITE_MS + 5_000;
  let last = -1;
  let since = Date.now();
  return eventually('the pods placed to settle (unchanged past the startup grace and two kubelet writes, no pressure)', async () => {
    const count = placed(await appPods()).length;
    const s = await status();
    if (count !== last) {
      console.log(`# ${((Date.now() - started) / 1000).toFixed(0)} s: ${count} placed; ${describeDecision(s)}`);
      last = count;
      since = Date.now();
      return undefined;
    }
    if (['pressure', 'stale', 'no-data'].includes(s.decision?.cpuBound ?? '')) return undefined;
    return Date.now() - since >= quietMs ? { count, status: s } : undefined;
  }, timeoutMs, 1_000);
}
describe('oversell simulate against the real node', { timeout: 15 * 60_000 }, () => {
  before(async () => {
    node = await findRealNode();
    if (!node) return;
    nodeName = node.metadata!.name!;
    // Other pods on the node would be usage and requests the simulator does not know.
    // An earlier test's pods may still be terminating (their namespace deleted without waiting): give them time.
    await noOtherPodsOn(nodeName);
    await ensureNamespace(NS);
    await core().createNamespacedServiceAccount({ namespace: NS, body: { metadata: { name: 'default' } } }).catch(() => {});
    await installPolicyCrd();
    const spec = (yaml.load(readFileSync(join(REPO, 'deploy/base/policy-default.yaml'), 'utf8')) as { spec: Record<string, unknown> }).spec;
    await upsertPolicy(POLICY, spec);
    gateway = await startGatewayProcess(undefined, undefined, ['--policies', 'crd', '--kubeconfig', ADMIN_KUBECONFIG, '--lease-namespace', NS, ...UNAUTHENTICATED_AGENTS]);
    await gateway.waitFor(/leading/);
    await installWebhook(webhookFromDeploy(gateway, WEBHOOK));
    // The agent as a host process reads what its DaemonSet pod would: the host's /proc and cgroups.
    agent = run('agent-sim-real-node', 'agent', ['--node-name', nodeName, '--gateway', `127.0.0.1:${gateway.ports.agent}`, '--metrics-address', '127.0.0.1:0', '--kubeconfig', ADMIN_KUBECONFIG]);
    await agent.waitFor(/connected to gateway/);
    await patchNodeMetadata(nodeName, { labels: OPT_IN });
    client = queryClient(gateway.ports.grpc);
  });

  after(async () => {
    if (!node) return;
    await apps().deleteNamespacedDeployment({ name: APP, namespace: NS }).catch(() => {});
    await deleteNamespaceAndWait(NS, 120_000).catch((err: Error) => console.log(`# cleanup: ${err.message}`));
    await removeWebhook(WEBHOOK).catch(() => {});
    await customObjects().deleteClusterCustomObject({ ...POLICY_REF, name: POLICY }).catch(() => {});
    client?.close();
    await agent?.kill();
    await gateway?.kill();
    await optOutNode(nodeName).catch(() => {});
    // With the webhook gone the kubelet's next write (10 s apart while stored and computed differ) is raw again.
    await eventually('the real node back to raw allocatable', async () => {
      const n = await core().readNode({ name: nodeName });
      return cpuOf(n) === cpuOf(node!) && n.status?.allocatable?.memory === node!.status?.allocatable?.memory ? true : undefined;
    }, 60_000, 1_000).catch((err: Error) => console.log(`# cleanup: ${err.message}`));
  });

  it('places as many pods as the simulator says: against raw allocatable, and with the default policy', async (t) => {
    if (!node) return t.skip('no real node in this cluster (OVERSELL_REAL_NODE=0)');
    try {
      await checkAgainstSimulator(t, node);
    } catch (err) {
      if (!(err instanceof HostBusy)) throw err;
      console.log(`# skipped: ${err.message}`);
      t.skip(err.message);
    }
  });
});

/** The check itself, on the real node found in before(). */
async function checkAgainstSimulator(t: { skip: (why: string) => void }, node: V1Node): Promise<void> {
  started = Date.now();
  // The node's background, over the policy's whole window, quiet enough to leave the policy room.
  let seen = 'no answer';
  const quiet = await eventually(`a quiet host: the node's CPU p95 over a full ${DEFAULT_POLICY.windowMs / 1000} s window at most ${QUIET_CPU_MILLICORES}m, no pressure`, async () => {
    const s = await status().catch(() => undefined);
    if (!s?.window) return undefined;
    seen = `policy ${s.policy}; ${describeDecision(s)}`;
    if (s.policy !== POLICY) return undefined;
    const full = s.window.spanMs >= DEFAULT_POLICY.windowMs - 5_000;
    return full && s.window.cpuP95Millicores <= QUIET_CPU_MILLICORES && s.decision?.cpuBound !== 'pressure' ? s : undefined;
  }, 5 * 60_000, 1_000).catch((err: Error) => {
    const why = `${err.message}; last seen: ${seen}. Other work on this host counts as the node's usage: run the check on a quiet host`;
    // CI hosts are shared: there the check is skipped, loudly, rather than failed; run it with OVERSELL_E2E_REQUIRE_QUIET=1 to make a busy host a failure.
    if (process.env.OVERSELL_E2E_REQUIRE_QUIET === '1') assert.fail(why);
    return undefined;
  });
  if (!quiet) {
    t.skip(`no quiet minute in 5 minutes: ${seen}`);
    return;
  }
  const background = { cpu: quiet.window!.cpuP95Millicores, memory: quiet.window!.memoryMaxBytes };
  const scenario = scenarioFor(node, background);
  const replicas = (scenario.classes[0] as DeploymentClass).replicasPerNode.max;
  const sim = simulated(scenario);
  console.log(`# background after ${((Date.now() - started) / 1000).toFixed(0)} s: ${background.cpu}m CPU (p95), ${(background.memory / MI).toFixed(0)} MiB; each pod requests ${app.requests.cpu}m, ${app.requests.memory / MI} MiB and uses ${burnMillicores}m, ${holdMib} MiB`);
  console.log(`# simulator: ${sim.none} pods placed without oversell, ${sim.oversell} with the default policy (of ${replicas}); raw cpu ${cpuOf(node)}, cap ${DEFAULT_POLICY.cpu.maxRatio}x`);
  console.log(`# the scenario, as oversell simulate --scenario reads it:\n${scenarioText(scenario).replace(/^/gm, '#   ')}`);
  assert.ok(sim.oversell - sim.none > TOLERANCE, `the scenario must separate the policies by more than the tolerance: ${sim.none} vs ${sim.oversell}`);

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
            ...realNodePlacement(),
            terminationGracePeriodSeconds: 1,
            containers: [
              probeContainer('hold', ['hold', '-mib', String(holdMib)], { requests: { cpu: `${app.requests.cpu - burnMillicores}m`, memory: String(app.requests.memory) } }),
              // A CPU limit alone: the request defaults to it, and the CFS quota keeps the burn at it.
              probeContainer('burn', ['burn', '-threads', '1'], { limits: { cpu: `${burnMillicores}m` } }),
            ],
          },
        },
      },
    },
  });
  // Against raw allocatable the scheduler's fit check decides alone: no tolerance.
  const atRaw = await eventually('the pods that fit raw allocatable placed', async () => {
    const n = placed(await appPods()).length;
    return n > 0 && (await appPods()).length === replicas ? n : undefined;
  }, 60_000, 500);
  await sleep(2_000);
  const realNone = placed(await appPods()).length;
  console.log(`# ${((Date.now() - started) / 1000).toFixed(0)} s: ${realNone} pods placed against raw allocatable (${atRaw} at first)`);
  assert.equal(realNone, sim.none, 'requests against raw allocatable: the simulator and the scheduler must agree exactly');

  // The query API decides only from raw the webhook has seen and signed: a
  // kubelet write through the webhook first (the kubelet writes an unchanged
  // status only every 5 min, so a restart makes it write at once).
  await restartKubelet();
  await eventually('a decision the query API can show (the kubelet\'s write signed by the webhook)', async () => ((await status()).decision ? true : undefined), 60_000, 1_000);
  // Then once the gateway would grant more (past the startup grace), another
  // restart makes it write at once, and from then on it writes every 10 s
  // (what it reads back differs from raw).
  const rise = await eventually('the gateway to grant more CPU than raw', async () => {
    const s = await status();
    seen = describeDecision(s);
    return (s.decision?.allocatable?.cpuMillicores ?? 0) > Number(parseMilli(cpuOf(node!), 'raw cpu')) ? s : undefined;
  }, GRACE_MS + 90_000, 1_000).catch((err: Error) => busyHost(`${err.message}; last decision: ${seen}`));
  console.log(`# ${((Date.now() - started) / 1000).toFixed(0)} s: the gateway grants ${describeDecision(rise)}; restarting the kubelet for its first write`);
  await restartKubelet();

  const { count: realOversell, status: end } = await settledCount(8 * 60_000).catch((err: Error) => busyHost(err.message));
  const stored = await core().readNode({ name: nodeName });
  const pending = (await appPods()).length - realOversell;
  // The background as it was at the end: the node's p95 less what the placed pods are modelled to use.
  const backgroundAfter = end.window!.cpuP95Millicores - realOversell * burnMillicores;
  const simAfter = simulated(scenarioFor(node, { cpu: Math.max(0, backgroundAfter), memory: background.memory }));
  console.log(`# ${((Date.now() - started) / 1000).toFixed(0)} s: ${realOversell} pods placed with the default policy, ${pending} pending; allocatable cpu ${cpuOf(stored)} memory ${stored.status?.allocatable?.memory} (raw ${cpuOf(node)}, ${node.status?.allocatable?.memory}); ${describeDecision(end)}`);
  console.log(`# simulator ${sim.oversell} (background ${background.cpu}m before the pods); with the background at the end (${backgroundAfter}m) it would say ${simAfter.oversell}; tolerance ${TOLERANCE}`);
  assert.ok(pending > 0, 'pods must be left pending: the node is full, not the Deployment placed');
  // The background moves: the count must lie within the tolerance of what the simulator says for the backgrounds measured before and after.
  const low = Math.min(sim.oversell, simAfter.oversell) - TOLERANCE;
  const high = Math.max(sim.oversell, simAfter.oversell) + TOLERANCE;
  if (realOversell < low || realOversell > high) {
    await busyHost(`the real node placed ${realOversell} pods, the simulator ${sim.oversell} (background before) and ${simAfter.oversell} (after): outside ${low}..${high}`);
  }
  // What the gateway wrote holds what is bound.
  assert.ok(Number(parseMilli(cpuOf(stored), 'cpu')) >= realOversell * app.requests.cpu, `allocatable cpu ${cpuOf(stored)} below the ${realOversell} pods' requests`);
}
