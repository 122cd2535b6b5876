// Agent overhead: CPU (millicores) and RSS of the real agent binary sampling every
// second over a 110-pod cgroup v2 tree (systemd driver) and the real /proc of this
// machine, streaming to a real gateway process; side by side, in the same window,
// with Debian's prometheus-node-exporter (default collectors) scraped every second.
//
//   node --import tsx bench/agent-overhead.ts          # 300 s window
//   BENCH_QUICK=1 node --import tsx bench/agent-overhead.ts   # 30 s window
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { getNode, queryClient } from '../test/helpers/grpc.js';
import { freePort, waitUntil } from '../scripts/harness/wait.js';
import { metricValue } from '../test/helpers/metrics.js';
import { agentVersusNodeExporter, besideNodeExporter, sleep } from './beside-node-exporter.js';
import { round, runIfMain, type BenchResult } from './result.js';
import { deployedNodeFlags, log, REPO, startChild, startGateway, type Child } from './processes.js';

// ------------------------------------------------------------ shared helpers (freshness.ts uses them too)

export { log, REPO, sleep, type Child };

export function ensureBuilt(): void {
  if (existsSync(join(REPO, 'dist/agent/main.js')) && existsSync(join(REPO, 'dist/gateway/main.js'))) return;
  log('dist/ missing: npm run build');
  execFileSync('npm', ['run', 'build'], { cwd: REPO, stdio: 'inherit' });
}

export function waitFor<T>(what: string, check: () => Promise<T | undefined>, timeoutMs = 20_000, everyMs = 100): Promise<T> {
  return waitUntil(what, check, timeoutMs, everyMs);
}

export function startAgentProcess(args: {
  nodeName: string; gatewayPort: number; procRoot: string; cgroupRoot: string; podsFile?: string; metricsAddress?: string;
}): Child {
  return startChild('agent', process.execPath, [
    ...deployedNodeFlags('agent'),
    join(REPO, 'dist/agent/main.js'),
    '--node-name', args.nodeName,
    '--gateway', `127.0.0.1:${args.gatewayPort}`,
    '--proc-root', args.procRoot,
    '--cgroup-root', args.cgroupRoot,
    '--interval', '1s',
    ...(args.podsFile ? ['--pods-file', args.podsFile] : []),
    '--metrics-address', args.metricsAddress ?? '127.0.0.1:0',
    '--log-level', 'warn',
  ]);
}

export function quickFromEnv(options: { quick?: boolean }): boolean {
  return options.quick ?? ['1', 'true', 'yes'].includes(process.env.BENCH_QUICK ?? '');
}

// ------------------------------------------------------------ the 110-pod cgroup tree

export interface GeneratedPod {
  uid: string;
  qos: 'guaranteed' | 'burstable' | 'besteffort';
  /** Directory of the pod cgroup. */
  dir: string;
  containers: string[];
  usageUsec: number;
  /** CPU the writer adds per second, in microseconds (= millicores * 1000). */
  usecPerSecond: number;
  memoryBytes: number;
  inactiveFileBytes: number;
}

const write = (path: string, text: string) => writeFileSync(path, text);
/** Like the kernel's files, never seen half-written: write aside, then rename over. */
function writeAtomic(path: string, text: string): void {
  writeFileSync(`${path}.tmp`, text);
  renameSync(`${path}.tmp`, path);
}

const CONTROLLERS = 'cpuset cpu io memory hugetlb pids rdma misc\n';
const PSI_ZERO = 'some avg10=0.00 avg60=0.00 avg300=0.00 total=0\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n';

function cpuStat(usageUsec: number): string {
  const user = Math.round(usageUsec * 0.7);
  return `usage_usec ${usageUsec}\nuser_usec ${user}\nsystem_usec ${usageUsec - user}\ncore_sched.force_idle_usec 0\n` +
    'nr_periods 40312\nnr_throttled 118\nthrottled_usec 2043117\nnr_bursts 0\nburst_usec 0\n';
}

