// Fault: the API server restarted while oversell runs (issue 8). The real
// kube-apiserver process is stopped for longer than the gateway's leader lease
// (15 s) and started again with the same flags (cluster.sh stop-component /
// start-component), while a gateway (--policies crd, lease holder, status
// writer), one agent and one kubelet keep running. The gateway must serve from
// memory meanwhile and pick every watch, the lease and its own writes up again
// afterwards, without a restart of its own.
import { SUMMARY_SEND_EVERY_MS } from '../../gateway/config/defaults.js';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { promisify } from 'node:util';
import { after, before, describe, it } from 'node:test';
import { CoordinationV1Api, type V1Node } from '@kubernetes/client-node';
import { ANNOTATION } from '../../gateway/admit/node-review.js';
import { postHttps } from '../helpers/gateway.js';
import { getNode, queryClient } from '../helpers/grpc.js';
import { ADMIN_KUBECONFIG, CLUSTER_SH, adminConfig, cluster, core, kubeletPatchStatus, kubeletStatus } from './cluster.js';
import { GI, OPT_IN, POLICY_REF, UNAUTHENTICATED_AGENTS, customObjects, eventually, fakeNode, installPolicyCrd, installWebhook, pod, removeWebhook, startGatewayProcess, untilWrite, upsertPolicy, webhookFromDeploy, type FakeNode, type GatewayProc } from './fixtures.js';

const WEBHOOK = 'oversell-restart-e2e';
const IDENTITY = 'e2e-restart-gateway';
const LEASE = { name: 'oversell-gateway', namespace: 'default' };
const POLICY = 'restart-pool';
const POOL = { pool: 'restart' };
const NODE = 'e2e-restart';
/** How long the API server stays dead once its process is gone: with the 10 s it takes to stop, longer than the lease (15 s) and several 5 s watch retries. */
const DEAD_MS = 15_000;
const execFileAsync = promisify(execFile);

let gateway: GatewayProc;
let node: FakeNode;
let startedAt = 0;
let stopping: Promise<void> | undefined;
let stoppedAt = 0;
let goneAt = 0;
let readyAt = 0;
const measured: Record<string, number> = {};

const alloc = (n: V1Node) => n.status?.allocatable?.cpu;
const lease = () => adminConfig().makeApiClient(CoordinationV1Api).readNamespacedLease(LEASE);

interface LogLine { level: number; time: string; msg: string }
/**
 * The gateway's log from `since` on: JSON lines, and the raw text (stderr, where
 * a crash would print) from the first line of this run. The file is appended to across runs.
 */
function gatewayLog(since = startedAt): { lines: LogLine[]; text: string } {
  const all = readFileSync(gateway.logFile, 'utf8').split('\n');
  const parsed = all.map((line) => {
    try {
      return JSON.parse(line) as LogLine;
    } catch {
      return undefined;
    }
  });
  const first = parsed.findIndex((l) => l !== undefined && Date.parse(l.time) >= since);
  if (first < 0) return { lines: [], text: '' };
  return { lines: parsed.slice(first).filter((l): l is LogLine => l !== undefined && Date.parse(l.time) >= since), text: all.slice(first).join('\n') };
}
const logged = (msg: RegExp, since: number) => gatewayLog(since).lines.find((l) => msg.test(l.msg));

/** What a kubelet does through the outage: a status write every second, each answer kept. */
interface Write { at: number; status?: number; cpu?: string; error?: string }
function kubeletLoop(n: FakeNode, everyMs = 1000): { writes: Write[]; stop(): Promise<void> } {
  const writes: Write[] = [];
  let running = true;
  const done = (async () => {
    while (running) {
      const at = Date.now();
      try {
        const res = await kubeletPatchStatus(n.creds, n.name, kubeletStatus(n.raw));
        writes.push({ at, status: res.status, cpu: alloc(res.body) });
      } catch (err) {
        writes.push({ at, error: String((err as Error).message) });
      }
      await new Promise((r) => setTimeout(r, everyMs));
    }
  })();
  return { writes, stop: async () => { running = false; await done; } };
}

