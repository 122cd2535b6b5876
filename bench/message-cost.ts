// What a replica pays for its agents, split into what each message costs and
// what each sample in it costs: the figure that says how far sending fewer,
// richer messages (a summary instead of samples, issue 46) can take the cost
// per 1,000 agents. One gateway per setting, 1,000 loadgen agents on their own
// TLS connections to the agent port, the gateway's process CPU over a window:
//
//   A  a sample a second, 5 a message (batches, --agent-summaries off)
//   B  a sample a second, 10 a message     B - C: 900 samples/s at one message rate
//   C  a sample every 10 s, 1 a message    A - B: 100 messages/s at one sample rate
//   S  a sample every 20 s with its window summary (the default, --agent-summaries on):
//      what a summarizing agent costs (it sends one sample every 20 s and a rise at once)
//   S40, S60  the same every 40 s and 60 s, --stale-after twice that: what the send
//      interval buys, and what it costs in how old the decision's and metrics API's data may be
//   F  S's agents against bench/agent-stream-floor.ts, a bare AgentStream server with the
//      gateway's transport that decodes each message and keeps nothing: the floor under S
//
// Every agent reports its node's 30 pods as a real agent does: A, B and C one
// report per 10 s (every 10th sample; C's every sample), S one with each
// message (the agent sends its report with a sample it sends anyway).
//
// Each setting runs ROUNDS times, in turn, so drift on the shared machine falls
// on all of them alike.
import { cpuSeconds } from './proc-stats.js';
import { log, startAgentStreamFloor, startGateway } from './processes.js';
import { ensureLoadgen, PROTO, startLoadgen, waitForLine } from './loadgen.js';
import { mean, round, runIfMain, type BenchResult } from './result.js';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { SUMMARY_SEND_EVERY_MS } from '../gateway/config/defaults.js';
import { SUMMARY_ACK_EVERY_READER_MS } from '../wire/usage-summary.js';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

interface Setting {
  name: 'A' | 'B' | 'C' | 'S' | 'S40' | 'S60' | 'F';
  intervalS: number;
  batch: number;
  summaries?: number;
  /** Every Nth sample carries the pod report of PODS pods. */
  podEvery: number;
  /** Against the bare server (bench/agent-stream-floor.ts), not a gateway. */
  floor?: boolean;
}
export const SETTINGS: Setting[] = [
  { name: 'A', intervalS: 1, batch: 5, podEvery: 10 },
  { name: 'B', intervalS: 1, batch: 10, podEvery: 10 },
  { name: 'C', intervalS: 10, batch: 1, podEvery: 1 },
  { name: 'S', intervalS: SUMMARY_SEND_EVERY_MS / 1000, batch: 1, summaries: 1, podEvery: 1 },
  { name: 'S40', intervalS: 40, batch: 1, summaries: 1, podEvery: 1 },
  { name: 'S60', intervalS: 60, batch: 1, summaries: 1, podEvery: 1 },
  { name: 'F', intervalS: SUMMARY_SEND_EVERY_MS / 1000, batch: 1, summaries: 1, podEvery: 1, floor: true },
];
/** The longer sends need a longer --stale-after: twice the interval, as the defaults (20 s, 40 s) leave room for one lost message. */
const staleAfterArgs = (s: Setting) => (s.summaries && s.intervalS * 1000 > SUMMARY_SEND_EVERY_MS ? ['--stale-after', `${2 * s.intervalS}s`] : []);
const AGENTS = 1000;
/** Pods a node runs (the loadgen's requests say 30). */
const PODS = 30;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** The loadgen's tokens file for AGENTS agents in `dir`: one line each, no token (a gateway without a cluster asks none). */
export function writeAgentTokens(dir: string): string {
  const tokens = join(dir, 'agents');
  writeFileSync(tokens, Array.from({ length: AGENTS }, (_, i) => `sim-${i} -\n`).join(''));
  return tokens;
}

