// The static CPU manager on the real kubelet node (issue 45, item 3): an
// integer-CPU Guaranteed pod holds whole cores for itself, and the kubelet
// admits it only when that many cores are free in its exclusive pool, which
// inflated allocatable does not enlarge. The kubelet here runs with
// --cpu-manager-policy=static and --kube-reserved=cpu=500m: raw allocatable is
// 1500m of the host's 2 CPUs, and the CPU manager keeps ceil(500m) = 1 whole
// CPU for the shared pool, so 1 CPU can be held exclusively.
//
// On the inflated node:
//   - with the protected-room check (bindings.oversell.io), a 1-CPU pod fits
//     raw room and runs, a 2-CPU pod is refused at binding: 0 pods rejected by
//     the kubelet;
//   - without it (the webhook configuration before the fix), the scheduler binds
//     the 2-CPU pod against the inflated allocatable and the kubelet rejects it
//     at admission (UnexpectedAdmissionError, not enough cpus);
//   - the agent reads the kubelet's cpu_manager_state: once the 1-CPU pod runs,
//     the CPU cap is (raw - E) x maxRatio + E.
// The node's CPU is inflated by idle Burstable "filler" pods bound by name: the
// policy grants room above raw only where bound requests are used less than
// they ask, and the host's whole CPU usage counts against 1500m.
import assert from 'node:assert/strict';
import { existsSync, readFileSync, rmSync, } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { CoreV1Event, V1MutatingWebhookConfiguration, V1Node, V1Pod } from '@kubernetes/client-node';
import { ANNOTATION } from '../../gateway/admit/node-review.js';
import { parseMilli } from '../../lib/quantity.js';
import type { NodeStatus__Output } from '../../proto/gen/oversell/v1/NodeStatus.js';
import type { NodeUsageClient } from '../../proto/gen/oversell/v1/NodeUsage.js';
import { getNode, queryClient } from '../helpers/grpc.js';
import { ADMIN_KUBECONFIG, STATE, core } from './cluster.js';
import {
  customObjects, deleteNamespaceAndWait, ensureNamespace, eventually, installPolicyCrd, installWebhook, OPT_IN, POLICY_REF, removeWebhook, replaceWebhook, startGatewayProcess, UNAUTHENTICATED_AGENTS, upsertPolicy, webhookFromDeploy, type GatewayProc,
} from './fixtures.js';
import { run, type Proc } from './processes.js';
import { findRealNode, kubeletLogSince, kubeletLogSize, noOtherPodsOn, optOutNode, patchNodeMetadata, podInPhase, realNodePod, restartKubelet } from './real-node.js';

const NS = 'oversell-e2e-cpu-static';
const WEBHOOK = 'oversell-e2e-cpu-static';
const POLICY = 'e2e-cpu-static';
const POOL = 'oversell.io/e2e-pool';
const POOL_VALUE = 'cpu-static';
/** Static policy; 500m kube-reserved CPU: the CPU manager reserves ceil(500m) = 1 CPU, raw allocatable is capacity - 500m. */
const STATIC_ARGS = '--cpu-manager-policy=static --kube-reserved=cpu=500m';
const KUBE_RESERVED_MILLI = 500;
const STATIC_ARGS_NOW = `${process.env.OVERSELL_KUBELET_EXTRA_ARGS ?? ''} ${STATIC_ARGS}`.trim();
const MAX_RATIO = 4;
/** The over-raw pod: more exclusive CPUs than the node's exclusive pool (and its raw allocatable) has. */
const OVER_CPUS = 2;
const FIT_CPUS = 1;
/** Free allocatable (above bound requests) the over-raw pod needs from the scheduler, with a margin for the allocatable moving meanwhile. */
const ROOM_NEEDED = OVER_CPUS * 1000 + 150;
const _KUBELET_LOG = join(STATE, 'logs', 'kubelet.log');
/** A kubelet admission refusal as the pod's status says it (pkg/kubelet/lifecycle). */
const ADMISSION_REASONS = /^(OutOf\w+|UnexpectedAdmissionError|TopologyAffinityError|SMTAlignmentError|InvalidNodeInfo|UnexpectedPredicateFailureType)$/;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const milli = (q: string | undefined) => Number(parseMilli(q ?? '0', 'cpu'));
const cpuOf = (n: V1Node) => milli(n.status?.allocatable?.cpu);