/** An AdmissionReview as the API server would send it for the kubelet's next write, posted to the gateway directly. */
async function reviewNow(stored: V1Node): Promise<{ allowed: boolean; cpu?: string }> {
  const object = structuredClone(stored);
  object.status = { ...object.status, allocatable: { ...node.raw, pods: '110' } };
  const uid = `restart-${Date.now()}`;
  const res = await postHttps(gateway, '/mutate/nodes', JSON.stringify({
    apiVersion: 'admission.k8s.io/v1',
    kind: 'AdmissionReview',
    request: {
      uid, kind: { group: '', version: 'v1', kind: 'Node' }, resource: { group: '', version: 'v1', resource: 'nodes' },
      subResource: 'status', name: stored.metadata?.name, operation: 'UPDATE',
      userInfo: { username: `system:node:${stored.metadata?.name}`, groups: ['system:nodes'] }, object, oldObject: stored,
    },
  }));
  assert.equal(res.status, 200, res.body);
  const { response } = res.json() as { response: { uid: string; allowed: boolean; patch?: string } };
  assert.equal(response.uid, uid);
  const ops = response.patch ? (JSON.parse(Buffer.from(response.patch, 'base64').toString()) as Array<{ path: string; value?: string }>) : [];
  return { allowed: response.allowed, cpu: ops.find((o) => o.path === '/status/allocatable/cpu')?.value };
}