/** The server's agent port, its CA and how to stop it: a gateway, or the floor for setting F. */
async function startServer(s: Setting): Promise<{ pid: number; port: number; tlsDir: string; stop: () => Promise<void> }> {
  if (!s.floor) {
    const gw = await startGateway({ echo: false, args: ['--grpc-tls', 'on', ...(s.summaries ? ['--agent-summaries', 'on', '--agent-send-every', `${s.intervalS}s`, ...staleAfterArgs(s)] : ['--agent-summaries', 'off'])] });
    return { pid: gw.pid, port: gw.ports.agent, tlsDir: gw.tlsDir, stop: gw.stop };
  }
  const tlsDir = mkdtempSync(join(tmpdir(), 'oversell-bench-tls-'));
  const floor = await startAgentStreamFloor(tlsDir);
  return { pid: floor.pid, port: floor.port, tlsDir, stop: async () => {
    await floor.stop();
    rmSync(tlsDir, { recursive: true, force: true });
  } };
}

/** The server's millicores with AGENTS agents of one setting, over windowS after warmS. */
export async function measure(loadgen: string, tokens: string, s: Setting, warmS: number, windowS: number): Promise<{ millicores: number; idleMillicores: number }> {
  const server = await startServer(s);
  try {
    const idleFrom = cpuSeconds(server.pid);
    await sleep(5000);
    const idleMillicores = ((cpuSeconds(server.pid) - idleFrom) / 5) * 1000;
    const run = startLoadgen(loadgen, 'agents', ['--address', `127.0.0.1:${server.port}`, '--proto', PROTO, '--tokens', tokens, '--ca', join(server.tlsDir, 'ca.crt'),
      '--interval', `${s.intervalS}s`, '--batch', String(s.batch), '--summaries', String(s.summaries ?? 0), '--pods', String(PODS), '--pod-report-every', String(s.podEvery)], { echo: process.env.BENCH_ECHO === '1' });
    try {
      await waitForLine(run, /^connected-in-ms \d+/, 120_000, `${AGENTS} agents (${s.name})`);
      // Agents start their batches together: a whole batch period lets their phases spread before the window.
      await sleep(warmS * 1000 + s.intervalS * s.batch * 1000);
      const from = cpuSeconds(server.pid);
      await sleep(windowS * 1000);
      return { millicores: ((cpuSeconds(server.pid) - from) / windowS) * 1000, idleMillicores };
    } finally {
      run.child.kill('SIGTERM');
      await run.result.catch(() => undefined);
    }
  } finally {
    await server.stop();
  }
}