let node: V1Node | undefined;
let nodeName = '';
/** The kubelet's extra flags before this file: what after() puts back. */
const originalExtraArgs = process.env.OVERSELL_KUBELET_EXTRA_ARGS;
let originalCpu = '';
let kubeletRoot = '';
let switched = false;
let gateway: GatewayProc | undefined;
let agent: Proc | undefined;
let client: NodeUsageClient | undefined;
let raw = 0;
let fillers = 0;
let fillerMilli = 0;
const t0 = Date.now();
const at = () => `${((Date.now() - t0) / 1000).toFixed(1)} s`;

/** The kubelet's --root-dir, from its command line (cluster.sh's pid file); its cpu_manager_state is there. */
function kubeletRootDir(): string {
  const fallback = join(STATE, 'node', 'kubelet', 'root');
  try {
    const pid = readFileSync(join(STATE, 'pids', 'kubelet.pid'), 'utf8').trim();
    const args = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0');
    const flag = args.find((a) => a.startsWith('--root-dir='));
    return flag ? flag.slice('--root-dir='.length) : fallback;
  } catch {
    return fallback;
  }
}

/**
 * The kubelet restarted with these extra flags (none: undefined), its CPU
 * manager checkpoint removed meanwhile (a kubelet refuses to start on one
 * written under another policy), Ready again.
 */
const restartKubeletWith = (extraArgs: string | undefined): Promise<void> =>
  restartKubelet({ extraArgs: extraArgs ?? null, whileStopped: () => rmSync(join(kubeletRoot, 'cpu_manager_state'), { force: true }), readyNode: nodeName });


async function podsOnNode(): Promise<V1Pod[]> {
  return (await core().listPodForAllNamespaces({ fieldSelector: `spec.nodeName=${nodeName}` })).items.filter((p) => !['Succeeded', 'Failed'].includes(p.status?.phase ?? ''));
}

/** CPU requests of the pods bound to the node and not finished: what the scheduler counts against allocatable. */
async function boundCpu(): Promise<number> {
  let sum = 0;
  for (const p of await podsOnNode()) for (const c of p.spec?.containers ?? []) sum += milli(c.resources?.requests?.cpu);
  return sum;
}

const status = (): Promise<NodeStatus__Output> => getNode(client!, nodeName);
const describeDecision = (s: NodeStatus__Output) =>
  `allocatable cpu ${s.decision?.allocatable?.cpuMillicores}m (${s.decision?.cpuBound}), cap ${s.decision?.cap?.cpuMillicores}m, floor ${s.decision?.floor?.cpuMillicores}m, usage ${s.decision?.usage?.cpuMillicores}m, ` +
  `CPU manager ${s.latest?.cpuManager ? `${s.latest.cpuManager.staticPolicy ? 'static' : 'none'}, ${s.latest.cpuManager.exclusiveCpus} exclusive` : 'unknown'}: ${s.decision?.reason}`;

/** A Guaranteed pod asking whole CPUs, placed by the scheduler on the real node. */
function exclusivePod(name: string, cpus: number): V1Pod {
  const resources = { cpu: String(cpus), memory: '32Mi' };
  return realNodePod(name, ['sleep', '3600'], { namespace: NS, app: 'cpu-static', resources: { requests: resources, limits: resources } });
}

/** An idle Burstable pod bound by name (the kubelet admits it against the stored allocatable): bound requests barely used. */
async function addFiller(cpuMilli: number): Promise<void> {
  const name = `filler-${++fillers}`;
  await core().createNamespacedPod({
    namespace: NS,
    body: realNodePod(name, ['sleep', '3600'], { namespace: NS, app: 'cpu-static-filler', nodeName, resources: { requests: { cpu: `${cpuMilli}m`, memory: '16Mi' } } }),
  });
  const p = await podInPhase(NS, name, ['Running', 'Failed'], 120_000);
  assert.equal(p.status?.phase, 'Running', `${name} (${cpuMilli}m) refused by the kubelet: ${p.status?.reason} ${p.status?.message}`);
  fillerMilli += cpuMilli;
  console.log(`# ${at()}: ${name} requesting ${cpuMilli}m running (fillers ${fillerMilli}m)`);
}

/**
 * Until the stored node's CPU allocatable exceeds the bound requests by
 * `needed`: filler pods added while the grant stays put (the policy grants room
 * above raw in proportion to requests bound and little used).
 */
