// Summaries (issue 46, item 1): a gateway with --agent-summaries names its
// policies' plans; the agent keeps its own window and sends one sample with
// the window summarized by each plan, and the decision reads every sample the
// agent took while the gateway received a few. Real gRPC.
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import * as grpc from '@grpc/grpc-js';
import { ReportStream } from '../../../agent/stream/report-stream.js';
import type { Sample__Output } from '../../../proto/gen/oversell/v1/Sample.js';
import { contractBeforeBatches } from '../../helpers/contract-before-batches.js';
import { createLogger } from '../../../lib/log.js';
import { eventually } from '../../helpers/grpc.js';
import { listPolicySource, startTestGateway } from '../../helpers/gateway.js';
import { decide, DEFAULT_POLICY, type Policy } from '../../../gateway/decide/policy.js';
import { UsageWindow } from '../../../lib/usage/usage-window.js';
import { summarizeWindow } from '../../../lib/usage/window-summary.js';
import { planId } from '../../../lib/usage/summary-plan.js';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { startAgent } from '../../../agent/agent.js';
import { noPodSource } from '../../../agent/requests/pod-source.js';
import type { Settings__Output } from '../../../proto/gen/oversell/v1/Settings.js';
import type { Hello } from '../../../proto/gen/oversell/v1/Hello.js';
import { planToWire, SUMMARY_ACK_EVERY_MS, SUMMARY_ACK_EVERY_READER_MS, summarySilenceMs } from '../../../wire/usage-summary.js';
import type { AgentMessage__Output } from '../../../proto/gen/oversell/v1/AgentMessage.js';
import { oversellV1 } from '../../../proto/load.js';

const log = createLogger('test-agent', process.env.TEST_LOG_LEVEL ?? 'silent');
const T0 = Date.now() - 20_000;
const GI = 1024 ** 3;
const CAPACITY = { cpuMillicores: 4000, memoryBytes: 16 * GI };

function sample(seq: number, over: Partial<Sample__Output> = {}): Sample__Output {
  return {
    seq, timestampMs: T0 + seq * 100, cpuUsageMillicores: 1000, memoryWorkingSetBytes: 4 * GI, rootCgroupMemoryWorkingSetBytes: 0, cpuManager: null,
    capacity: CAPACITY,
    pressure: { available: true, cpuSome: { avg10: 0, avg60: 0 }, cpuFull: null, memorySome: { avg10: 0, avg60: 0 }, memoryFull: null, cpuContention: null },
    requests: { cpuMillicores: 2000, memoryBytes: 8 * GI, podCount: 4, known: true }, podsIncluded: false, pods: [], summaries: [], onBeat: false, podNamesAsBefore: false,
    ...over,
  };
}

/** Usage that creeps within what waits for the next send (under 100 millicores from the last sent): only a summary sees its peak. */
const creeping = (seq: number) => sample(seq, { cpuUsageMillicores: 1000 + ((seq * 37) % 90) });

const hello = (node: string) => ({ nodeName: node, instanceId: `i-${node}`, agentVersion: 'test', host: null });
const POOL = { matchLabels: { pool: 'a' } };
const RAW = { cpuMillicores: 4000n, memoryBytes: 16n * BigInt(GI) };
const cleanups: (() => unknown)[] = [];
after(async () => {
  for (const c of cleanups.reverse()) await c();
});

/** An agent's stream to the gateway on 127.0.0.1:port, reporting for node, once welcomed (stopped after the file). */
async function welcomedStream(port: number, node: string): Promise<ReportStream> {
  const rs = new ReportStream({ gatewayAddress: `127.0.0.1:${port}`, hello: hello(node), log });
  cleanups.push(() => rs.stop());
  rs.start();
  await eventually(async () => rs.live || undefined, 5000, `${node} welcomed`);
  return rs;
}

const windowOf = (samples: Sample__Output[]) =>
  UsageWindow.of(samples.map((s) => ({ timestampMs: s.timestampMs, cpuMillicores: s.cpuUsageMillicores, memoryBytes: s.memoryWorkingSetBytes, cpuPressure: 0, memoryPressure: 0 })));

