// `npm run demo`: oversell on a real local control plane. Brings the cluster up,
// runs the gateway and one agent per fake node as processes, registers the
// webhook from deploy/, keeps a kubelet-like status loop per node, submits pods
// that request far more than they use, and prints what oversell did per node.
// On the real node (scripts/cluster/realnode.sh) an agent reads the host's own
// /proc and cgroups, its real kubelet writes its status, and real pods whose
// requests exceed the raw allocatable run there.
// Ctrl-C (or OVERSELL_DEMO_ROUNDS tables) stops everything and the cluster.
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import type { V1Node } from '@kubernetes/client-node';
import { parseBytes, parseMilli } from '../../lib/quantity.js';
import { ANNOTATION } from '../../gateway/admit/node-review.js';
import { CLUSTER_SH, REPO, core } from './cluster.js';
import { gib } from '../../scripts/harness/bytes.js';
import { GI, OPT_IN, fakeNode, installWebhook, pod, podsOn, startGatewayProcess, webhookFromDeploy, type FakeNode, type GatewayProc } from './fixtures.js';
import { ADMIN_KUBECONFIG } from './cluster.js';
import { getNode, queryClient } from '../helpers/grpc.js';
import { run, type Proc } from './processes.js';
import { REAL_NODE_IDLE_PODS, findRealNode, idlePodFor, patchNodeMetadata, restartKubelet } from './real-node.js';

const POOL = { 'oversell-demo': 'pool' };
const ROUNDS = Number(process.env.OVERSELL_DEMO_ROUNDS ?? '0'); // 0: until Ctrl-C
const PODS = 40;
const POD_REQUEST = { cpu: '500m', memory: '1Gi' };

const nodes: FakeNode[] = [];
let gateway: GatewayProc | undefined;
let realNode: V1Node | undefined;
let realAgent: Proc | undefined;
let heartbeat: NodeJS.Timeout | undefined;
let stopping = false;

async function stop(code: number): Promise<never> {
  if (!stopping) {
    stopping = true;
    clearInterval(heartbeat);
    for (const n of nodes) await n.stop();
    await realAgent?.kill();
    await gateway?.kill();
    console.log('\nstopping the local control plane');
    spawnSync('bash', [CLUSTER_SH, 'down'], { stdio: 'inherit' });
  }
  process.exit(code);
}
process.on('SIGINT', () => void stop(0));

function table(rows: string[][]): string {
  const widths = rows[0]?.map((_, i) => Math.max(...rows.map((r) => (r[i] ?? '').length))) ?? [];
  return rows.map((r) => r.map((c, i) => c.padEnd(widths[i] ?? 0)).join('  ')).join('\n');
}

const cores = (m: bigint) => `${(Number(m) / 1000).toFixed(1)}`;

async function report(): Promise<void> {
  const rows = [['NODE', 'OVERSELL', 'RAW CPU/MEM', 'GRANTED CPU/MEM', 'REQUESTED CPU/MEM', 'USAGE CPU/MEM', 'PODS', 'WITHOUT OVERSELL']];
  let placed = 0;
  let without = 0;
  for (const n of nodes) {
    const stored: V1Node = await core().readNode({ name: n.name });
    const ann = stored.metadata?.annotations ?? {};
    const rawCpu = parseMilli(ann[ANNOTATION.rawCpu] ?? n.raw.cpu, 'raw cpu');
    const rawMem = parseBytes(ann[ANNOTATION.rawMemory] ?? n.raw.memory, 'raw memory');
    const grantedCpu = parseMilli(stored.status?.allocatable?.cpu ?? '0', 'cpu');
    const grantedMem = parseBytes(stored.status?.allocatable?.memory ?? '0', 'memory');
    const pods = (await podsOn(n.name)).filter((p) => p.metadata?.labels?.app === 'e2e');
    const fitRaw = Math.min(Number(rawCpu / parseMilli(POD_REQUEST.cpu, 'cpu')), Number(rawMem / parseBytes(POD_REQUEST.memory, 'memory')));
    placed += pods.length;
    without += fitRaw;
    rows.push([
      n.name,
      stored.metadata?.labels?.['oversell.io/enabled'] === 'true' ? 'on' : 'off',
      `${cores(rawCpu)} / ${gib(rawMem, 1)}`,
      `${cores(grantedCpu)} / ${gib(grantedMem, 1)}`,
      `${(pods.length * 0.5).toFixed(1)} / ${pods.length}.0Gi`,
      `${(n.host.usage.cpuMillicores / 1000).toFixed(1)} / ${gib(n.host.usage.memoryWorkingSetBytes, 1)}`,
      String(pods.length),
      String(fitRaw),
    ]);
  }
  if (realNode) {
    const row = await realNodeRow(realNode);
    rows.push(row.cells);
    placed += row.running;
    without += row.fitRaw;
  }
  const pending = (await core().listNamespacedPod({ namespace: 'default', fieldSelector: 'status.phase=Pending' })).items.filter((p) => !p.spec?.nodeName).length;
  console.log(`\n${new Date().toISOString().slice(11, 19)}  ${PODS} pods of ${POD_REQUEST.cpu} / ${POD_REQUEST.memory} submitted`);
  console.log(table(rows));
  console.log(`placed ${placed} (without oversell these nodes fit ${without}); pending ${pending}`);
  for (const name of [...nodes.map((n) => n.name), ...(realNode ? [realNode.metadata!.name!] : [])]) {
    const reason = (await core().readNode({ name })).metadata?.annotations?.[ANNOTATION.reason];
    if (reason) console.log(`  ${name}: ${reason}`);
  }
}

