// Gateway ingest at scale: N simulated agents streaming one sample a second
// over real gRPC (a separate process), the gateway's CPU and RSS, the
// sample-to-store lag, and the query API's latency for one node and the full
// list at that scale.
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import * as grpc from '@grpc/grpc-js';
import type { NodeUsageClient } from '../proto/gen/oversell/v1/NodeUsage.js';
import type { NodeStatus__Output } from '../proto/gen/oversell/v1/NodeStatus.js';
import { nodeUsageClient } from '../wire/node-summaries-codec.js';
import { mainThreadPreemptions, watchProcess } from './proc-stats.js';
import { GATEWAY_NODE_ARGS, REPO, startGateway, startGrpcFloor, startSimAgents } from './processes.js';
import { onLines } from '../scripts/harness/processes.js';
import type { QueryTimings } from './query-client.js';
import { reviewEveryNode } from './reviews.js';
import { ensureGhz, ghzGetNode, GHZ_VERSION } from './ghz.js';
import { percentile, round, runIfMain, type BenchResult } from './result.js';

function client(port: number): NodeUsageClient {
  // The CLI's client: ListNodeSummaries decoded as `oversell top` decodes it.
  return new (nodeUsageClient())(`127.0.0.1:${port}`, grpc.credentials.createInsecure(), { 'grpc.max_receive_message_length': 256 * 1024 * 1024 });
}
const get = (c: NodeUsageClient, name: string) =>
  new Promise<NodeStatus__Output>((resolve, reject) => c.GetNode({ name }, (err, r) => (err || !r ? reject(err) : resolve(r))));

/** bench/query-client.ts in its own process: the timed queries. */
function queryTimings(address: string, nodes: number): Promise<QueryTimings> {
  const child = spawn(process.execPath, ['--import', 'tsx', join(REPO, 'bench/query-client.ts'), address, String(nodes)], { stdio: ['ignore', 'pipe', 'inherit'] });
  return new Promise((resolve, reject) => {
    onLines(child.stdout, (line) => line.startsWith('result ') && resolve(JSON.parse(line.slice(7)) as QueryTimings));
    child.once('exit', (code) => reject(new Error(`the query client exited ${code} without a result`)));
  });
}

export interface ScalePoint {
  agents: number;
  /** Samples the store took per second per agent over the window (1.0: the simulator kept its rate). */
  storedPerAgentPerS: number;
  gatewayMillicores: number;
  gatewayRssMiB: number;
  lagP99Ms: number;
  /** GetNode from ghz (the target's figure) and from the CLI's grpc-js client. */
  getP99Ms: number;
  cliGetP99Ms: number;
  /** During the ghz run: the gateway's CPU, and how often a second the kernel took the CPU from its main thread. */
  getRunGatewayMillicores: number;
  getRunMainPreemptedPerS: number;
  /** The same two with the simulator paused (SIGSTOP): the nodes are there, their samples are not. */
  pausedGetP99Ms?: number;
  pausedCliGetP99Ms?: number;
  /** Simulator paused, ghz paced at PACED_RPS (one in flight): what a client calling now and then sees. */
  pausedPacedGetP50Ms?: number;
  pausedPacedGetP99Ms?: number;
  /** The reference (bench/grpc-floor.ts): a bare grpc-js server answering with sim-0's NodeStatus, back to back and paced. */
  floorGetP99Ms?: number;
  floorPacedGetP50Ms?: number;
  floorPacedGetP99Ms?: number;
  /** ListNodeSummaries, what `oversell top` lists with. */
  listP99Ms: number;
  listNodes: number;
  /** ListNodes: every NodeStatus. */
  fullListP99Ms: number;
}

/** The simulator's niceness: it stands for agents on other machines (see the notes below). */
const SIM_NICE = 19;

const storedTotal = async (metricsPort: number) => {
  const text = await (await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).text();
  return Number(/^oversell_samples_received_total\{result="stored"\} (\d+)/m.exec(text)?.[1] ?? NaN);
};