describe('summaries', () => {
  it('one sample goes per send_every_ms, and the decision reads the window of every sample the agent took', async () => {
    const gw = await startTestGateway({ agentSending: { maxBatchSamples: 10, sendEveryMs: 3000, summaries: true } });
    cleanups.push(() => gw.close());
    const rs = await welcomedStream(gw.ports.agent, 'sum-a');
    const taken = Array.from({ length: 61 }, (_, i) => creeping(i + 1));
    for (const s of taken) rs.push(s);
    // The first at once, then one every 3 s of samples (31, 61): three messages for 61 samples.
    assert.equal(rs.messagesSent, 3);
    const record = await eventually(async () => {
      const r = gw.store.get('sum-a');
      return r?.lastSeq === 61 ? r : undefined;
    }, 5000, 'sample 61 stored');
    assert.equal(record.window.length, 3, 'the gateway keeps the samples sent, not the ones between');
    assert.equal(record.summaries.length, 1, 'one plan: the default policy\'s');
    assert.equal(record.summaries[0]!.planId, planId(DEFAULT_POLICY));

    const everySample = summarizeWindow(windowOf(taken), DEFAULT_POLICY, CAPACITY.memoryBytes);
    const sentOnly = summarizeWindow(record.window, DEFAULT_POLICY, CAPACITY.memoryBytes);
    assert.notEqual(everySample.cpuMillicores, sentOnly.cpuMillicores, 'the workload is one whose peak falls between sends');
    const d = decide({ raw: RAW, policy: DEFAULT_POLICY, usage: gw.store.usage('sum-a', Date.now()) });
    assert.equal(d.cpu.usage, everySample.cpuMillicores, 'the decision reads the agent\'s window');
    assert.deepEqual(record.summaries[0]!.summary, { ...everySample, newestMs: taken.at(-1)!.timestampMs });
    // A summarized stream is acknowledged by time (30 s since the last ack), not every fifth sample: the first at once.
    await eventually(async () => rs.ackedSeq >= 1 || undefined, 3000, 'acknowledged');
    assert.equal(rs.ackedSeq, 1, 'the next two, within 30 s of that ack, are not: an ack costs the gateway what a message does');

    rs.push(creeping(62));
    rs.push(sample(63, { cpuUsageMillicores: 3000 }));
    assert.equal(rs.messagesSent, 4, 'a rise goes at once, carrying the samples before it in its summary');
    await eventually(async () => gw.store.get('sum-a')?.lastSeq === 63 || undefined, 3000, 'the rise stored');
    assert.equal(decide({ raw: RAW, policy: DEFAULT_POLICY, usage: gw.store.usage('sum-a', Date.now()) }).cpu.usage, summarizeWindow(windowOf([...taken, creeping(62), sample(63, { cpuUsageMillicores: 3000 })]), DEFAULT_POLICY, CAPACITY.memoryBytes).cpuMillicores);
  });
});

describe('summaries and policies', () => {
  it('every valid policy\'s plan is named, a policy change reaches welcomed agents, and a node decides by its own policy\'s summary', async () => {
    const wide: Policy = { ...DEFAULT_POLICY, name: 'wide', cpu: { ...DEFAULT_POLICY.cpu, statistic: 'max' } };
    const source = listPolicySource([{ name: 'default', priority: 0, selector: POOL, policy: DEFAULT_POLICY }]);
    const gw = await startTestGateway({ policies: source, agentSending: { maxBatchSamples: 10, sendEveryMs: 3000, summaries: true } });
    cleanups.push(() => gw.close());
    const rs = await welcomedStream(gw.ports.agent, 'sum-b');
    rs.push(creeping(1));
    await eventually(async () => gw.store.get('sum-b')?.summaries.length === 1 || undefined, 3000, 'one plan');
    source.set([
      { name: 'default', priority: 0, selector: POOL, policy: DEFAULT_POLICY },
      { name: 'wide', priority: 1, selector: POOL, policy: wide },
      { name: 'broken', priority: 2, selector: POOL, policy: undefined, error: 'invalid' },
    ]);
    const taken = Array.from({ length: 40 }, (_, i) => creeping(i + 2));
    await eventually(async () => {
      for (const s of taken.splice(0, 1)) rs.push(s);
      return gw.store.get('sum-b')?.summaries.length === 2 || undefined;
    }, 3000, 'two plans after the change');
    const ids = gw.store.get('sum-b')!.summaries.map((s) => s.planId).sort();
    assert.deepEqual(ids, [planId(DEFAULT_POLICY), planId(wide)].sort());

    // No valid policy left: no plan to summarize by, and the agent sends every sample again, in batches.
    source.set([{ name: 'broken', priority: 2, selector: POOL, policy: undefined, error: 'invalid' }]);
    let next = 100;
    await eventually(async () => {
      rs.push(creeping(next++));
      return gw.store.get('sum-b')!.summaries.length === 0 || undefined;
    }, 5000, 'samples without summaries');
    const before = gw.store.get('sum-b')!.window.length;
    const stored = gw.store.get('sum-b')!.lastSeq;
    // Ten more fill the next batch, whatever waited before them.
    for (let i = 0; i < 10; i++) rs.push(creeping(next++));
    await eventually(async () => gw.store.get('sum-b')!.lastSeq >= stored + 10 || undefined, 5000, 'a batch stored');
    assert.equal(gw.store.get('sum-b')!.window.length - before, gw.store.get('sum-b')!.lastSeq - stored, 'every sample sent is in the gateway\'s window, not one in ten');
  });
});