/** The real node's row: its pods are real containers, its usage what the agent reads from this host. */
async function realNodeRow(n: V1Node): Promise<{ cells: string[]; running: number; fitRaw: number }> {
  const name = n.metadata!.name!;
  const stored = await core().readNode({ name });
  const raw = n.status?.allocatable ?? {};
  const pods = (await podsOn(name)).filter((p) => p.status?.phase === 'Running');
  const sum = (what: 'cpu' | 'memory') => pods.flatMap((p) => p.spec?.containers ?? []).reduce((a, c) => a + (what === 'cpu' ? parseMilli(c.resources?.requests?.cpu ?? '0', 'cpu') : parseBytes(c.resources?.requests?.memory ?? '0', 'memory')), 0n);
  const usage = (await getNode(queryClient(gateway!.ports.grpc), name).catch(() => undefined))?.latest;
  const demo = pods.filter((p) => p.metadata?.labels?.app === 'demo-real').length;
  const cells = [
    `${name} (real)`,
    'on',
    `${cores(parseMilli(raw.cpu ?? '0', 'cpu'))} / ${gib(parseBytes(raw.memory ?? '0', 'memory'), 1)}`,
    `${cores(parseMilli(stored.status?.allocatable?.cpu ?? '0', 'cpu'))} / ${gib(parseBytes(stored.status?.allocatable?.memory ?? '0', 'memory'), 1)}`,
    `${cores(sum('cpu'))} / ${gib(sum('memory'), 1)}`,
    usage ? `${(usage.cpuUsageMillicores / 1000).toFixed(1)} / ${gib(usage.memoryWorkingSetBytes, 1)}` : '-',
    String(demo),
    String(REAL_NODE_IDLE_PODS - 1),
  ];
  return { cells, running: demo, fitRaw: REAL_NODE_IDLE_PODS - 1 };
}

/**
 * The real node joins the demo: opted in, an agent on the host (the node is
 * this host), and REAL_NODE_IDLE_PODS real pods sized so that raw allocatable
 * fits one fewer. The scheduler places what fits; the kubelet's next status
 * write, inflated, makes room for the last.
 */
async function startRealNode(n: V1Node): Promise<void> {
  const name = n.metadata!.name!;
  await patchNodeMetadata(name, { labels: OPT_IN });
  realAgent = run('agent-real-node', 'agent', [
    '--node-name', name, '--gateway', `127.0.0.1:${gateway!.ports.agent}`, '--kubeconfig', ADMIN_KUBECONFIG,
    '--proc-root', '/proc', '--cgroup-root', '/sys/fs/cgroup', '--metrics-address', '127.0.0.1:0', '--interval', '1s',
  ]);
  await realAgent.waitFor(/connected to gateway/);
  const raw = parseBytes(n.status?.allocatable?.memory ?? '0', 'memory');
  for (let i = 1; i <= REAL_NODE_IDLE_PODS; i++) {
    const p = idlePodFor(raw, `demo-real-${i}`, {});
    p.metadata!.labels = { app: 'demo-real' };
    await core().createNamespacedPod({ namespace: 'default', body: p });
  }
  // An unchanged status is written only every 5 minutes; a restart writes it now.
  await new Promise((r) => setTimeout(r, 5000));
  console.log(`restarting ${name}'s kubelet: its next status write goes through oversell now instead of within 5 minutes`);
  await restartKubelet();
}

try {
  if (!existsSync(join(REPO, 'dist', 'gateway', 'main.js'))) spawnSync('npm', ['run', 'build'], { cwd: REPO, stdio: 'inherit' });
  console.log('starting the local control plane (a cold build takes many minutes; later runs reuse the cache)');
  if (spawnSync('bash', [CLUSTER_SH, 'up'], { stdio: 'inherit' }).status !== 0) await stop(1);

  gateway = await startGatewayProcess();
  await installWebhook(webhookFromDeploy(gateway));
  console.log(`gateway on 127.0.0.1 (webhook ${gateway.ports.webhook}, gRPC ${gateway.ports.grpc}, metrics ${gateway.ports.metrics}); webhook registered from deploy/base/webhook.yaml`);

  const specs = [
    { name: 'demo-idle', optIn: true, usage: { cpuMillicores: 300, memoryWorkingSetBytes: 2 * GI } },
    { name: 'demo-steady', optIn: true, usage: { cpuMillicores: 1500, memoryWorkingSetBytes: 4 * GI } },
    { name: 'demo-busy', optIn: true, usage: { cpuMillicores: 3600, memoryWorkingSetBytes: 7 * GI } },
    { name: 'demo-plain', optIn: false, usage: { cpuMillicores: 300, memoryWorkingSetBytes: 2 * GI } },
  ];
  for (const s of specs) {
    const n = await fakeNode(s.name, { labels: { ...POOL, ...(s.optIn ? OPT_IN : {}) }, raw: { cpu: '4', memory: '8Gi' }, usage: s.usage });
    nodes.push(n);
    await n.startAgent(gateway);
  }
  heartbeat = setInterval(() => void Promise.allSettled(nodes.map((n) => n.heartbeat())), 2000);
  realNode = await findRealNode();
  if (realNode) await startRealNode(realNode);
  for (let i = 0; i < PODS; i++) {
    await core().createNamespacedPod({ namespace: 'default', body: pod(`demo-${i}`, POD_REQUEST.cpu, POD_REQUEST.memory, { nodeSelector: POOL }) });
  }
  for (let round = 1; ROUNDS === 0 || round <= ROUNDS; round++) {
    await new Promise((r) => setTimeout(r, 8000));
    await report();
  }
  await stop(0);
} catch (err) {
  console.error(`demo failed: ${(err as Error).message}`);
  await stop(1);
}
