// Fewer messages (issue 32, item 2): the agent samples every second but sends
// batches when the gateway takes them, a change at once; and the rollout works
// both ways against the contract as it was before batches (a real gRPC server
// and client built from test/fixtures/proto/before-batches).
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import * as grpc from '@grpc/grpc-js';
import { ReportStream, sendsAtOnce } from '../../../agent/stream/report-stream.js';
import type { Sample__Output } from '../../../proto/gen/oversell/v1/Sample.js';
import { contractBeforeBatches, startOldGateway } from '../../helpers/contract-before-batches.js';
import { createLogger } from '../../../lib/log.js';
import { eventually, getNode, queryClient } from '../../helpers/grpc.js';
import { startTestGateway } from '../../helpers/gateway.js';

const log = createLogger('test-agent', process.env.TEST_LOG_LEVEL ?? 'silent');
// Samples 100 ms apart, in the recent past: a batch fills (10) before it is due (5 s).
const T0 = Date.now() - 10_000;

function sample(seq: number, over: Partial<Sample__Output> = {}): Sample__Output {
  return {
    seq, timestampMs: T0 + seq * 100, cpuUsageMillicores: 1000, memoryWorkingSetBytes: 4 * 1024 ** 3, rootCgroupMemoryWorkingSetBytes: 0, cpuManager: null,
    capacity: { cpuMillicores: 4000, memoryBytes: 16 * 1024 ** 3 },
    pressure: { available: true, cpuSome: { avg10: 0, avg60: 0 }, cpuFull: null, memorySome: { avg10: 0, avg60: 0 }, memoryFull: null, cpuContention: null },
    requests: { cpuMillicores: 2000, memoryBytes: 8 * 1024 ** 3, podCount: 4, known: true }, summaries: [], onBeat: false, podNamesAsBefore: false, podsIncluded: false, pods: [],
    ...over,
  };
}

const hello = (node: string) => ({ nodeName: node, instanceId: `i-${node}`, agentVersion: 'test', host: null });

const oldContract = contractBeforeBatches;

const cleanups: (() => unknown)[] = [];
after(async () => {
  for (const c of cleanups.reverse()) await c();
});

describe('what the agent sends at once', () => {
  const last = sample(1);
  it('a steady sample waits; a change of usage, pressure, requests or a pod report does not', () => {
    assert.equal(sendsAtOnce(sample(2, { cpuUsageMillicores: 1040 }), last), false, '4 % more CPU waits');
    assert.equal(sendsAtOnce(sample(2, { memoryWorkingSetBytes: 4 * 1024 ** 3 + 8 * 1024 ** 2 }), last), false, '8 MiB more memory waits');
    assert.equal(sendsAtOnce(sample(2, { cpuUsageMillicores: 1200 }), last), true, 'a 20 % rise');
    assert.equal(sendsAtOnce(sample(2, { cpuUsageMillicores: 800 }), last), true, 'a 20 % fall');
    assert.equal(sendsAtOnce(sample(2, { memoryWorkingSetBytes: 4.5 * 1024 ** 3 }), last), true, 'memory up 12 %');
    assert.equal(sendsAtOnce(sample(2, { pressure: { ...last.pressure!, memorySome: { avg10: 2, avg60: 0 } } }), last), true, 'memory pressure');
    assert.equal(sendsAtOnce(sample(2, { requests: { ...last.requests!, cpuMillicores: 2500 } }), last), true, 'a pod bound');
    assert.equal(sendsAtOnce(sample(2, { podsIncluded: true }), last), true, 'a pod report');
    assert.equal(sendsAtOnce(sample(2), undefined), true, 'the first after a welcome');
    const pinned = sample(1, { cpuManager: { staticPolicy: true, exclusiveCpus: 2 } });
    assert.equal(sendsAtOnce(sample(2, { cpuManager: { staticPolicy: true, exclusiveCpus: 2 } }), pinned), false, 'the same CPUs held exclusively wait');
    assert.equal(sendsAtOnce(sample(2, { cpuManager: { staticPolicy: true, exclusiveCpus: 4 } }), pinned), true, 'more CPUs held exclusively (a lower CPU grant)');
    assert.equal(sendsAtOnce(sample(2, { cpuManager: { staticPolicy: true, exclusiveCpus: 2 } }), last), true, 'the CPU manager first known');
  });

  it('a CPU pressure rise is read where the gateway reads it: the contention line when the agent measures it', () => {
    const line = (avg10: number) => ({ avg10, avg60: 0 });
    const measured = sample(1, { pressure: { ...last.pressure!, cpuContention: line(0) } });
    // Throttled pods move the kernel's line; the decision does not read it, so it does not go at once.
    assert.equal(sendsAtOnce(sample(2, { pressure: { ...measured.pressure!, cpuSome: line(80) } }), measured), false, 'kernel PSI alone');
    assert.equal(sendsAtOnce(sample(2, { pressure: { ...measured.pressure!, cpuContention: line(5) } }), measured), true, 'contention');
    assert.equal(sendsAtOnce(sample(2, { pressure: { ...last.pressure!, cpuSome: line(5) } }), last), true, 'kernel PSI where no contention is measured');
  });
});