describe('summaries in a rollout', () => {
  it('an old agent and a gateway with summaries: its samples are stored as before and decided from the gateway\'s window', async () => {
    const gw = await startTestGateway({ agentSending: { maxBatchSamples: 10, sendEveryMs: 3000, summaries: true } });
    cleanups.push(() => gw.close());
    const V1 = contractBeforeBatches();
    const client = new (V1.AgentStream as unknown as new (address: string, creds: grpc.ChannelCredentials) => grpc.Client & { Report(): grpc.ClientDuplexStream<unknown, { welcome?: unknown }> })(`127.0.0.1:${gw.ports.agent}`, grpc.credentials.createInsecure());
    cleanups.push(() => client.close());
    const call = client.Report();
    cleanups.push(() => call.cancel());
    let welcomed = false;
    call.on('data', (m) => {
      if (m.welcome) welcomed = true;
    });
    call.on('error', () => undefined);
    call.write({ hello: hello('old-agent-sum') });
    await eventually(async () => welcomed || undefined, 5000, 'welcome');
    const taken = Array.from({ length: 5 }, (_, i) => creeping(i + 1));
    for (const s of taken) call.write({ sample: s });
    const record = await eventually(async () => (gw.store.get('old-agent-sum')?.lastSeq === 5 ? gw.store.get('old-agent-sum') : undefined), 5000, 'five samples');
    assert.equal(record.window.length, 5);
    assert.equal(record.summaries.length, 0);
    const d = decide({ raw: RAW, policy: DEFAULT_POLICY, usage: gw.store.usage('old-agent-sum', Date.now()) });
    assert.equal(d.cpu.usage, summarizeWindow(windowOf(taken), DEFAULT_POLICY, CAPACITY.memoryBytes).cpuMillicores);
  });
});

describe('a real agent to a gateway with summaries', () => {
  it('sends a pod report no more often than it sends: the reports, which go at once, do not set its pace', async () => {
    const gw = await startTestGateway({ agentSending: { maxBatchSamples: 10, sendEveryMs: 1000, summaries: true } });
    cleanups.push(() => gw.close());
    const fixtures = fileURLToPath(new URL('../../fixtures', import.meta.url));
    const address = `127.0.0.1:${gw.ports.agent}`;
    // A pod report every 2nd sample, a sample every 100 ms: alone, a message every 200 ms.
    const agent = startAgent({
      nodeName: 'sum-pods', gatewayAddresses: [address], procRoot: join(fixtures, 'proc', 'vm-2cpu'), cgroupRoot: join(fixtures, 'cgroup', 'v2-systemd'),
      intervalMs: 100, podReportEvery: 2, pods: noPodSource(), log,
    });
    cleanups.push(() => agent.stop());
    await eventually(async () => agent.gateways.live || undefined, 5000, 'welcomed');
    const stream = agent.gateways.stream(address)!;
    const from = stream.messagesSent;
    await new Promise((r) => setTimeout(r, 3000));
    const sent = stream.messagesSent - from;
    // One a second (send_every_ms), and a pod report with each: 3 in 3 s (15 at a report every 2nd sample).
    assert.ok(sent >= 2 && sent <= 5, `${sent} messages in 3 s`);
    const record = gw.store.get('sum-pods');
    assert.ok(record && record.podsAtMs > 0, 'pod reports still reach the gateway');
    assert.ok(Date.now() - record.podsReceivedAtMs <= 2500, `the newest pod report is ${Date.now() - record.podsReceivedAtMs} ms old`);
  });
});

