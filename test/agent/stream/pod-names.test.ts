// Pod reports without names (Sample.pod_names_as_before): an agent names its
// pods once on a stream and then sends only their figures while they stay the
// same pods, to a gateway that says it takes that. Real gRPC both ways.
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import * as grpc from '@grpc/grpc-js';
import { NAMES_AGAIN_EVERY, ReportStream } from '../../../agent/stream/report-stream.js';
import type { AgentMessage__Output } from '../../../proto/gen/oversell/v1/AgentMessage.js';
import type { AgentStreamHandlers } from '../../../proto/gen/oversell/v1/AgentStream.js';
import type { PodUsage__Output } from '../../../proto/gen/oversell/v1/PodUsage.js';
import type { Sample__Output } from '../../../proto/gen/oversell/v1/Sample.js';
import { oversellV1 } from '../../../proto/load.js';
import { createLogger } from '../../../lib/log.js';
import { eventually, plainSample } from '../../helpers/grpc.js';
import { startTestGateway } from '../../helpers/gateway.js';

const log = createLogger('test-agent', process.env.TEST_LOG_LEVEL ?? 'silent');
const cleanups: (() => unknown)[] = [];
after(async () => {
  for (const c of cleanups.reverse()) await c();
});

const id = (n: number, c: number) => `${n.toString(16).padStart(62, '0')}${c.toString(16).padStart(2, '0')}`;
/** `count` pods of two containers each, every figure `figure` (pod i's uid u<i>). */
const podsOf = (count: number, figure: number): PodUsage__Output[] =>
  Array.from({ length: count }, (_, i) => ({
    uid: `u${i}`, qosClass: 'burstable', cpuUsageMillicores: figure, memoryWorkingSetBytes: figure, cpuThrottledMicros: figure,
    containers: [0, 1].map((c) => ({ containerId: id(i, c), cpuUsageMillicores: figure, memoryWorkingSetBytes: figure })),
  }));
const report = (seq: number, pods: PodUsage__Output[], over: Partial<Sample__Output> = {}): Sample__Output => ({ ...plainSample(seq), podsIncluded: true, pods, ...over });
const unnamed = (pods: PodUsage__Output[]) => pods.map((p) => ({ ...p, uid: '', qosClass: '', containers: p.containers.map((c) => ({ ...c, containerId: '' })) }));

/**
 * A gateway of this contract that welcomes each stream with `takes` as
 * Settings.takes_pod_names_as_before, keeps every sample it reads, and ends
 * a stream after `endAfter` samples (the agent reconnects).
 */
async function recordingGateway(takes: boolean, endAfter = Infinity): Promise<{ port: number; samples: Sample__Output[][] }> {
  const samples: Sample__Output[][] = [];
  // Welcomed past what it has, as a gateway does: nothing is replayed.
  let lastSeq = 0;
  const handlers: AgentStreamHandlers = {
    Report(call) {
      const stream: Sample__Output[] = [];
      samples.push(stream);
      call.on('data', (m: AgentMessage__Output) => {
        if (m.hello) call.write({ welcome: { lastSeq, settings: { takesPodNamesAsBefore: takes } } });
        if (m.sample) {
          stream.push(m.sample);
          lastSeq = Math.max(lastSeq, m.sample.seq);
        }
        if (stream.length === endAfter) call.emit('error', { code: grpc.status.UNAVAILABLE, details: 'the test ends this stream' });
      });
      call.on('error', () => {});
    },
  };
  const server = new grpc.Server();
  server.addService(oversellV1().AgentStream.service, handlers);
  const port = await new Promise<number>((resolve, reject) => server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (err, p) => (err ? reject(err) : resolve(p))));
  cleanups.push(() => server.forceShutdown());
  return { port, samples };
}

async function welcomed(port: number, node: string): Promise<ReportStream> {
  const rs = new ReportStream({ gatewayAddress: `127.0.0.1:${port}`, hello: { nodeName: node, instanceId: `i-${node}`, agentVersion: 'test', host: null }, log, backoffInitialMs: 50 });
  cleanups.push(() => rs.stop());
  rs.start();
  await eventually(async () => rs.live || undefined, 5000, `${node} welcomed`);
  return rs;
}

