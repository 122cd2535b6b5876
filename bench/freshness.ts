// Freshness: time from a usage change in the agent's files to the changed grant
// visible in the query API. A fake host root (FakeHost: /proc/stat, /proc/meminfo,
// /proc/pressure/*, a cgroup v2 tree), the real agent binary sampling it every
// second, a real gateway process with --calm-period 0s (so a grant follows the
// pressure both ways at once), and a GetNode poll every 20 ms.
//
//   node --import tsx bench/freshness.ts              # 20 flips each way
//   BENCH_QUICK=1 node --import tsx bench/freshness.ts   # 5
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { FakeHost, type FakeUsage } from '../test/helpers/fake-host.js';
import { getNode, queryClient } from '../test/helpers/grpc.js';
import { postHttps } from '../test/helpers/gateway.js';
import type { NodeStatus__Output } from '../proto/gen/oversell/v1/NodeStatus.js';
import {
  REPO, ensureBuilt, log, printResult, quickFromEnv, sleep, startAgentProcess, waitFor, type Child,
} from './agent-overhead.js';
import { percentile, round, runIfMain, type BenchResult } from './result.js';
import { startGateway } from './processes.js';
import { SUMMARY_SEND_EVERY_MS } from '../gateway/config/defaults.js';

const FIXTURE_NODE = 'ip-10-0-17-42.eu-west-1.compute.internal';
const POLL_MS = 20;
const GiB = 1024 ** 3;

/** The fixture review for `node`: the kubelet's write as it is, object and oldObject. */
function fixtureReview(node: string): string {
  const review = readFileSync(join(REPO, 'test/fixtures/admission/node-status-update.json'), 'utf8').replaceAll(FIXTURE_NODE, node);
  const parsed = JSON.parse(review) as { request: { name: string; object: { metadata: { name: string } } } };
  parsed.request.name = node;
  parsed.request.object.metadata.name = node;
  return JSON.stringify(parsed);
}

interface Trial {
  direction: 'pressure' | 'calm';
  /** File change to the new memory bound in a GetNode answer. */
  latencyMs: number;
  /** File change to the agent's timestamp on the first sample that carried it. */
  toSampleMs: number;
  /** That sample's timestamp to the gateway receiving it. */
  sampleToReceivedMs: number;
  /** That sample's timestamp to the poll that saw the new grant. */
  sampleToQueryMs: number;
  memoryGrantBytes: number;
}