describe('acknowledgements of a summarizing stream', () => {
  it('an agent that reads the interval is told a longer one and waits for it; an older agent is acknowledged every 30 s as it expects', async () => {
    const gw = await startTestGateway({ agentSending: { maxBatchSamples: 10, sendEveryMs: 3000, summaries: true } });
    cleanups.push(() => gw.close());
    const settingsOf = async (h: Hello) => {
      let told: Settings__Output | undefined;
      const rs = new ReportStream({ gatewayAddress: `127.0.0.1:${gw.ports.agent}`, hello: h, log, onSettings: (s) => (told = s) });
      cleanups.push(() => rs.stop());
      rs.start();
      return eventually(async () => told, 5000, `${h.nodeName} welcomed`);
    };
    const reader = await settingsOf({ ...hello('ack-reader'), readsSummaryAckEvery: true });
    assert.equal(reader.summaryAckEveryMs, SUMMARY_ACK_EVERY_READER_MS);
    const older = await settingsOf(hello('ack-older'));
    assert.equal(older.summaryAckEveryMs, 0, 'an older agent is not told (it would not read it) and is acknowledged every 30 s');
    // The agent waits the interval it was told and two send intervals; a gateway that says nothing, 30 s and two.
    assert.equal(summarySilenceMs(reader.summaryAckEveryMs, 20_000), 130_000);
    assert.equal(summarySilenceMs(0, 20_000), SUMMARY_ACK_EVERY_MS + 40_000);
  });
});

describe('summaries on the beat', () => {
  it('a summary sent because its beat came is marked on_beat; the first and a rise are not', async () => {
    // A gateway that records what it receives: the mark is on the wire, not in the store.
    const received: Sample__Output[] = [];
    const server = new grpc.Server();
    server.addService(oversellV1().AgentStream.service, {
      Report(call: grpc.ServerDuplexStream<AgentMessage__Output, unknown>) {
        call.on('data', (m: AgentMessage__Output) => {
          if (m.hello) call.write({ welcome: { lastSeq: 0, settings: { maxBatchSamples: 10, sendEveryMs: 3000, summaryPlans: [planToWire(DEFAULT_POLICY)] } } });
          if (m.sample) received.push(m.sample);
        });
      },
    });
    const port = await new Promise<number>((resolve, reject) => server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (err, p) => (err ? reject(err) : resolve(p))));
    cleanups.push(() => server.forceShutdown());
    const rs = await welcomedStream(port, 'beat-a');
    for (let seq = 1; seq <= 61; seq++) rs.push(creeping(seq));
    rs.push(sample(62, { cpuUsageMillicores: 3000 }));
    await eventually(async () => (received.length === 4 ? true : undefined), 5000, 'four messages received');
    assert.deepEqual(received.map((s) => [Number(s.seq), s.onBeat, s.summaries.length > 0]), [
      [1, false, true], // the first: at once
      [31, true, true], // 3 s of samples later: the beat
      [61, true, true],
      [62, false, true], // a rise: at once, off the beat
    ]);
  });

  it('the gateway holds a summary on the beat up to 500 ms before its store has it, and hands a rise over at once', async () => {
    const gw = await startTestGateway({ agentSending: { maxBatchSamples: 10, sendEveryMs: 3000, summaries: true } });
    cleanups.push(() => gw.close());
    const rs = await welcomedStream(gw.ports.agent, 'beat-b');
    const storedIn = async (push: () => void, seq: number) => {
      const t0 = performance.now();
      push();
      await eventually(async () => (gw.store.get('beat-b')?.lastSeq === seq ? true : undefined), 5000, `sample ${seq} stored`);
      return performance.now() - t0;
    };
    await storedIn(() => rs.push(creeping(1)), 1);
    for (let seq = 2; seq <= 30; seq++) rs.push(creeping(seq));
    const onBeat = await storedIn(() => rs.push(creeping(31)), 31);
    // A timer never fires early: the lower bound holds on any machine (the upper one is the flush-soon test's).
    assert.ok(onBeat >= 450, `the summary on the beat reached the store ${onBeat.toFixed(0)} ms after it was sent: it waited for the 500 ms hand-over`);
    const rise = await storedIn(() => rs.push(sample(32, { cpuUsageMillicores: 3000 })), 32);
    assert.ok(rise < onBeat, `the rise (${rise.toFixed(0)} ms) is handed over sooner than the beat (${onBeat.toFixed(0)} ms)`);
  });
});