describe('an agent leaves its pods\' names out', () => {
  it('to a gateway that takes it: named first, then figures only, named again every 15th report and when the pods change', async () => {
    const gw = await recordingGateway(true);
    const rs = await welcomed(gw.port, 'names-a');
    const reports = NAMES_AGAIN_EVERY + 2;
    for (let seq = 1; seq <= reports; seq++) rs.push(report(seq, podsOf(3, seq)));
    rs.push(report(reports + 1, podsOf(4, 1)));
    rs.push(report(reports + 2, podsOf(4, 2)));
    rs.push({ ...plainSample(reports + 3) });
    const sent = await eventually(async () => (gw.samples[0]?.length === reports + 3 ? gw.samples[0] : undefined), 5000, 'every report received');
    const named = sent.map((s) => !s.podNamesAsBefore);
    assert.deepEqual(named, [true, ...Array(NAMES_AGAIN_EVERY - 1).fill(false), true, false, true, false, true]);
    for (const s of sent.filter((x) => x.podNamesAsBefore)) {
      assert.deepEqual(s.pods, unnamed(podsOf(s.pods.length, s.seq <= reports ? s.seq : s.seq - reports)), `report ${s.seq}: the figures, no name`);
    }
    assert.deepEqual(sent[0]!.pods, podsOf(3, 1), 'a named report as the agent read it');
    assert.equal(sent.at(-1)!.pods.length, 0, 'a sample without pods has none to name');
  });

  it('names them on each new stream, and always to a gateway that does not say it takes reports without names', async () => {
    const ending = await recordingGateway(true, 2);
    const rs = await welcomed(ending.port, 'names-b');
    rs.push(report(1, podsOf(2, 1)));
    rs.push(report(2, podsOf(2, 2)));
    await eventually(async () => (ending.samples.length === 2 && rs.live) || undefined, 5000, 'a second stream');
    rs.push(report(3, podsOf(2, 3)));
    await eventually(async () => ending.samples[1]?.length === 1 || undefined, 5000, 'the report on the second stream');
    assert.deepEqual(ending.samples.map((stream) => stream.map((s) => s.podNamesAsBefore)), [[false, true], [false]]);

    const old = await recordingGateway(false);
    const other = await welcomed(old.port, 'names-c');
    for (let seq = 1; seq <= 3; seq++) other.push(report(seq, podsOf(2, seq)));
    const sent = await eventually(async () => (old.samples[0]?.length === 3 ? old.samples[0] : undefined), 5000, 'three reports');
    assert.deepEqual(sent.map((s) => s.podNamesAsBefore), [false, false, false]);
    assert.deepEqual(sent.map((s) => s.pods), [1, 2, 3].map((f) => podsOf(2, f)));
  });
});

describe('a gateway takes pod reports without names', () => {
  it('keeps the named pods with the newest figures, from an agent that names them once', async () => {
    const gw = await startTestGateway();
    cleanups.push(() => gw.close());
    const rs = await welcomed(gw.ports.agent, 'names-d');
    for (let seq = 1; seq <= 5; seq++) rs.push(report(seq, podsOf(3, seq)));
    await eventually(async () => gw.store.get('names-d')?.lastSeq === 5 || undefined, 5000, 'report 5 stored');
    assert.deepEqual(gw.store.get('names-d')!.pods, podsOf(3, 5));
  });

  it('keeps the pods it has when a report without names does not fit the last named one, and stores the sample', async () => {
    const gw = await startTestGateway();
    cleanups.push(() => gw.close());
    const client = new (oversellV1().AgentStream)(`127.0.0.1:${gw.ports.agent}`, grpc.credentials.createInsecure());
    cleanups.push(() => client.close());
    const open = () => {
      const call = client.Report();
      call.on('error', () => {});
      call.write({ hello: { nodeName: 'names-e', instanceId: 'i-names-e', agentVersion: 'test' } });
      return call;
    };
    const stored = (seq: number) => eventually(async () => (gw.store.get('names-e')?.lastSeq === seq ? gw.store.get('names-e') : undefined), 5000, `sample ${seq} stored`);
    const first = open();
    first.write({ sample: report(1, podsOf(2, 1)) });
    first.write({ sample: report(2, unnamed(podsOf(2, 2)), { podNamesAsBefore: true }) });
    assert.deepEqual((await stored(2)).pods, podsOf(2, 2), 'a fitting report: the figures on the named pods');
    // One container fewer in the second pod: not the pods the names were for.
    const misfit = unnamed(podsOf(2, 3));
    misfit[1]!.containers.pop();
    first.write({ sample: report(3, misfit, { podNamesAsBefore: true }) });
    assert.deepEqual((await stored(3)).pods, podsOf(2, 2), 'the sample stored, the pods as they were');
    first.end();
    // A new stream: whatever the last one named, a report without names before one with them fits nothing.
    const second = open();
    cleanups.push(() => second.end());
    second.write({ sample: report(4, unnamed(podsOf(2, 4)), { podNamesAsBefore: true }) });
    assert.deepEqual((await stored(4)).pods, podsOf(2, 2));
    second.write({ sample: report(5, podsOf(2, 5)) });
    assert.deepEqual((await stored(5)).pods, podsOf(2, 5), 'named again: kept again');
  });
});