/** A full-size v2 memory.stat (the agent parses the whole file for inactive_file). */
function memoryStat(current: number, inactiveFile: number): string {
  const file = Math.round(inactiveFile * 1.5);
  const anon = Math.max(0, current - file);
  const kv: Array<[string, number]> = [
    ['anon', anon], ['file', file], ['kernel', 1548288], ['kernel_stack', 245760], ['pagetables', 602112], ['sec_pagetables', 0],
    ['percpu', 3840], ['sock', 0], ['vmalloc', 0], ['shmem', 0], ['zswap', 0], ['zswapped', 0], ['file_mapped', 22511616],
    ['file_dirty', 4096], ['file_writeback', 0], ['swapcached', 0], ['anon_thp', 0], ['file_thp', 0], ['shmem_thp', 0],
    ['inactive_anon', anon], ['active_anon', 4096], ['inactive_file', inactiveFile], ['active_file', file - inactiveFile],
    ['unevictable', 0], ['slab_reclaimable', 452712], ['slab_unreclaimable', 243096], ['slab', 695808],
    ['workingset_refault_anon', 0], ['workingset_refault_file', 1093], ['workingset_activate_anon', 0], ['workingset_activate_file', 231],
    ['workingset_restore_anon', 0], ['workingset_restore_file', 0], ['workingset_nodereclaim', 0], ['pgscan', 0], ['pgsteal', 0],
    ['pgscan_kswapd', 0], ['pgscan_direct', 0], ['pgscan_khugepaged', 0], ['pgsteal_kswapd', 0], ['pgsteal_direct', 0],
    ['pgsteal_khugepaged', 0], ['pgfault', 3401977], ['pgmajfault', 337], ['pgrefill', 0], ['pgactivate', 5672], ['pgdeactivate', 0],
    ['pglazyfree', 0], ['pglazyfreed', 0], ['zswpin', 0], ['zswpout', 0], ['thp_fault_alloc', 0], ['thp_collapse_alloc', 0],
  ];
  return kv.map(([k, v]) => `${k} ${v}`).join('\n') + '\n';
}

/** Deterministic hex from a seed. */
const hex = (seed: string, n: number) => createHash('sha256').update(seed).digest('hex').slice(0, n);

/**
 * Writes a cgroup v2, systemd-driver kubepods tree with `count` pods into root:
 * roughly 25% guaranteed (kubepods.slice/kubepods-pod<uid_>.slice), 55% burstable,
 * 20% besteffort, each pod with 1 or 2 cri-containerd-<id>.scope children.
 */
export function generateCgroupTree(root: string, count = 110): GeneratedPod[] {
  mkdirSync(root, { recursive: true });
  write(join(root, 'cgroup.controllers'), CONTROLLERS);
  write(join(root, 'cgroup.subtree_control'), 'cpuset cpu io memory pids\n');
  write(join(root, 'cpu.pressure'), PSI_ZERO);
  write(join(root, 'memory.pressure'), PSI_ZERO);
  const kubepods = join(root, 'kubepods.slice');
  const slices = { guaranteed: kubepods, burstable: join(kubepods, 'kubepods-burstable.slice'), besteffort: join(kubepods, 'kubepods-besteffort.slice') };
  for (const dir of Object.values(slices)) {
    mkdirSync(dir, { recursive: true });
    write(join(dir, 'cgroup.controllers'), CONTROLLERS);
  }
  const pods: GeneratedPod[] = [];
  for (let i = 0; i < count; i++) {
    const h = hex(`pod-${i}`, 32);
    const uid = `${h.slice(0, 8)}-${h.slice(8, 12)}-4${h.slice(13, 16)}-8${h.slice(17, 20)}-${h.slice(20, 32)}`;
    const qos: GeneratedPod['qos'] = i % 20 < 5 ? 'guaranteed' : i % 20 < 16 ? 'burstable' : 'besteffort';
    const name = qos === 'guaranteed' ? `kubepods-pod${uid.replaceAll('-', '_')}.slice` : `kubepods-${qos}-pod${uid.replaceAll('-', '_')}.slice`;
    const dir = join(slices[qos], name);
    const memoryBytes = (64 + (parseInt(h.slice(0, 4), 16) % 960)) * 1024 * 1024; // 64 MiB .. 1 GiB
    const pod: GeneratedPod = {
      uid, qos, dir,
      containers: [],
      usageUsec: parseInt(h.slice(4, 12), 16) % 1_000_000_000,
      usecPerSecond: (1 + (parseInt(h.slice(12, 16), 16) % 200)) * 1000, // 1..200 millicores
      memoryBytes,
      inactiveFileBytes: Math.round(memoryBytes * 0.2),
    };
    mkdirSync(dir, { recursive: true });
    write(join(dir, 'cgroup.controllers'), CONTROLLERS);
    write(join(dir, 'memory.max'), qos === 'guaranteed' ? `${memoryBytes * 2}\n` : 'max\n');
    write(join(dir, 'cpu.pressure'), PSI_ZERO);
    write(join(dir, 'memory.pressure'), PSI_ZERO);
    const containers = 1 + (i % 2);
    for (let c = 0; c < containers; c++) {
      const scope = join(dir, `cri-containerd-${hex(`pod-${i}-c${c}`, 64)}.scope`);
      mkdirSync(scope);
      write(join(scope, 'cgroup.controllers'), CONTROLLERS);
      write(join(scope, 'memory.pressure'), PSI_ZERO);
      pod.containers.push(scope);
    }
    writePodCounters(pod);
    pods.push(pod);
  }
  write(join(kubepods, 'cpu.stat'), cpuStat(pods.reduce((a, p) => a + p.usageUsec, 0)));
  write(join(kubepods, 'memory.current'), `${pods.reduce((a, p) => a + p.memoryBytes, 0)}\n`);
  return pods;
}

