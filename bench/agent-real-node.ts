// Agent overhead where users run it: the agent's DaemonSet pod as deploy/
// ships it (the image built from our Dockerfile, gRPC over TLS with its
// projected token, the pod watch, --jitless) on the local cluster's real node
// (kubelet, containerd, runc, cgroup v1 here), reading the node's real /proc
// and cgroup tree while real pods run on it; side by side, in the same window,
// with node-exporter on the same host scraped every second.
//
//   node --import tsx bench/agent-real-node.ts          # 300 s window, 45 pods
//   BENCH_QUICK=1 node --import tsx bench/agent-real-node.ts   # 30 s window, 10 pods
//
// Needs root and the real node's packages (scripts/cluster/ci-install.sh, run
// here); brings the local control plane up with the real node when it is not
// running, and refuses (saying what to do) when it runs without one.
import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { RbacAuthorizationV1Api, type V1Pod } from '@kubernetes/client-node';
import { adminConfig, clusterAsync, core } from '../test/e2e/cluster.js';
import { deleteNamespaceAndWait, eventually, removeInstallLeftovers } from '../test/e2e/fixtures.js';
import { OVERSELL_IMAGE_TAR, VIEWER, findRealNode, getNodeStatus, importImage, queryAsViewer, realNodePod } from '../test/e2e/real-node.js';
import { agentSampling, printResult, quickFromEnv } from './agent-overhead.js';
import { agentVersusNodeExporter, besideNodeExporter } from './beside-node-exporter.js';
import { useControlPlane } from './control-plane.js';
import { pssMiB, rssPartsMiB, workingSetMiB } from './proc-stats.js';
import { log, REPO } from './processes.js';
import { round, runIfMain, type BenchResult } from './result.js';

const NS = 'oversell';
const PODS = 'oversell-bench-real';
/** deploy/ placed on the real node: the e2e install's overlay (one gateway replica, on the real node). */
const OVERLAY = join(REPO, 'test/e2e/real-node-install');
/** The real node's kubelet runs at most 50 pods (scripts/cluster/realnode.sh); the agent and the gateway take two. */
const FULL_PODS = 45;

const kubectl = (...args: string[]) => clusterAsync('kubectl', ...args);

/** Idle pods across the three QoS classes, about as the 110-pod fixture tree mixes them. */
function benchPod(i: number, nodeName: string): V1Pod {
  const qos = i % 20 < 5 ? 'guaranteed' : i % 20 < 16 ? 'burstable' : 'besteffort';
  const resources = qos === 'guaranteed'
    ? { requests: { cpu: '10m', memory: '16Mi' }, limits: { cpu: '10m', memory: '16Mi' } }
    : qos === 'burstable' ? { requests: { cpu: '5m', memory: '8Mi' } } : undefined;
  return realNodePod(`idle-${i}`, ['sleep', '3600'], { namespace: PODS, nodeName, app: 'oversell-bench', ...(resources && { resources }) });
}

/** The host pid of the agent container's node process, found by its pod's uid in /proc/<pid>/cgroup. */
function agentPid(podUid: string): number {
  const forms = [podUid, podUid.replaceAll('-', '_')];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const cmdline = readFileSync(`/proc/${entry}/cmdline`, 'utf8');
      if (!cmdline.includes('/app/dist/agent/main.js')) continue;
      const cgroup = readFileSync(`/proc/${entry}/cgroup`, 'utf8');
      if (forms.some((f) => cgroup.includes(f))) return Number(entry);
    } catch {
      // the process exited meanwhile
    }
  }
  throw new Error(`no process of the agent pod ${podUid} found in /proc: is its container running?`);
}