async function ensureRoom(needed: number, fillerBudget: number, timeoutMs = 180_000): Promise<{ allocatable: number; bound: number }> {
  const start = Date.now();
  let last = -1;
  let since = Date.now();
  while (Date.now() - start < timeoutMs) {
    const allocatable = cpuOf(await core().readNode({ name: nodeName }));
    const bound = await boundCpu();
    if (allocatable - bound >= needed) return { allocatable, bound };
    if (allocatable !== last) {
      const s = await status().catch(() => undefined);
      console.log(`# ${at()}: allocatable cpu ${allocatable}m, bound ${bound}m, ${allocatable - bound}m free (need ${needed}m)${s ? `; ${describeDecision(s)}` : ''}`);
      last = allocatable;
      since = Date.now();
    }
    // No filler yet, or the grant still for 25 s (two kubelet writes): more bound requests.
    const free = allocatable - bound;
    if ((fillers === 0 || Date.now() - since > 25_000) && fillerMilli < fillerBudget && free >= 300) {
      await addFiller(Math.min(free - 100, 1400, fillerBudget - fillerMilli));
      since = Date.now();
    }
    await sleep(1000);
  }
  const s = await status().catch(() => undefined);
  return assert.fail(`no ${needed}m of free CPU allocatable in ${timeoutMs / 1000} s (fillers ${fillerMilli}m); ${s ? describeDecision(s) : 'no gateway answer'}`);
}

async function eventsOf(name: string): Promise<CoreV1Event[]> {
  return (await core().listNamespacedEvent({ namespace: NS, fieldSelector: `involvedObject.name=${name}` })).items;
}
const countOf = (events: CoreV1Event[]) => events.reduce((sum, e) => sum + (e.count ?? 1) + (e.series?.count ?? 0), 0);

/** The pods of this file the kubelet refused at admission. */
async function kubeletRejections(): Promise<V1Pod[]> {
  const pods = (await core().listNamespacedPod({ namespace: NS })).items;
  return pods.filter((p) => p.status?.phase === 'Failed' && (ADMISSION_REASONS.test(p.status?.reason ?? '') || /not enough cpus/i.test(p.status?.message ?? '')));
}

async function deletePod(name: string): Promise<void> {
  await core().deleteNamespacedPod({ namespace: NS, name, gracePeriodSeconds: 0 }).catch(() => {});
  await eventually(`pod ${name} gone`, () => core().readNamespacedPod({ namespace: NS, name }).then(() => undefined, () => true), 60_000, 250);
}

/** The gateway's view once the agent reports `exclusive` CPUs held (and, with `decided`, a decision made with them); returns it. */
async function reportedExclusive(exclusive: number, decided = true, timeoutMs = 60_000): Promise<NodeStatus__Output> {
  let last: NodeStatus__Output | undefined;
  return eventually(`the agent reporting ${exclusive} exclusive CPU(s)`, async () => {
    const s = (last = await status().catch(() => last));
    return s?.latest?.cpuManager?.staticPolicy && s.latest.cpuManager.exclusiveCpus === exclusive && (!decided || s.decision?.cap) ? s : undefined;
  }, timeoutMs, 250).catch((err: Error) => assert.fail(`${err.message}; the gateway's view: ${last ? `${JSON.stringify(last.latest?.cpuManager)}; ${describeDecision(last)}` : 'none'}`));
}