/**
 * GET_CALLS GetNode calls from ghz after GET_WARMUP untimed ones. The p99 of
 * 2,000 is decided by 20 calls and moved 1.89-2.18 ms between runs; 6,000
 * take ~3 s.
 */
const GET_CALLS = 6000;
const GET_WARMUP = 500;
/** The paced runs: 3,000 calls at 250/s, 12 s. */
const PACED_RPS = 250;
const PACED_CALLS = 3000;
const PACED_WARMUP = 250;

/** ghz against the grpc-js floor server answering with `status`: back to back, then paced. */
async function floorTimings(ghz: string, status: NodeStatus__Output): Promise<{ backToBack: number[]; paced: number[] }> {
  const floor = await startGrpcFloor(status);
  try {
    const address = `127.0.0.1:${floor.port}`;
    // Every call names sim-0: the floor answers the same for any name. A
    // fresh process: a longer warm-up than the gateway's, which has answered
    // thousands of queries by then, so its JIT has compiled the path as well.
    const backToBack = await ghzGetNode(ghz, address, 1, GET_CALLS, 4 * GET_WARMUP);
    const paced = await ghzGetNode(ghz, address, 1, PACED_CALLS, PACED_WARMUP, { rps: PACED_RPS });
    return { backToBack, paced };
  } finally {
    await floor.stop();
  }
}

/**
 * Warm-up before the measured window. At the top scale it lasts until every
 * node's usage window is full (the flags policy keeps 60 s): memory at 10 s
 * held a sixth of that history, and the published RSS was below the steady
 * state's.
 */
const WARMUP_S = 10;
const FULL_WINDOWS_WARMUP_S = 70;