describe('batches against a gateway that takes them', () => {
  it('a steady node sends a tenth of the messages and the gateway stores every sample; a rise goes at once', async () => {
    const gw = await startTestGateway({ agentSending: { maxBatchSamples: 10, sendEveryMs: 5000 } });
    cleanups.push(() => gw.close());
    const rs = new ReportStream({ gatewayAddress: `127.0.0.1:${gw.ports.agent}`, hello: hello('batch-a'), log });
    cleanups.push(() => rs.stop());
    rs.start();
    await eventually(async () => rs.live || undefined, 5000, 'welcomed');
    for (let seq = 1; seq <= 30; seq++) rs.push(sample(seq));
    const query = queryClient(gw.ports.grpc);
    const stored = await eventually(async () => {
      const n = await getNode(query, 'batch-a').catch(() => undefined);
      return n && n.latest?.seq === 21 ? n : undefined;
    }, 5000, 'samples 1 to 21 stored');
    // The first (nothing sent before it), then 10 at a time; samples 22 to 30 wait for the next batch.
    assert.equal(rs.messagesSent, 3);
    assert.equal(stored.window?.samples, 21, 'every sample sent is stored, not only the batches\' last');
    rs.push(sample(31, { cpuUsageMillicores: 3000 }));
    const risen = await eventually(async () => {
      const n = await getNode(query, 'batch-a');
      return n.latest?.seq === 31 ? n : undefined;
    }, 2000, 'the rise stored');
    assert.equal(risen.latest?.cpuUsageMillicores, 3000);
    assert.equal(rs.messagesSent, 4, 'the rise went at once, with the samples waiting before it');
    assert.equal(risen.window?.samples, 31);
  });

  it('a sample waits at most send_every_ms: samples a second apart leave every 3 s', async () => {
    const gw = await startTestGateway({ agentSending: { maxBatchSamples: 10, sendEveryMs: 3000 } });
    cleanups.push(() => gw.close());
    const rs = new ReportStream({ gatewayAddress: `127.0.0.1:${gw.ports.agent}`, hello: hello('batch-c'), log });
    cleanups.push(() => rs.stop());
    rs.start();
    await eventually(async () => rs.live || undefined, 5000, 'welcomed');
    const at = (seq: number) => sample(seq, { timestampMs: Date.now() - 20_000 + seq * 1000 });
    for (let seq = 1; seq <= 4; seq++) rs.push(at(seq));
    assert.equal(rs.messagesSent, 1, 'the first, then 2 to 4 wait (2 s old)');
    rs.push(at(5));
    assert.equal(rs.messagesSent, 2, 'sample 2 is 3 s old at sample 5: 2 to 5 leave');
  });

  it('a gateway that announces no batches (what every gateway before them says) gets one message per sample', async () => {
    const gw = await startTestGateway({ agentSending: { maxBatchSamples: 0, sendEveryMs: 0 } });
    cleanups.push(() => gw.close());
    const rs = new ReportStream({ gatewayAddress: `127.0.0.1:${gw.ports.agent}`, hello: hello('batch-b'), log });
    cleanups.push(() => rs.stop());
    rs.start();
    await eventually(async () => rs.live || undefined, 5000, 'welcomed');
    for (let seq = 1; seq <= 12; seq++) rs.push(sample(seq));
    await eventually(async () => ((await getNode(queryClient(gw.ports.grpc), 'batch-b').catch(() => undefined))?.latest?.seq === 12) || undefined, 5000, 'all 12 stored');
    assert.equal(rs.messagesSent, 12);
  });
});

describe('a rollout, both ways, against the contract before batches', () => {
  it('a new agent and an old gateway: every message is one the old gateway reads (hello or sample), every sample arrives', async () => {
    const received: { kinds: string[]; seqs: number[] } = { kinds: [], seqs: [] };
    const { port, close } = await startOldGateway((m) => {
      received.kinds.push(m.hello ? 'hello' : m.sample ? 'sample' : 'unreadable');
      if (m.sample) received.seqs.push(m.sample.seq);
    });
    cleanups.push(close);
    const rs = new ReportStream({ gatewayAddress: `127.0.0.1:${port}`, hello: hello('old-gateway'), log });
    cleanups.push(() => rs.stop());
    rs.start();
    await eventually(async () => rs.live || undefined, 5000, 'welcomed by the old gateway');
    for (let seq = 1; seq <= 15; seq++) rs.push(sample(seq));
    await eventually(async () => received.seqs.length === 15 || undefined, 5000, 'fifteen samples at the old gateway');
    assert.deepEqual(received.seqs, Array.from({ length: 15 }, (_, i) => i + 1));
    assert.ok(!received.kinds.includes('unreadable'), `the old gateway read every message: ${received.kinds.join(',')}`);
  });

  it('an old agent and a new gateway: single samples are stored as before, and the new settings in the welcome do not disturb it', async () => {
    const gw = await startTestGateway();
    cleanups.push(() => gw.close());
    const V1 = oldContract();
    const client = new (V1.AgentStream as unknown as new (address: string, creds: grpc.ChannelCredentials) => grpc.Client & { Report(): grpc.ClientDuplexStream<unknown, { welcome?: { settings?: Record<string, unknown> } }> })(`127.0.0.1:${gw.ports.agent}`, grpc.credentials.createInsecure());
    cleanups.push(() => client.close());
    const call = client.Report();
    cleanups.push(() => call.cancel());
    const welcomes: Record<string, unknown>[] = [];
    call.on('data', (m) => m.welcome && welcomes.push(m.welcome.settings ?? {}));
    call.on('error', () => undefined);
    call.write({ hello: hello('old-agent') });
    await eventually(async () => welcomes.length > 0 || undefined, 5000, 'welcome');
    assert.deepEqual(Object.keys(welcomes[0]!).sort(), ['podReportEvery', 'sampleIntervalMs'], 'the old contract reads the welcome without the new fields');
    for (let seq = 1; seq <= 5; seq++) call.write({ sample: sample(seq) });
    const n = await eventually(async () => {
      const s = await getNode(queryClient(gw.ports.grpc), 'old-agent').catch(() => undefined);
      return s?.latest?.seq === 5 ? s : undefined;
    }, 5000, 'five samples from the old agent');
    assert.equal(n.window?.samples, 5);
  });
});