export async function run(options: { quick?: boolean } = {}): Promise<BenchResult> {
  const quick = quickFromEnv(options);
  const windowS = quick ? 30 : 300;
  const warmupS = quick ? 10 : 30;
  const podCount = quick ? 10 : FULL_PODS;
  log('agent-real-node: the real node\'s packages (scripts/cluster/ci-install.sh) and the image (scripts/image/build.sh, cached)');
  execFileSync('bash', [join(REPO, 'scripts/cluster/ci-install.sh')], { cwd: REPO, stdio: 'inherit', env: { ...process.env, OVERSELL_REAL_NODE: '1' } });
  execFileSync('bash', [join(REPO, 'scripts/image/build.sh')], { cwd: REPO, stdio: 'inherit' });

  const plane = useControlPlane({ realNode: true });
  try {
    const node = await findRealNode();
    if (!node) {
      throw new Error('the local control plane runs without the real node: take it down (bash scripts/cluster/cluster.sh down) and run again, or bring it up with the real node (OVERSELL_REAL_NODE=1 bash scripts/cluster/cluster.sh up)');
    }
    const nodeName = node.metadata!.name!;
    await importImage(OVERSELL_IMAGE_TAR);
    await removeInstallLeftovers();
    await deleteNamespaceAndWait(PODS, 180_000);
    log(`installing deploy/ on ${nodeName} (kubectl apply -k ${OVERLAY.slice(REPO.length)})`);
    await kubectl('apply', '--server-side', '-k', OVERLAY);
    await core().createNamespace({ body: { metadata: { name: PODS } } });
    log(`starting ${podCount} idle pods on ${nodeName}`);
    const started = Date.now();
    for (let i = 1; i <= podCount; i++) await core().createNamespacedPod({ namespace: PODS, body: benchPod(i, nodeName) });
    const agentPod = await eventually('the agent pod Running, the gateway pod Ready and every bench pod Running', async () => {
      const ours = (await core().listNamespacedPod({ namespace: NS })).items.filter((p) => !p.metadata?.deletionTimestamp);
      const agent = ours.find((p) => p.metadata?.labels?.['app.kubernetes.io/name'] === 'oversell-agent' && p.spec?.nodeName === nodeName);
      const gateway = ours.find((p) => p.metadata?.labels?.['app.kubernetes.io/name'] === 'oversell-gateway');
      const ready = gateway?.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True');
      const running = (await core().listNamespacedPod({ namespace: PODS })).items.filter((p) => p.status?.phase === 'Running').length;
      return agent?.status?.phase === 'Running' && ready && running === podCount ? agent : undefined;
    }, 300_000, 1000);
    log(`all running after ${Math.round((Date.now() - started) / 1000)} s`);

    const conn = await queryAsViewer(PODS, NS);
    try {
      // deploy/ grants the agent no pod read (the gateway watches the bound pods): its requests are sent as unknown.
      const first = await eventually('a sample from the agent at the gateway', async () => {
        const s = await getNodeStatus(conn, nodeName).catch(() => undefined);
        return s?.latest ? s : undefined;
      }, 60_000, 500);
      const pid = agentPid(agentPod.metadata!.uid!);
      log(`agent pid ${pid} (pod ${agentPod.metadata!.name}) streaming over TLS; host: cgroup ${first.host?.cgroupMode} ${first.host?.cgroupDriver}`);

      const w = await besideNodeExporter(pid, { windowS, warmupS, progressEveryS: quick ? 10 : 30 });
      const workingSet = workingSetMiB(pid);
      const rssParts = rssPartsMiB(pid);
      const pss = pssMiB(pid);

      // After the window, so it costs the agent nothing: what it read and sent.
      const withPods = await eventually('a sample carrying the per-pod report', async () => {
        const s = await getNodeStatus(conn, nodeName);
        return s.latest?.podsIncluded && s.latest.pods.length > 0 ? s : undefined;
      }, 20_000, 250);
      const after = await core().readNamespacedPod({ namespace: NS, name: agentPod.metadata!.name! });
      const sampling = await agentSampling(`http://${after.status?.podIP}:9091/metrics`);
      const restarts = after.status?.containerStatuses?.[0]?.restartCount ?? 0;
      if (restarts > 0 || agentPid(agentPod.metadata!.uid!) !== pid) throw new Error(`the agent container restarted during the run (${restarts} restarts): its figures cover more than one process`);

      const reported = withPods.latest?.pods.length ?? 0;
      const bound = (await core().listPodForAllNamespaces({ fieldSelector: `spec.nodeName=${nodeName},status.phase=Running` })).items.length;
      const v = agentVersusNodeExporter(w, `1 s sampling, ${reported} real pods`);
      const image = execFileSync('bash', ['-c', `source ${OVERSELL_IMAGE_TAR}.env && echo "$IMAGE $IMAGE_ID"`], { encoding: 'utf8' }).trim();
      return {
        name: 'agent-real-node',
        summary: `the agent's DaemonSet pod on the real node (TLS, ${reported} pods): ${v.agentCpu}m CPU, ${v.agentRssMax} MiB RSS max; ` +
          `node-exporter scraped every 1 s: ${v.neCpu}m, ${v.figures.node_exporter_rss_mib_max} MiB; CPU ratio ${v.ratio}`,
        figures: {
          ...v.figures,
          agent_rss_anon_mib_last: round(rssParts.anon, 1),
          agent_rss_file_mib_last: round(rssParts.file, 1),
          agent_pss_mib_last: round(pss, 1),
          agent_container_working_set_mib: round(workingSet, 1),
          ...sampling,
          pods_started: podCount,
          pods_reported: reported,
          pods_running_on_node: bound,
          warmup_s: warmupS,
        },
        targets: v.targets,
        reference: v.reference,
        notes: [
          `${v.windowNote} The window began ${warmupS} s after the agent's first sample reached the gateway.`,
          `Agent: the DaemonSet of deploy/ (kubectl apply -k of the e2e overlay, which only places the one gateway replica on the real node), image ${image}, ` +
            `on the real node ${nodeName} (kubelet ${node.status?.nodeInfo?.kubeletVersion}, ${node.status?.nodeInfo?.containerRuntimeVersion}, cgroup ${first.host?.cgroupMode} with the ${first.host?.cgroupDriver} driver, kernel ${node.status?.nodeInfo?.kernelVersion}). ` +
            'It reads the host\'s /proc and cgroup mount through its hostPath volumes, streams over gRPC with TLS and its projected token through the Service to the gateway pod on the same node (not measured). ' +
            `Measured from the host: the pid of its container's process, found by the pod's uid in /proc/<pid>/cgroup; at the end of the window, RSS split into anonymous memory and file-backed pages (mostly the node binary's, shared with the gateway container, which runs the same image), PSS (shared pages divided among the processes mapping them), and agent_container_working_set_mib, the container cgroup's usage minus inactive file, what the kubelet reports.`,
          `Pods: ${podCount} idle pods started by the benchmark (about 25% guaranteed, 55% burstable, 20% besteffort; each a pause and one container), plus the agent's and the gateway's. ` +
            `The agent reported ${reported} pod cgroups in its per-pod report, and the API server listed ${bound} pods Running on the node (deploy/ grants the agent no pod read since the gateway watches the bound pods, so it does not watch them). The kubelet here runs at most 50 pods.`,
          v.nodeExporterNote,
        ],
      };
    } finally {
      conn.close();
    }
  } finally {
    log('removing the install and the bench pods');
    await kubectl('delete', '-k', OVERLAY, '--wait=false', '--ignore-not-found').catch(() => {});
    await removeInstallLeftovers().catch((err: Error) => log(`!! the install's leftovers: ${err.message}`));
    await adminConfig().makeApiClient(RbacAuthorizationV1Api).deleteClusterRoleBinding({ name: VIEWER }).catch(() => {});
    await deleteNamespaceAndWait(PODS, 180_000).catch((err: Error) => log(`!! namespace ${PODS}: ${err.message}`));
    plane.release();
  }
}

runIfMain(import.meta.url, run, printResult);