describe('static CPU manager on the real kubelet node', { timeout: 15 * 60_000 }, () => {
  before(async () => {
    node = await findRealNode();
    if (!node) return;
    nodeName = node.metadata!.name!;
    originalCpu = node.status?.allocatable?.cpu ?? '';
    kubeletRoot = kubeletRootDir();
    // Another file's pods would hold CPU the checks count, and a policy switch under running pods leaves their cpusets as they were.
    await noOtherPodsOn(nodeName);
    await ensureNamespace(NS);
    await core().createNamespacedServiceAccount({ namespace: NS, body: { metadata: { name: 'default' } } }).catch(() => {});

    // The static policy first, before any webhook: the kubelet's own write carries its new raw allocatable.
    const restartAt = Date.now();
    switched = true;
    await restartKubeletWith(STATIC_ARGS_NOW);
    const capacity = milli(node.status?.capacity?.cpu);
    raw = capacity - KUBE_RESERVED_MILLI;
    await eventually(`the kubelet's allocatable cpu ${raw}m stored`, async () => {
      const n = await core().readNode({ name: nodeName });
      return cpuOf(n) === raw && n.status?.conditions?.find((c) => c.type === 'Ready')?.status === 'True' ? n : undefined;
    }, 60_000, 250);
    const restartedIn = Date.now() - restartAt;
    const state = JSON.parse(readFileSync(join(kubeletRoot, 'cpu_manager_state'), 'utf8')) as { policyName: string; defaultCpuSet: string };
    assert.equal(state.policyName, 'static', 'the kubelet runs the static CPU manager');

    await installPolicyCrd();
    await upsertPolicy(POLICY, {
      nodeSelector: { matchLabels: { [POOL]: POOL_VALUE } },
      priority: 1000,
      window: '10s',
      staleAfter: '30s',
      calmPeriod: '0s',
      startupGrace: '0s',
      cpu: { maxRatio: MAX_RATIO, targetUtilization: 1, minLoadFactor: 0.01, pressureThreshold: 100, riskBudget: { enabled: false } },
      memory: { maxRatio: 1, riskBudget: { enabled: false } },
      relief: { enabled: false },
    });
    gateway = await startGatewayProcess(undefined, undefined, ['--policies', 'crd', '--kubeconfig', ADMIN_KUBECONFIG, '--lease-namespace', 'default', ...UNAUTHENTICATED_AGENTS]);
    await gateway.waitFor(/leading/);
    client = queryClient(gateway.ports.grpc);
    await installWebhook(webhookFromDeploy(gateway, WEBHOOK));
    // The agent as a host process, as root: it reads the host's /proc and cgroups and the kubelet's checkpoint.
    agent = run('agent-cpu-static', 'agent', [
      '--node-name', nodeName, '--gateway', `127.0.0.1:${gateway.ports.agent}`, '--metrics-address', '127.0.0.1:0', '--kubeconfig', ADMIN_KUBECONFIG,
      '--kubelet-root-dir', kubeletRoot,
    ]);
    await agent.waitFor(/connected to gateway/);
    await agent.waitFor(/^static CPU manager/, 30_000);
    // The gateway holds the node's usage before the kubelet's next write: a write it cannot decide passes as raw,
    // and a kubelet that reads back what it computed writes again only after 5 min.
    await reportedExclusive(0, false);
    await patchNodeMetadata(nodeName, { labels: { ...OPT_IN, [POOL]: POOL_VALUE } });
    await restartKubeletWith(STATIC_ARGS_NOW); // a write at once, through the webhook
    const recorded = await eventually(`the kubelet's raw cpu ${raw}m recorded on the node`, async () => {
      const n = await core().readNode({ name: nodeName });
      return milli(n.metadata?.annotations?.[ANNOTATION.rawCpu]) === raw ? n : undefined;
    }, 60_000, 250);
    console.log(`# static CPU manager: kubelet restarted with ${STATIC_ARGS} (allocatable ${raw}m stored ${restartedIn} ms after the restart began); capacity ${capacity}m, raw allocatable ${recorded.metadata?.annotations?.[ANNOTATION.rawCpu]} (was ${originalCpu}), checkpoint ${join(kubeletRoot, 'cpu_manager_state')}: policy ${state.policyName}, shared pool ${state.defaultCpuSet}`);
  });

  after(async () => {
    if (!node) return;
    const step = async (what: string, f: () => Promise<unknown>) => {
      try {
        await f();
      } catch (err) {
        console.log(`# cleanup: ${what}: ${(err as Error).message}`);
      }
    };
    await step('pods', () => deleteNamespaceAndWait(NS, 120_000));
    await step('webhook', () => removeWebhook(WEBHOOK));
    await step('policy', () => customObjects().deleteClusterCustomObject({ ...POLICY_REF, name: POLICY }));
    client?.close();
    await step('agent', async () => agent?.kill());
    await step('gateway', async () => gateway?.kill());
    await step('node labels', async () => {
      await optOutNode(nodeName);
      await patchNodeMetadata(nodeName, { labels: { [POOL]: null } });
    });
    if (switched) {
      await step('kubelet flags', () => restartKubeletWith(originalExtraArgs));
      await step('kubelet back to raw', () => eventually(`the real node's allocatable cpu back to ${originalCpu}`, async () => {
        const n = await core().readNode({ name: nodeName });
        return n.status?.allocatable?.cpu === originalCpu && n.status?.conditions?.find((c) => c.type === 'Ready')?.status === 'True' ? true : undefined;
      }, 90_000, 500));
      const state = existsSync(join(kubeletRoot, 'cpu_manager_state')) ? (JSON.parse(readFileSync(join(kubeletRoot, 'cpu_manager_state'), 'utf8')) as { policyName: string }).policyName : 'none written';
      console.log(`# cleanup: kubelet restarted with its original flags (${originalExtraArgs ?? 'none extra'}): CPU manager ${state}, allocatable cpu ${(await core().readNode({ name: nodeName }).catch(() => undefined))?.status?.allocatable?.cpu}`);
    }
  });

  it('integer-CPU Guaranteed pods on an inflated node: 0 rejected by the kubelet with the protected-room check, rejected without it; the cap follows (raw - E) x ratio + E', async (t) => {
    if (!node) return t.skip('no real node in this cluster (OVERSELL_REAL_NODE=0)');

    // --- The node inflated past raw by enough for the over-raw pod to pass the scheduler's fit check.
    const inflateAt = Date.now();
    const room = await ensureRoom(ROOM_NEEDED, MAX_RATIO * raw - ROOM_NEEDED - 500);
    const before0 = await reportedExclusive(0);
    assert.ok(room.allocatable > raw, 'CPU inflated above raw');
    assert.equal(before0.decision!.cap!.cpuMillicores, raw * MAX_RATIO, 'no exclusive CPUs: cap = raw x maxRatio');
    console.log(`# static CPU manager: inflated in ${((Date.now() - inflateAt) / 1000).toFixed(1)} s: allocatable cpu ${room.allocatable}m (raw ${raw}m), bound ${room.bound}m (idle fillers), ${room.allocatable - room.bound}m free; ${describeDecision(before0)}`);

    // --- With the protected-room check (the full deploy/base/webhook.yaml).
    const logFrom = kubeletLogSize();
    const overAt = Date.now();
    await core().createNamespacedPod({ namespace: NS, body: exclusivePod('over-raw', OVER_CPUS) });
    const refusals = await eventually('the scheduler told why the over-raw binding failed', async () => {
      const said = (await eventsOf('over-raw')).filter((e) => /no raw room/.test(e.message ?? ''));
      return said.length > 0 ? said : undefined;
    }, 60_000);
    const refusedIn = Date.now() - overAt;
    assert.match(refusals[0]!.message ?? '', /bindings\.oversell\.io/);

    const fitAt = Date.now();
    await core().createNamespacedPod({ namespace: NS, body: exclusivePod('fits-raw', FIT_CPUS) });
    const fit = await podInPhase(NS, 'fits-raw', ['Running', 'Failed'], 120_000);
    assert.equal(fit.status?.phase, 'Running', `the pod fitting raw room on the inflated node: ${fit.status?.reason} ${fit.status?.message}`);
    assert.equal(fit.spec?.nodeName, nodeName);
    const fitRunningAt = Date.now();
    const fitIn = fitRunningAt - fitAt;
    const checkpoint = readFileSync(join(kubeletRoot, 'cpu_manager_state'), 'utf8');
    assert.match(checkpoint, new RegExp(fit.metadata!.uid!), 'the kubelet assigned the pod exclusive CPUs');

    // A few more of the scheduler's retries of the over-raw pod.
    await sleep(10_000);
    const over = await core().readNamespacedPod({ namespace: NS, name: 'over-raw' });
    assert.equal(over.spec?.nodeName, undefined, 'the over-raw pod is never bound');
    const withCheck = await kubeletRejections();
    const attempts = countOf((await eventsOf('over-raw')).filter((e) => /no raw room/.test(e.message ?? '')));
    const denied = kubeletLogSince(logFrom).split('\n').filter((l) => /not enough cpus|admission denied|Failed to admit/i.test(l));
    const stored = await core().readNode({ name: nodeName });
    console.log([
      `# static CPU manager, with the protected-room check: node allocatable cpu ${stored.status?.allocatable?.cpu} (raw ${raw}m)`,
      `#   fits-raw (${FIT_CPUS} CPU, Guaranteed): bound and Running ${fitIn} ms after creation, exclusive cpuset in the checkpoint: ${checkpoint.trim()}`,
      `#   over-raw (${OVER_CPUS} CPUs, Guaranteed): refused at binding ${attempts} time(s), the first ${refusedIn} ms after creation; still unbound: ${refusals[0]!.message?.slice(0, 220)}...`,
      `#   pods rejected by the kubelet at admission: ${withCheck.length}; kubelet log admission refusals: ${denied.length}`,
    ].join('\n'));
    assert.equal(withCheck.length, 0, `rejected by the kubelet: ${withCheck.map((p) => `${p.metadata?.name} ${p.status?.reason}: ${p.status?.message}`).join('; ')}`);
    assert.equal(denied.length, 0, denied.join('\n'));

    // --- The cap with the exclusive pod running: only the shared pool is inflated.
    const after1 = await reportedExclusive(FIT_CPUS);
    const expectedCap = (raw - FIT_CPUS * 1000) * MAX_RATIO + FIT_CPUS * 1000;
    assert.equal(after1.decision!.cap!.cpuMillicores, expectedCap, `cap = (${raw}m - ${FIT_CPUS * 1000}m) x ${MAX_RATIO} + ${FIT_CPUS * 1000}m`);
    const bound1 = await boundCpu();
    // The grant never passes the cap, but for requests the kubelet has admitted already (the floor).
    const capped = await eventually('the stored allocatable within the new cap (or the admitted requests)', async () => {
      const n = await core().readNode({ name: nodeName });
      return cpuOf(n) <= Math.max(expectedCap, bound1) ? n : undefined;
    }, 30_000, 250);
    const cappedIn = Date.now() - fitRunningAt;
    console.log(`# static CPU manager, cap: ${cappedIn} ms after the exclusive pod ran (the agent reports it, the gateway lowers the node), with ${FIT_CPUS} exclusive CPU reported the cap is ${after1.decision?.cap?.cpuMillicores}m = (${raw}m - ${FIT_CPUS * 1000}m) x ${MAX_RATIO} + ${FIT_CPUS * 1000}m, was ${before0.decision?.cap?.cpuMillicores}m = ${raw}m x ${MAX_RATIO}; stored allocatable cpu ${capped.status?.allocatable?.cpu}, granted annotation ${capped.metadata?.annotations?.[ANNOTATION.grantedCpu]} (bound ${bound1}m); ${describeDecision(after1)}`);

    // --- Before the fix: no bindings.oversell.io. The exclusive pod gone (E back to 0), the node inflated again.
    await deletePod('over-raw');
    await deletePod('fits-raw');
    await reportedExclusive(0, true, 90_000);
    const plain: V1MutatingWebhookConfiguration = webhookFromDeploy(gateway!, WEBHOOK);
    plain.webhooks = plain.webhooks?.filter((h) => h.name !== 'bindings.oversell.io');
    await replaceWebhook(plain);
    await sleep(2_000); // the API server's view of webhook configurations follows within a second
    const room2 = await ensureRoom(ROOM_NEEDED, MAX_RATIO * raw - ROOM_NEEDED - 500);
    const logFrom2 = kubeletLogSize();
    const noCheckAt = Date.now();
    await core().createNamespacedPod({ namespace: NS, body: exclusivePod('over-raw-nocheck', OVER_CPUS) });
    const bound = await eventually('the over-raw pod bound by the scheduler', async () => {
      const p = await core().readNamespacedPod({ namespace: NS, name: 'over-raw-nocheck' });
      return p.spec?.nodeName ? p : undefined;
    }, 60_000, 250);
    const boundIn = Date.now() - noCheckAt;
    const outcome = await podInPhase(NS, 'over-raw-nocheck', ['Running', 'Failed'], 120_000);
    const rejectedIn = Date.now() - noCheckAt;
    const withoutCheck = await kubeletRejections();
    const kubeletSaid = kubeletLogSince(logFrom2).split('\n').filter((l) => /not enough cpus|admission denied|Failed to admit|Allocate failed/i.test(l));
    console.log([
      `# static CPU manager, without the protected-room check: node allocatable cpu ${room2.allocatable}m (raw ${raw}m), bound ${room2.bound}m`,
      `#   over-raw-nocheck (${OVER_CPUS} CPUs, Guaranteed): bound to ${bound.spec?.nodeName} ${boundIn} ms after creation; ${outcome.status?.phase} ${rejectedIn} ms after creation`,
      `#   kubelet's verdict: reason ${outcome.status?.reason}, message: ${outcome.status?.message}`,
      `#   pods rejected by the kubelet at admission: ${withoutCheck.length}; kubelet log lines (${kubeletSaid.length}):`,
      ...kubeletSaid.slice(0, 5).map((l) => `#     ${l.slice(0, 400)}`),
      `# static CPU manager: rejected at kubelet admission on the inflated node: ${withCheck.length} with the check, ${withoutCheck.length} without`,
    ].join('\n'));
    assert.equal(bound.spec?.nodeName, nodeName);
    assert.equal(outcome.status?.phase, 'Failed', 'the kubelet rejects the over-raw pod: its exclusive pool has fewer CPUs than the pod asks');
    assert.equal(outcome.status?.reason, 'UnexpectedAdmissionError');
    assert.match(outcome.status?.message ?? '', /not enough cpus/i);
    assert.equal(withoutCheck.length, 1);
  });
});