export async function measure(agents: number, windowS: number, options: { ghz: string; paused?: boolean; warmupS?: number }): Promise<ScalePoint> {
  const warmupS = options.warmupS ?? WARMUP_S;
  // As deployed (the Node flags of deploy/base/gateway.yaml's command): the old generation is capped, so RSS is what it would be in the pod.
  // Shedding off: this measures what the query path answers at the load, where a
  // shedding gateway refuses queries whenever the shared host delays its main
  // thread; the cluster benchmark measures the deployed gateway, shedding included.
  const gw = await startGateway({ args: ['--shed-loop-delay', '0'] });
  const sim = startSimAgents(`127.0.0.1:${gw.ports.agent}`, agents, 'sim', 'inherit', SIM_NICE);
  try {
    await sim.ready;
    // As the kubelets' status writes would: every node gets its raw allocatable, so both lists decide every node.
    const seeded = Date.now();
    await reviewEveryNode(gw, Array.from({ length: agents }, (_, i) => `sim-${i}`));
    console.log(`  one nodes/status review per node through the webhook: ${agents} in ${((Date.now() - seeded) / 1000).toFixed(1)} s`);
    console.log(`  ingest: ${agents} agents connected; warming up ${warmupS} s, then measuring ${windowS} s`);
    await new Promise((r) => setTimeout(r, warmupS * 1000));
    const c = client(gw.ports.grpc);
    const sim0 = await get(c, 'sim-0');
    if (!sim0.decision) throw new Error('sim-0 has no decision after its review: the lists would not be deciding');
    const storedBefore = await storedTotal(gw.ports.metrics);
    const w = watchProcess(gw.pid, 1000);
    const lags: number[] = [];
    const end = Date.now() + windowS * 1000;
    while (Date.now() < end) {
      for (let i = 0; i < 100; i++) {
        const n = await get(c, `sim-${Math.floor(Math.random() * agents)}`);
        if (n.latest) lags.push(n.receivedAtMs - n.latest.timestampMs);
      }
      await new Promise((r) => setTimeout(r, 1000));
    }
    const usage = w.stop();
    const storedPerAgentPerS = (await storedTotal(gw.ports.metrics) - storedBefore) / usage.seconds / agents;
    c.close();
    const address = `127.0.0.1:${gw.ports.grpc}`;
    const q = await queryTimings(address, agents);
    const preemptedBefore = mainThreadPreemptions(gw.pid);
    const getWatch = watchProcess(gw.pid, 1000);
    const ghzMs = await ghzGetNode(options.ghz, address, agents, GET_CALLS, GET_WARMUP);
    const getUsage = getWatch.stop();
    const preempted = mainThreadPreemptions(gw.pid) - preemptedBefore;
    const sorted = (a: number[]) => [...a].sort((x, y) => x - y);
    const p99 = (a: number[]) => round(percentile(sorted(a), 99), 2);
    const p50 = (a: number[]) => round(percentile(sorted(a), 50), 2);
    let paused: Pick<ScalePoint, 'pausedGetP99Ms' | 'pausedCliGetP99Ms' | 'pausedPacedGetP50Ms' | 'pausedPacedGetP99Ms' | 'floorGetP99Ms' | 'floorPacedGetP50Ms' | 'floorPacedGetP99Ms'> = {};
    if (options.paused) {
      // Where the tail comes from: the same gateway and nodes without the stream of samples.
      sim.child.kill('SIGSTOP');
      try {
        await new Promise((r) => setTimeout(r, 1000));
        const pausedGhz = await ghzGetNode(options.ghz, address, agents, GET_CALLS, GET_WARMUP);
        const pausedCli = await queryTimings(address, agents);
        const pausedPaced = await ghzGetNode(options.ghz, address, agents, PACED_CALLS, PACED_WARMUP, { rps: PACED_RPS });
        // The reference, while the machine is as quiet: the gateway idle, the simulator stopped.
        const floor = await floorTimings(options.ghz, sim0);
        paused = {
          pausedGetP99Ms: p99(pausedGhz),
          pausedCliGetP99Ms: p99(pausedCli.getMs),
          pausedPacedGetP50Ms: p50(pausedPaced),
          pausedPacedGetP99Ms: p99(pausedPaced),
          floorGetP99Ms: p99(floor.backToBack),
          floorPacedGetP50Ms: p50(floor.paced),
          floorPacedGetP99Ms: p99(floor.paced),
        };
      } finally {
        sim.child.kill('SIGCONT');
      }
    }
    const point: ScalePoint = {
      agents,
      storedPerAgentPerS: round(storedPerAgentPerS, 3),
      gatewayMillicores: Math.round(usage.millicores),
      gatewayRssMiB: Math.round(usage.rssMaxMiB),
      lagP99Ms: round(percentile(sorted(lags), 99), 1),
      getP99Ms: p99(ghzMs),
      cliGetP99Ms: p99(q.getMs),
      getRunGatewayMillicores: Math.round(getUsage.millicores),
      getRunMainPreemptedPerS: Math.round(preempted / getUsage.seconds),
      ...paused,
      listP99Ms: round(percentile(sorted(q.summariesMs), 99), 1),
      listNodes: q.summaryNodes,
      fullListP99Ms: round(percentile(sorted(q.listMs), 99), 1),
    };
    console.log(`    stored ${point.storedPerAgentPerS} samples/s per agent; gateway ${point.gatewayMillicores} millicores, RSS ${point.gatewayRssMiB} MiB; lag p99 ${point.lagP99Ms} ms; GetNode p99 ${point.getP99Ms} ms (ghz; gateway ${point.getRunGatewayMillicores} millicores, main thread preempted ${point.getRunMainPreemptedPerS}/s meanwhile), ${point.cliGetP99Ms} ms (grpc-js)${options.paused ? `, simulator paused ${point.pausedGetP99Ms} / ${point.pausedCliGetP99Ms} ms, paced at ${PACED_RPS}/s p50 ${point.pausedPacedGetP50Ms} p99 ${point.pausedPacedGetP99Ms} ms; grpc-js floor p99 ${point.floorGetP99Ms} ms, paced p50 ${point.floorPacedGetP50Ms} p99 ${point.floorPacedGetP99Ms} ms` : ''}; ListNodeSummaries (${point.listNodes}) p99 ${point.listP99Ms} ms; ListNodes p99 ${point.fullListP99Ms} ms`);
    return point;
  } finally {
    sim.child.kill('SIGTERM');
    await gw.stop();
  }
}