/** Pod and container counters, each file replaced atomically as the kernel would show it. */
function writePodCounters(pod: GeneratedPod): void {
  writeAtomic(join(pod.dir, 'cpu.stat'), cpuStat(pod.usageUsec));
  writeAtomic(join(pod.dir, 'memory.current'), `${pod.memoryBytes}\n`);
  writeAtomic(join(pod.dir, 'memory.stat'), memoryStat(pod.memoryBytes, pod.inactiveFileBytes));
  const share = 1 / pod.containers.length;
  for (const scope of pod.containers) {
    writeAtomic(join(scope, 'cpu.stat'), cpuStat(Math.round(pod.usageUsec * share)));
    writeAtomic(join(scope, 'memory.current'), `${Math.round((pod.memoryBytes - 4096) * share)}\n`);
  }
}

/** Every second, moves every pod's usage_usec forward (and jiggles its memory), like running pods. */
export function startCounterWriter(pods: GeneratedPod[], everyMs = 1000): { stop(): void; writes(): number } {
  let writes = 0;
  const timer = setInterval(() => {
    for (const pod of pods) {
      pod.usageUsec += Math.round(pod.usecPerSecond * (0.5 + Math.random()) * (everyMs / 1000));
      pod.memoryBytes = Math.max(32 << 20, pod.memoryBytes + Math.round((Math.random() - 0.5) * 2 * 1024 * 1024));
      writePodCounters(pod);
      writes += 3 + 2 * pod.containers.length;
    }
  }, everyMs);
  return { stop: () => clearInterval(timer), writes: () => writes };
}

// ------------------------------------------------------------ the benchmark