export async function run(o: { quick?: boolean } = {}): Promise<BenchResult> {
  const rounds = o.quick ? 1 : 3;
  const warmS = o.quick ? 3 : 10;
  const windowS = o.quick ? 10 : 30;
  const loadgen = await ensureLoadgen();
  const work = mkdtempSync(join(tmpdir(), 'oversell-message-cost-'));
  const tokens = writeAgentTokens(work);
  const runs: Record<Setting['name'], number[]> = { A: [], B: [], C: [], S: [], S40: [], S60: [], F: [] };
  const idle: number[] = [];
  try {
    for (let r = 0; r < rounds; r++) {
      for (const s of SETTINGS) {
        const m = await measure(loadgen, tokens, s, warmS, windowS);
        runs[s.name].push(m.millicores - m.idleMillicores);
        idle.push(m.idleMillicores);
        log(`message-cost round ${r + 1}/${rounds}: ${s.name} (a sample per ${s.intervalS} s, ${s.batch} a message) ${round(m.millicores)} millicores, ${round(m.idleMillicores)} idle`);
      }
    }
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
  const [a, b, c, sum, s40, s60, floor] = [mean(runs.A), mean(runs.B), mean(runs.C), mean(runs.S), mean(runs.S40), mean(runs.S60), mean(runs.F)];
  const perThousand = (x: number) => round((x * 1000) / AGENTS, 1);
  // Per second with AGENTS agents: A 200 messages and 1000 samples, B 100 and 1000, C 100 and 100.
  const usPerMessage = ((a - b) / 100) * 1000;
  const usPerSample = ((b - c) / 900) * 1000;
  return {
    name: 'message-cost',
    summary: `per 1,000 agents: ${perThousand(a)} millicores at 5 samples a message every 5 s, ${perThousand(b)} at 10 every 10 s, ${perThousand(c)} at 1 every 10 s, ${perThousand(sum)} at 1 with its window summary every ${SUMMARY_SEND_EVERY_MS / 1000} s, the default (${perThousand(s40)} every 40 s, ${perThousand(s60)} every 60 s; ${perThousand(floor)} for a bare server that only decodes the same messages); a pod report of ${PODS} pods every 10 s (every message with summaries); about ${round(usPerMessage)} µs a message and ${round(usPerSample)} µs a sample`,
    figures: {
      agents: AGENTS,
      rounds,
      window_s: windowS,
      a_millicores_per_1000: perThousand(a),
      b_millicores_per_1000: perThousand(b),
      c_millicores_per_1000: perThousand(c),
      s_millicores_per_1000: perThousand(sum),
      s40_millicores_per_1000: perThousand(s40),
      s60_millicores_per_1000: perThousand(s60),
      floor_millicores_per_1000: perThousand(floor),
      a_runs: runs.A.map((x) => round(x)).join(' '),
      b_runs: runs.B.map((x) => round(x)).join(' '),
      c_runs: runs.C.map((x) => round(x)).join(' '),
      s_runs: runs.S.map((x) => round(x)).join(' '),
      s40_runs: runs.S40.map((x) => round(x)).join(' '),
      s60_runs: runs.S60.map((x) => round(x)).join(' '),
      floor_runs: runs.F.map((x) => round(x)).join(' '),
      idle_millicores: round(mean(idle)),
      us_per_message: round(usPerMessage),
      us_per_sample: round(usPerSample),
    },
    targets: [{ name: `a replica's cost per 1,000 agents <= 15 millicores, agents at the default (setting S: a summary every ${SUMMARY_SEND_EVERY_MS / 1000} s)`, measured: `${perThousand(sum)} millicores (a bare server that only decodes the same messages: ${perThousand(floor)})`, met: perThousand(sum) <= 15 }],
    notes: [
      `one gateway per setting (dist/, TLS on the agent port, decoded by its ingest thread), ${AGENTS} bench/loadgen agents each on its own TLS connection, no token (a gateway without a cluster asks none); each setting ${rounds} times in turn; its CPU (every thread) over ${windowS} s after ${warmS} s and one batch period, less its idle CPU before the agents`,
      `A: a sample a second sent 5 a message (a steady agent with batches, --agent-summaries off, --agent-send-every 5s); B: 10 a message; C: one sample every 10 s, one a message; S: one sample every ${SUMMARY_SEND_EVERY_MS / 1000} s with one window summary, to a gateway with its defaults (--agent-summaries on, acknowledged once ${SUMMARY_ACK_EVERY_READER_MS / 1000} s have passed since the last ack, as an agent that reads the interval is); every agent reports ${PODS} pods (2 containers each) as a real one does: A, B and C every 10 s (every 10th sample, C every sample), S with each message. Batches leave spread over their period (agent i's first batch is i mod the batch short), as independent agents' do. A - B is 100 messages/s at one sample rate, B - C 900 samples/s at one message rate (both with 100 pod reports/s)`,
      `F: S's agents against bench/agent-stream-floor.ts, a bare AgentStream server with the gateway's TLS listener, grpc-js, server options, proto, loader options and Node flags that welcomes each stream and decodes each message, and does nothing else (no checks, no store, no ingest thread): what grpc-js, Node's TLS and HTTP/2 and decoding cost for the same bytes, the floor under S on this machine`,
      'S40 and S60: S with --agent-send-every 40s and 60s and --stale-after twice that (the flags refuse a send interval at or over it). What they cost besides CPU: a rise, pressure or a change of requests is still sent at once, so a node is lowered as fast; but a node whose agent stopped keeps its grant up to --stale-after (80 s, 120 s against 40 s), the end of pressure raises allocatable up to the interval later, and the metrics API\'s figures (kubectl top, the HPA) are up to the interval old (metrics-server\'s own manifests scrape every 15 s)',
    ],
  };
}

runIfMain(import.meta.url, run);