describe('the API server restarted while oversell runs', { timeout: 10 * 60_000 }, () => {
  let kubelet: ReturnType<typeof kubeletLoop> | undefined;
  let beforeOutage: V1Node;

  before(async () => {
    startedAt = Date.now();
    await installPolicyCrd();
    await upsertPolicy(POLICY, { nodeSelector: { matchLabels: POOL }, cpu: { maxRatio: 1.5 } });
    gateway = await startGatewayProcess(undefined, undefined, [
      '--policies', 'crd', '--kubeconfig', ADMIN_KUBECONFIG, '--lease-namespace', LEASE.namespace, '--identity', IDENTITY,
      ...UNAUTHENTICATED_AGENTS,
    ]);
    // A lease left by a gateway killed in another file expires within 15 s.
    await gateway.waitFor(/^leading/, 30_000);
    await installWebhook(webhookFromDeploy(gateway, WEBHOOK));
    node = await fakeNode(NODE, { labels: { ...OPT_IN, ...POOL }, usage: { cpuMillicores: 200, memoryWorkingSetBytes: 1 * GI } });
    // 3 cpu of 4 bound: the policy's 1.5x cap is what limits the grant (6), 2x later (8).
    for (let i = 0; i < 3; i++) await core().createNamespacedPod({ namespace: 'default', body: pod(`${NODE}-${i}`, '1', '1Gi', { nodeName: NODE }) });
    await node.startAgent(gateway);
  });

  after(async () => {
    await kubelet?.stop();
    // Whatever failed, the next test files need the API server back.
    await stopping?.catch(() => {});
    cluster('start-component', 'apiserver'); // says "already running" when it is
    await node?.stop();
    await gateway?.kill(); // SIGTERM: the lease is handed back at once for the next file's gateway
    await removeWebhook(WEBHOOK).catch(() => {});
    await customObjects().deleteClusterCustomObject({ ...POLICY_REF, name: POLICY }).catch(() => {});
    for (let i = 0; i < 4; i++) await core().deleteNamespacedPod({ name: `${NODE}-${i}`, namespace: 'default', gracePeriodSeconds: 0 }).catch(() => {});
    await core().deleteNode({ name: NODE }).catch(() => {});
    console.log(`# measured: ${JSON.stringify(measured)}`);
  });

  it('1. before: kubelet writes are inflated by the policy, the gateway holds the lease', async () => {
    beforeOutage = await untilWrite(node, 'the 1.5x cap', (s) => alloc(s) === '6', 30_000);
    assert.match(beforeOutage.metadata?.annotations?.[ANNOTATION.reason] ?? '', new RegExp(`^policy ${POLICY}; cpu 4000m->6000m`));
    assert.equal((await lease()).spec?.holderIdentity, IDENTITY);
  });

  it('2. during the outage the gateway answers the webhook and the query API from memory; the agent keeps streaming', async () => {
    kubelet = kubeletLoop(node);
    const client = queryClient(gateway.ports.grpc);
    let lastSeq = (await getNode(client, NODE)).latest?.seq ?? 0;
    let lastAdvance = Date.now();
    stoppedAt = Date.now();
    // SIGTERM: the API server stops listening at once but holds its open watches
    // until cluster.sh SIGKILLs it after 10 s. Checked all along, not blocked on it.
    stopping = execFileAsync('bash', [CLUSTER_SH, 'stop-component', 'apiserver'], { encoding: 'utf8' }).then(({ stdout }) => {
      goneAt = Date.now();
      for (const line of stdout.trim().split('\n')) console.log(`# ${line}`);
    });
    let checks = 0;
    while (!goneAt || Date.now() - goneAt < DEAD_MS) {
      await new Promise((r) => setTimeout(r, 2000));
      assert.equal(gateway.child.exitCode, null, 'the gateway is still running');
      // The query API: the node's data keeps arriving from its agent.
      const status = await getNode(client, NODE);
      assert.equal(status.connected, true);
      // A steady node's agent sends at least every --agent-send-every (20 s with summaries, the default; docs/architecture.md).
      assert.ok(status.ageMs < SUMMARY_SEND_EVERY_MS + 2000, `data ${status.ageMs} ms old`);
      if ((status.latest?.seq ?? 0) > lastSeq) lastAdvance = Date.now();
      assert.ok(Date.now() - lastAdvance < SUMMARY_SEND_EVERY_MS + 2500, `seq ${status.latest?.seq} still ${lastSeq} after ${Date.now() - lastAdvance} ms`);
      lastSeq = status.latest?.seq ?? 0;
      assert.equal(status.policy, POLICY, 'the last known policies stay in force');
      // The webhook: the review the kubelet's next write would bring gets the same inflation.
      const answer = await reviewNow(beforeOutage);
      assert.equal(answer.allowed, true);
      assert.equal(answer.cpu, '6');
      checks++;
    }
    await stopping;
    measured.stopMs = goneAt - stoppedAt;
    assert.ok(checks >= 8, `${checks} checks during the outage`);
    await assert.rejects(node.heartbeat(), /ECONNREFUSED/, 'the API server is really gone');
    // It noticed: the lease could not be renewed, so status writes paused.
    assert.ok(logged(/leader lease not renewed/, stoppedAt), 'the gateway saw the lease renewal fail');
    assert.ok(logged(/no longer leading/, stoppedAt), 'and paused its status writes');
    const failed = kubelet.writes.filter((w) => w.at > stoppedAt + 1000);
    assert.ok(failed.length > 0 && failed.every((w) => w.error), `every kubelet write failed while the API server was down: ${JSON.stringify(failed.filter((w) => !w.error))}`);
  });

  it('3. after the restart: kubelet writes are inflated again, never rejected; the policy watch re-synced; the lease is ours again', async () => {
    await stopping; // the old process is gone (if test 2 failed early, it may still be stopping)
    const restartAt = Date.now();
    cluster('start-component', 'apiserver');
    readyAt = Date.now();
    measured.outageMs = readyAt - stoppedAt;
    measured.startToReadyMs = readyAt - restartAt;
    // A policy change right after the restart: applied once the policy informer has re-listed, no gateway restart.
    await eventually('the policy change to be accepted', async () => {
      await upsertPolicy(POLICY, { nodeSelector: { matchLabels: POOL }, cpu: { maxRatio: 2 } });
      return true;
    }, 30_000, 500);
    const changedAt = Date.now();
    const firstStored = await eventually('a kubelet write stored after the restart', async () =>
      kubelet?.writes.find((w) => w.at >= restartAt && w.status === 200), 30_000);
    measured.firstWriteAfterStartMs = firstStored.at - restartAt;
    const applied = await eventually('the 2x cap from the policy changed after the restart', async () =>
      kubelet?.writes.find((w) => w.at >= changedAt && w.cpu === '8'), 30_000);
    measured.policyChangeAppliedMs = applied.at - changedAt;
    measured.policyAppliedAfterReadyMs = applied.at - readyAt;

    const leading = await eventually('"leading" in the gateway log after the outage', async () => logged(/^leading/, stoppedAt), 30_000);
    measured.leaseBackAfterStartMs = Date.parse(leading.time) - restartAt;
    const renewed = await eventually('the lease renewed by this gateway after the restart', async () => {
      const l = await lease();
      const renewTime = l.spec?.renewTime ? new Date(l.spec.renewTime).getTime() : 0;
      return renewTime >= readyAt ? l : undefined;
    }, 30_000);
    assert.equal(renewed.spec?.holderIdentity, IDENTITY, 'the one gateway holds it, no other identity took over');

    // At least three answered writes to judge: on a fast restart the policy and the lease can be back by the second.
    await eventually('three kubelet writes stored after the restart', async () =>
      (kubelet?.writes.filter((w) => w.at >= restartAt && w.status === 200).length ?? 0) >= 3 ? true : undefined, 30_000);
    await kubelet?.stop();
    const writes = kubelet?.writes.filter((w) => w.at >= restartAt) ?? [];
    kubelet = undefined;
    for (const w of writes.filter((x) => x.at >= readyAt)) assert.equal(w.status, 200, `a kubelet write after /readyz: ${JSON.stringify(w)}`);
    const answered = writes.filter((w) => w.status === 200);
    for (const w of answered) assert.ok(w.cpu === '6' || w.cpu === '8', `inflated, not raw: ${JSON.stringify(w)}`);
    const early = writes.filter((w) => w.at < readyAt);
    console.log(`# kubelet writes after the restart: ${answered.length} stored, all inflated; before /readyz: ${JSON.stringify(early)}`);
  });

  it('4. the status writer works again: a pressure spike lowers allocatable with no kubelet write', async () => {
    await untilWrite(node, 'inflated at 2x', (s) => alloc(s) === '8');
    const started = Date.now();
    node.host.set({ ...node.host.usage, cpuSomeAvg10: 75 });
    const lowered = await eventually('allocatable lowered by the gateway', async () => {
      const stored = await core().readNode({ name: NODE });
      // The floor, one millicore above raw so the kubelet keeps writing (docs/policy.md).
      return alloc(stored) === '4001m' ? stored : undefined;
    }, 15_000, 50);
    measured.pressureLoweredMs = Date.now() - started;
    assert.match(lowered.metadata?.annotations?.[ANNOTATION.reason] ?? '', /cpu 4000m->4001m \(pressure: floor until calm; one unit above raw/);
    // The write is visible through the API before its log line reaches the log file.
    await eventually('the gateway to log its own write', async () => logged(/lowered allocatable without waiting for the kubelet/, readyAt), 5_000, 100);
  });

  it('5. the rest of the control plane is back: the scheduler places a pod and kwok runs it', async () => {
    const started = Date.now();
    await core().createNamespacedPod({ namespace: 'default', body: pod(`${NODE}-3`, '100m', '64Mi', { nodeSelector: POOL }) });
    await eventually('the pod scheduled and Running', async () => {
      const p = await core().readNamespacedPod({ name: `${NODE}-3`, namespace: 'default' });
      return p.spec?.nodeName === NODE && p.status?.phase === 'Running' ? true : undefined;
    }, 120_000, 500);
    measured.podRunningMs = Date.now() - started;
    await eventually('every component healthy (cluster.sh status)', async () => {
      try {
        cluster('status');
        return true;
      } catch {
        return undefined;
      }
    }, 120_000, 1000);
  });

  it('6. the gateway never gave up: same process, nothing fatal, no unhandled error in its log', async () => {
    assert.equal(gateway.child.exitCode, null);
    assert.equal(gateway.child.signalCode, null);
    const { lines, text } = gatewayLog();
    assert.doesNotMatch(text, /fatal|unhandled|uncaught/i);
    assert.deepEqual(lines.filter((l) => l.level >= 50).map((l) => l.msg), [], 'no error or fatal lines');
    assert.equal(lines.filter((l) => /gateway serving/.test(l.msg)).length, 1, 'started once, never restarted');
    const warnings = new Map<string, number>();
    for (const l of lines.filter((x) => x.level === 40)) warnings.set(l.msg, (warnings.get(l.msg) ?? 0) + 1);
    console.log(`# gateway warnings during the test: ${JSON.stringify(Object.fromEntries(warnings))}`);
  });
});