export async function run(options: { quick?: boolean } = {}): Promise<BenchResult> {
  const quick = quickFromEnv(options);
  const windowS = quick ? 30 : 300;
  const warmupS = 10;
  const podCount = 110;
  ensureBuilt();
  log(`agent-overhead: ${podCount} pods, ${windowS} s window after ${warmupS} s warm-up; agent and node-exporter side by side`);

  const work = mkdtempSync(join(tmpdir(), 'oversell-bench-cgroup110-'));
  const cgroupRoot = join(work, 'cgroup');
  const pods = generateCgroupTree(cgroupRoot, podCount);
  const byQos = { guaranteed: 0, burstable: 0, besteffort: 0 };
  for (const p of pods) byQos[p.qos] += 1;
  const containers = pods.reduce((a, p) => a + p.containers.length, 0);
  log(`cgroup tree: ${cgroupRoot} (${byQos.guaranteed} guaranteed, ${byQos.burstable} burstable, ${byQos.besteffort} besteffort pods; ${containers} containers)`);

  const children: Child[] = [];
  const timers: Array<() => void> = [];
  try {
    const writer = startCounterWriter(pods);
    timers.push(writer.stop);
    const gateway = await startGateway({ echo: false });
    children.push(gateway);
    log(`gateway pid ${gateway.pid}: agents on :${gateway.ports.agent}, queries on :${gateway.ports.grpc}`);
    const nodeName = 'bench-agent-overhead';
    const agentMetricsPort = await freePort();
    const agent = startAgentProcess({ nodeName, gatewayPort: gateway.ports.agent, procRoot: '/proc', cgroupRoot, metricsAddress: `127.0.0.1:${agentMetricsPort}` });
    children.push(agent);
    const client = queryClient(gateway.ports.grpc);
    timers.push(() => client.close());
    await waitFor('the agent\'s first sample at the gateway', async () => ((await getNode(client, nodeName)).latest ? true : undefined));
    log(`agent pid ${agent.pid} streaming to the gateway (1 s interval, pods every 10th sample)`);

    const w = await besideNodeExporter(agent.pid, { windowS, warmupS, progressEveryS: quick ? 10 : 30 });

    // After the window (so it costs the measured processes nothing): check the agent
    // really read all the pods, and how long a sample takes it.
    const withPods = await waitFor('a sample carrying the per-pod report', async () => {
      const s = await getNode(client, nodeName);
      return s.latest?.podsIncluded && s.latest.pods.length > 0 ? s : undefined;
    }, 15_000, 100);
    const reportedPods = withPods.latest?.pods.length ?? 0;
    const sampling = await agentSampling(`http://127.0.0.1:${agentMetricsPort}/metrics`);

    const v = agentVersusNodeExporter(w, `1 s sampling, ${podCount} pods`);
    const result: BenchResult = {
      name: 'agent-overhead',
      summary: `agent ${v.agentCpu}m CPU, ${v.agentRssMax} MiB RSS max at 1 s sampling with ${podCount} pods; ` +
        `node-exporter ${w.nodeExporterVersion.split(' ')[0]} scraped every 1 s: ${v.neCpu}m, ${v.figures.node_exporter_rss_mib_max} MiB; CPU ratio ${v.ratio}`,
      figures: {
        ...v.figures,
        ...sampling,
        pods: podCount,
        containers,
        pods_reported: reportedPods,
        warmup_s: warmupS,
      },
      targets: v.targets,
      reference: v.reference,
      notes: [
        `${v.windowNote} The window began after ${warmupS} s of warm-up.`,
        `Agent: the real binary (node ${deployedNodeFlags('agent').join(' ')} dist/agent/main.js, ${process.version}, the DaemonSet's Node flags) with --interval 1s, pods every 10th sample, --proc-root /proc of this machine and a generated cgroup v2 systemd tree ` +
          `of ${podCount} pods (${byQos.guaranteed} guaranteed, ${byQos.burstable} burstable, ${byQos.besteffort} besteffort; ${containers} container scopes) whose counters a writer in the benchmark process advances every second (write aside, rename over); ` +
          `streaming over real gRPC to a real gateway process (not measured). The per-pod report reached the gateway with ${reportedPods} pods.`,
        v.nodeExporterNote,
        'The agent reads the same kind of files node-exporter does, but far fewer: /proc/stat, /proc/meminfo, /proc/pressure/* every second, and 3 files per pod every 10th second.',
      ],
    };
    for (const c of [agent, gateway]) {
      if (c.proc.exitCode !== null) throw new Error(`a measured process exited during the run:\n${c.output()}`);
    }
    return result;
  } finally {
    for (const stop of timers) stop();
    await Promise.all(children.map((c) => c.stop()));
    rmSync(work, { recursive: true, force: true });
  }
}

/** How long the agent takes per sample and how many it made, from its /metrics. */
export async function agentSampling(metricsUrl: string): Promise<Record<string, number>> {
  const text = await (await fetch(metricsUrl)).text();
  const sum = metricValue(text, 'oversell_agent_sampling_duration_seconds_sum') ?? NaN;
  const count = metricValue(text, 'oversell_agent_sampling_duration_seconds_count') ?? NaN;
  return {
    agent_sample_ms_avg: round((sum / count) * 1000, 3),
    agent_samples_ok: metricValue(text, 'oversell_agent_samples_total', '{result="ok"}') ?? NaN,
    agent_samples_error: metricValue(text, 'oversell_agent_samples_total', '{result="error"}') ?? 0,
  };
}

export function printResult(r: BenchResult): void {
  console.log(`\n${r.name}: ${r.summary}`);
  for (const [k, v] of Object.entries(r.figures)) console.log(`  ${k.padEnd(38)} ${v}`);
  if (r.reference) {
    console.log('  reference:');
    for (const [k, v] of Object.entries(r.reference)) console.log(`    ${k.padEnd(36)} ${v}`);
  }
  console.log('  targets:');
  for (const t of r.targets) console.log(`    [${t.met ? 'met' : 'MISSED'}] ${t.name}: ${t.measured}`);
  for (const n of r.notes ?? []) console.log(`  - ${n}`);
}

runIfMain(import.meta.url, run, printResult);