export async function run(options: { quick?: boolean } = {}): Promise<BenchResult> {
  const quick = quickFromEnv(options);
  const flips = quick ? 5 : 20;
  ensureBuilt();
  log(`freshness: ${flips} flips of memory PSI each way (0 <-> 50% some avg10), GetNode polled every ${POLL_MS} ms`);

  const work = mkdtempSync(join(tmpdir(), 'oversell-bench-freshness-'));
  const calm: FakeUsage = { cpuMillicores: 2000, memoryWorkingSetBytes: 8 * GiB, cpuSomeAvg10: 0, memorySomeAvg10: 0 };
  const pressure: FakeUsage = { ...calm, memorySomeAvg10: 50 };
  const host = new FakeHost(work, 8, 32 * GiB, calm).start(100);
  const children: Child[] = [];
  const nodeName = 'bench-freshness';
  let client: ReturnType<typeof queryClient> | undefined;
  try {
    const gateway = await startGateway({ args: ['--calm-period', '0s'], echo: false });
    children.push(gateway);
    const agent = startAgentProcess({
      nodeName, gatewayPort: gateway.ports.agent, procRoot: host.procRoot, cgroupRoot: host.cgroupRoot,
      podsFile: join(REPO, 'examples/local-pods.yaml'),
    });
    children.push(agent);
    client = queryClient(gateway.ports.grpc);
    const c = client;
    log(`gateway pid ${gateway.pid} (--calm-period 0s), agent pid ${agent.pid} on a fake host root (8 CPUs, 32 GiB)`);
    await waitFor('the agent\'s first sample at the gateway', async () => ((await getNode(c, nodeName)).latest ? true : undefined));

    // The webhook learns the node's raw allocatable from the kubelet's review; without it there is no decision.
    const ca = readFileSync(join(gateway.tlsDir, 'ca.crt'), 'utf8');
    const answer = await postHttps({ ports: gateway.ports, ca }, '/mutate/nodes', fixtureReview(nodeName));
    if (answer.status !== 200) throw new Error(`webhook answered ${answer.status}: ${answer.body.slice(0, 300)}`);
    const first = await waitFor('a decision with known requests', async () => {
      const s = await getNode(c, nodeName);
      return s.decision && s.latest?.requests?.known && s.decision.memoryBound !== 'pressure' ? s : undefined;
    });
    log(`raw allocatable known; memory ${first.decision?.memoryBound}, grant ${round((first.decision?.allocatable?.memoryBytes ?? 0) / GiB, 2)} GiB ` +
      `(raw ${round((first.rawAllocatable?.memoryBytes ?? 0) / GiB, 2)} GiB), requests known`);

    const trials: Trial[] = [];
    const flip = async (direction: Trial['direction']): Promise<Trial> => {
      // De-phase from the agent's 1 s tick, so the wait for the next sample is sampled uniformly.
      await sleep(Math.random() * 1000);
      const isDone = (s: NodeStatus__Output) => (direction === 'pressure' ? s.decision?.memoryBound === 'pressure' : s.decision?.memoryBound !== 'pressure');
      host.set(direction === 'pressure' ? pressure : calm);
      const changedAt = Date.now();
      const t0 = performance.now();
      // A fall waits for the agent's next message (summaries: up to SUMMARY_SEND_EVERY_MS); the wait must outlast it.
      const waitMs = direction === 'pressure' ? 10_000 : SUMMARY_SEND_EVERY_MS + 10_000;
      const deadline = t0 + waitMs;
      for (;;) {
        const s = await getNode(c, nodeName);
        const now = Date.now();
        if (isDone(s)) {
          const latest = s.latest;
          const sampleAt = Number(latest?.timestampMs ?? 0);
          return {
            direction,
            latencyMs: performance.now() - t0,
            toSampleMs: sampleAt - changedAt,
            sampleToReceivedMs: Number(s.receivedAtMs) - sampleAt,
            sampleToQueryMs: now - sampleAt,
            memoryGrantBytes: Number(s.decision?.allocatable?.memoryBytes ?? 0),
          };
        }
        if (performance.now() > deadline) throw new Error(`no ${direction} grant within ${waitMs / 1000} s (bound ${s.decision?.memoryBound})`);
        await sleep(POLL_MS);
      }
    };
    for (let i = 1; i <= flips; i++) {
      const up = await flip('pressure');
      const down = await flip('calm');
      trials.push(up, down);
      log(`  flip ${String(i).padStart(2)}/${flips}: pressure visible in ${up.latencyMs.toFixed(0).padStart(4)} ms ` +
        `(grant ${round(up.memoryGrantBytes / GiB, 2)} GiB), calm in ${down.latencyMs.toFixed(0).padStart(4)} ms (grant ${round(down.memoryGrantBytes / GiB, 2)} GiB)`);
    }
    for (const ch of [agent, gateway]) {
      if (ch.proc.exitCode !== null) throw new Error(`a process exited during the run:\n${ch.output()}`);
    }

    const sorted = (xs: number[]) => [...xs].sort((a, b) => a - b);
    const all = sorted(trials.map((t) => t.latencyMs));
    const up = sorted(trials.filter((t) => t.direction === 'pressure').map((t) => t.latencyMs));
    const down = sorted(trials.filter((t) => t.direction === 'calm').map((t) => t.latencyMs));
    const toSample = sorted(trials.map((t) => t.toSampleMs));
    const toReceived = sorted(trials.map((t) => t.sampleToReceivedMs));
    const toQuery = sorted(trials.map((t) => t.sampleToQueryMs));
    const p99 = percentile(all, 99);
    const riseP99 = percentile(up, 99);
    const fallP99 = percentile(down, 99);
    // A fall waits for the agent's next message: at most send_every after its last, plus a sample and the path.
    const fallBoundMs = SUMMARY_SEND_EVERY_MS + 1500;

    return {
      name: 'freshness',
      summary: `usage change in the agent's files to the new grant in the query API: a rise (pressure) p50 ${round(percentile(up, 50), 0)} ms, p99 ${round(riseP99, 0)} ms; ` +
        `a fall (calm, sent with the next message) p50 ${round(percentile(down, 50), 0)} ms, p99 ${round(fallP99, 0)} ms (${all.length} changes, 1 s sampling); ` +
        `sample to query API p99 ${round(percentile(toQuery, 99), 0)} ms`,
      figures: {
        p50_ms: round(percentile(all, 50), 1),
        p99_ms: round(p99, 1),
        max_ms: round(all.at(-1) ?? NaN, 1),
        pressure_p50_ms: round(percentile(up, 50), 1),
        pressure_p99_ms: round(riseP99, 1),
        pressure_max_ms: round(up.at(-1) ?? NaN, 1),
        calm_p50_ms: round(percentile(down, 50), 1),
        calm_p99_ms: round(fallP99, 1),
        calm_max_ms: round(down.at(-1) ?? NaN, 1),
        change_to_sample_p50_ms: round(percentile(toSample, 50), 1),
        change_to_sample_max_ms: round(toSample.at(-1) ?? NaN, 1),
        sample_to_gateway_p50_ms: round(percentile(toReceived, 50), 1),
        sample_to_gateway_p99_ms: round(percentile(toReceived, 99), 1),
        sample_to_query_p50_ms: round(percentile(toQuery, 50), 1),
        sample_to_query_p99_ms: round(percentile(toQuery, 99), 1),
        changes: all.length,
        poll_ms: POLL_MS,
        interval_ms: 1000,
      },
      targets: [
        // Issue 32: agents send a rise (what lowers allocatable) at once and the rest in batches; the freshness of a rise stays as it was.
        { name: 'a rise (pressure) to query API p99 <= 1500 ms (1 s sampling)', measured: `${round(riseP99, 0)} ms`, met: riseP99 <= 1500 },
        { name: `a fall (calm) to query API p99 <= ${fallBoundMs} ms (the agents' send-every ${SUMMARY_SEND_EVERY_MS / 1000} s + 1.5 s)`, measured: `${round(fallP99, 0)} ms`, met: fallP99 <= fallBoundMs },
      ],
      notes: [
        'Each change rewrites /proc/pressure/memory of a fake host root (write aside, rename over) between some avg10=0 and 50 ' +
          '(threshold 10); the gateway runs with --calm-period 0s so the memory grant drops to the floor and comes back at once, and both ' +
          `directions are measured (${flips} each). The clock starts after the rename and stops at the first GetNode answer (polled every ${POLL_MS} ms) whose ` +
          'decision.memoryBound changed to/from "pressure".',
        `The gateway runs its defaults (summaries): a rise of pressure is sent at once; a fall waits for the agent's next summarized sample, at most --agent-send-every (${SUMMARY_SEND_EVERY_MS / 1000} s) after its last message (what raises allocatable may wait; what lowers it may not).`,
        'The agent samples every 1 s, so most of the latency is waiting for its next tick (change_to_sample: uniform over 0-1000 ms, since each change ' +
          'is made after a random 0-1 s delay), plus reading, the gRPC stream, the ingest thread\'s hand-over to the main thread (within 50 ms of a sample sent at once, a rise; within 500 ms of a summary on the beat, which a fall may be) and the decision ' +
          '(sample_to_query, which includes up to one poll interval). Expect up to ~1 s plus about 100 ms.',
        'Real gateway and agent binaries as child processes on 127.0.0.1, real gRPC stream; agent --pods-file examples/local-pods.yaml so requests are known; ' +
          'raw allocatable from one kubelet-shaped nodes/status AdmissionReview (test/fixtures/admission/node-status-update.json) posted over HTTPS.',
        'The node-object part (usage change to status.allocatable on a real API server, written by the gateway) is the pressure-to-node benchmark.',
      ],
    };
  } finally {
    host.stop();
    client?.close();
    await Promise.all(children.map((ch) => ch.stop()));
    rmSync(work, { recursive: true, force: true });
  }
}

runIfMain(import.meta.url, run, printResult);