export async function run(options: { quick?: boolean } = {}): Promise<BenchResult> {
  const scales = options.quick ? [1000] : [1000, 5000, 10_000];
  const ghz = await ensureGhz();
  const points: ScalePoint[] = [];
  const last = scales[scales.length - 1];
  for (const n of scales) points.push(await measure(n, options.quick ? 10 : 20, { ghz, paused: n === last, ...(n === last && !options.quick && { warmupS: FULL_WINDOWS_WARMUP_S }) }));
  const top = points[points.length - 1]!;
  return {
    name: 'ingest',
    summary: `${top.agents} agents at 1 Hz (ingest thread): gateway ${top.gatewayMillicores} millicores, ${top.gatewayRssMiB} MiB; GetNode p99 ${top.getP99Ms} ms (ghz; ${top.cliGetP99Ms} ms from the CLI's client; ${top.pausedGetP99Ms} ms with the simulator paused; reference, a bare grpc-js server with the same answer: ${top.floorGetP99Ms} ms, and at ${PACED_RPS}/s ${top.floorPacedGetP99Ms} ms against the idle gateway's ${top.pausedPacedGetP99Ms} ms), ListNodeSummaries p99 ${top.listP99Ms} ms (full ListNodes ${top.fullListP99Ms} ms)`,
    figures: Object.fromEntries(points.map((p) => [`agents_${p.agents}`, p] as const).flatMap(([k, p]) => [
      [`${k}_stored_per_agent_per_s`, p.storedPerAgentPerS],
      [`${k}_gateway_millicores`, p.gatewayMillicores],
      [`${k}_gateway_rss_mib`, p.gatewayRssMiB],
      [`${k}_lag_p99_ms`, p.lagP99Ms],
      [`${k}_get_p99_ms`, p.getP99Ms],
      [`${k}_cli_get_p99_ms`, p.cliGetP99Ms],
      [`${k}_get_run_gateway_millicores`, p.getRunGatewayMillicores],
      [`${k}_get_run_main_thread_preempted_per_s`, p.getRunMainPreemptedPerS],
      ...(p.pausedGetP99Ms === undefined ? [] : [
        [`${k}_simulator_paused_get_p99_ms`, p.pausedGetP99Ms],
        [`${k}_simulator_paused_cli_get_p99_ms`, p.pausedCliGetP99Ms ?? NaN],
        [`${k}_simulator_paused_get_at_${PACED_RPS}_per_s_p50_ms`, p.pausedPacedGetP50Ms ?? NaN],
        [`${k}_simulator_paused_get_at_${PACED_RPS}_per_s_p99_ms`, p.pausedPacedGetP99Ms ?? NaN],
      ] as const),
      [`${k}_list_p99_ms`, p.listP99Ms],
      [`${k}_full_list_p99_ms`, p.fullListP99Ms],
    ])),
    reference: {
      what: `bench/grpc-floor.ts: a bare grpc-js server (same grpc-js, proto, loader options and Node flags) answering GetNode with sim-0's NodeStatus as the gateway gave it, measured by the same ghz while the simulator was paused and the gateway idle`,
      get_p99_ms: top.floorGetP99Ms ?? NaN,
      [`get_at_${PACED_RPS}_per_s_p50_ms`]: top.floorPacedGetP50Ms ?? NaN,
      [`get_at_${PACED_RPS}_per_s_p99_ms`]: top.floorPacedGetP99Ms ?? NaN,
    },
    targets: top.agents >= 10_000
      ? [
          { name: '10,000 agents at 1 Hz within 1 core', measured: `${top.gatewayMillicores} millicores`, met: top.gatewayMillicores <= 1000 },
          { name: '10,000 agents within 512 MiB', measured: `${top.gatewayRssMiB} MiB`, met: top.gatewayRssMiB <= 512 },
          { name: 'query one node p99 <= 2 ms at 10,000 (GetNode from ghz)', measured: `${top.getP99Ms} ms (reference, a bare grpc-js server with the same answer on the quiet machine: ${top.floorGetP99Ms} ms; ${top.floorPacedGetP99Ms} ms paced at ${PACED_RPS}/s)`, met: top.getP99Ms <= 2 },
          { name: 'full list p99 <= 50 ms at 10,000 (ListNodeSummaries, what oversell top lists with)', measured: `${top.listP99Ms} ms`, met: top.listP99Ms <= 50 },
          { name: 'the simulator kept 1 sample/s per agent (stored >= 0.95/s, so the figures are at full load)', measured: `${top.storedPerAgentPerS}/s`, met: top.storedPerAgentPerS >= 0.95 },
        ]
      : [{ name: '(quick run: 10,000-agent targets not measured)', measured: `${top.agents} agents`, met: true }],
    notes: [
      'simulated agents: one child process, real AgentStream streams spread over several HTTP/2 connections; agent i sends at i/N of each second (the samples due by elapsed time, every 2 ms), as agents with independent timers would',
      `queries, after the measured window, each from a process of its own: ghz ${GHZ_VERSION} (Go, built from the module proxy; bench/ghz.ts) makes ${GET_CALLS} GetNode calls back to back on random nodes after ${GET_WARMUP} untimed ones, the target's figure; bench/query-client.ts, with the CLI's grpc-js client, makes 2,000 (cli_get_*) after 500 untimed ones, then 100 ListNodeSummaries (one message of packed columns: what \`oversell top\` shows, decoded with the CLI's decoder) and 10 full ListNodes (every NodeStatus with its reason), after 3 and 1 untimed`,
      'get_run_*: over the ghz run at each scale, the gateway\'s CPU and how often a second the kernel took the CPU from its main thread, the one that answers queries, to run another thread (involuntary context switches, /proc/<pid>/task/<pid>/status; the load generator\'s own wake-ups on that CPU count among them)',
      `simulator_paused_get_at_${PACED_RPS}_per_s_*: the same gateway with the simulator paused, ghz pacing ${PACED_CALLS} calls at ${PACED_RPS}/s (one in flight): a client that calls now and then, so each call finds the gateway's threads asleep and its code out of the caches; the reference is measured the same way`,
      'simulator_paused_*: at the top scale, the simulator stopped (SIGSTOP) for a second and both GetNode runs repeated: the same gateway and nodes, without the samples arriving. What separates these from the loaded figures is the ingest load sharing the 2 vCPUs; what separates ghz from the CLI client is the client process',
      `gateway started as deployed: node ${GATEWAY_NODE_ARGS.join(' ')} (the command of deploy/base/gateway.yaml), but with --shed-loop-delay 0 (no load shedding): the query figures are what the query path answers at this load; with shedding on, a main thread delayed past 50 ms (on this shared host, by the other processes too) refuses queries with RESOURCE_EXHAUSTED (a run with it on failed with 1,081 of 6,000 GetNode calls refused at 1,000 agents); the cluster benchmark measures the gateway with its shedding`,
      'every simulated node gets its raw allocatable from one 36 KB nodes/status review through the webhook before the warm-up, so every node has a decision: ListNodes computes each with its reason, ListNodeSummaries reads those the gateway made as samples arrived (gateway/query/summary-table.ts)',
      'lag = gateway receive time - sample timestamp (same machine clock), on 100 random nodes a second',
      `warm-up before the measured window: ${WARMUP_S} s, and ${FULL_WINDOWS_WARMUP_S} s at the top scale, so every node's 60 s usage window is full when memory is measured`,
      'simulator, gateway and query client share the same 2 cores; the simulator runs at nice 19: it stands for 10,000 agents on other machines, and at equal priority its ~0.5 core of loopback TCP sends (the kernel work of one small write per sample; a Go simulator measured the same) took turns from the gateway that a gateway on its own node would not lose. The stored rate per agent shows it still sent at full rate',
      'agents on --agent-port, decoded by the ingest thread (gateway/ingest/ingest-thread.ts), the one path agents take',
    ],
  };
}

runIfMain(import.meta.url, run);

