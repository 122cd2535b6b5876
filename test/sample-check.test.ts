// Sane agent data (issue 19, invariant 3): every sample is checked before it is
// stored; a bad one is refused with a counted reason and the stream stays up.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import * as grpc from '@grpc/grpc-js';
import { oversellV1 } from '../proto/load.js';
import type { AgentMessage } from '../proto/gen/oversell/v1/AgentMessage.js';
import type { GatewayMessage__Output } from '../proto/gen/oversell/v1/GatewayMessage.js';
import type { Sample__Output } from '../proto/gen/oversell/v1/Sample.js';
import { checkSample, SAMPLE_BOUNDS, type SampleRefusal } from '../gateway/ingest/sample-check.js';
import { AGENT_STREAM_MODES, getHttp, startTestGateway } from './helpers/gateway.js';
import { eventually } from './helpers/grpc.js';

const GI = 1024 ** 3;
function sample(over: Partial<Sample__Output> = {}): Sample__Output {
  return {
    seq: 1, timestampMs: Date.now(), cpuUsageMillicores: 1500, memoryWorkingSetBytes: 3 * GI,
    capacity: { cpuMillicores: 4000, memoryBytes: 8 * GI },
    pressure: { available: true, cpuSome: { avg10: 12.5, avg60: 8 }, cpuFull: { avg10: 0, avg60: 0 }, memorySome: { avg10: 0.5, avg60: 0.1 }, memoryFull: { avg10: 0, avg60: 0 } },
    requests: { cpuMillicores: 6000, memoryBytes: 10 * GI, podCount: 12, known: true },
    podsIncluded: false, pods: [],
    ...over,
  };
}
const psi = (avg10: number) => ({ available: true, cpuSome: { avg10, avg60: 1 }, cpuFull: { avg10: 0, avg60: 0 }, memorySome: { avg10: 0, avg60: 0 }, memoryFull: { avg10: 0, avg60: 0 } });
const pod = (cpu: number, mem: number) => ({ uid: 'u', qosClass: 'burstable', cpuUsageMillicores: cpu, memoryWorkingSetBytes: mem });

describe('sample check (pure)', () => {
  it('a real sample passes, at the edges too (usage at its bound, requests at 16x, PSI 100, idle with no capacity)', () => {
    assert.equal(checkSample(sample()), undefined);
    assert.equal(checkSample(sample({ cpuUsageMillicores: 6000, memoryWorkingSetBytes: 1.1 * 8 * GI })), undefined);
    assert.equal(checkSample(sample({ requests: { cpuMillicores: 64_000, memoryBytes: 128 * GI, podCount: 1, known: true } })), undefined);
    assert.equal(checkSample(sample({ pressure: psi(100) })), undefined);
    assert.equal(checkSample(sample({ cpuUsageMillicores: 0, memoryWorkingSetBytes: 0, capacity: null, requests: null })), undefined);
    assert.equal(checkSample(sample({ podsIncluded: true, pods: [pod(500, GI), pod(0, 0)] })), undefined);
    // Unknown requests are not checked: the gateway never uses them.
    assert.equal(checkSample(sample({ requests: { cpuMillicores: 9e18, memoryBytes: 0, podCount: 0, known: false } })), undefined);
  });

  const bad: Array<[SampleRefusal, Partial<Sample__Output>]> = [
    ['not-finite', { pressure: psi(NaN) }],
    ['not-finite', { pressure: psi(Infinity) }],
    ['negative', { cpuUsageMillicores: -1 }],
    ['negative', { requests: { cpuMillicores: -5, memoryBytes: 0, podCount: 0, known: true } }],
    ['capacity-implausible', { capacity: { cpuMillicores: SAMPLE_BOUNDS.maxCapacityMillicores + 1, memoryBytes: 8 * GI } }],
    ['capacity-implausible', { capacity: { cpuMillicores: 4000, memoryBytes: 2 ** 51 } }],
    ['no-capacity', { capacity: null }],
    ['usage-over-capacity', { cpuUsageMillicores: 6001 }],
    ['usage-over-capacity', { memoryWorkingSetBytes: 9 * GI + 1 }],
    ['requests-over-capacity', { requests: { cpuMillicores: 9e18, memoryBytes: GI, podCount: 1, known: true } }],
    ['requests-over-capacity', { requests: { cpuMillicores: 1000, memoryBytes: 128 * GI + 1, podCount: 1, known: true } }],
    ['pressure-out-of-range', { pressure: psi(100.5) }],
    ['pod-usage-invalid', { podsIncluded: true, pods: [pod(500, GI), pod(-1, GI)] }],
    ['pod-usage-invalid', { podsIncluded: true, pods: [pod(7000, GI)] }],
  ];
  for (const [reason, over] of bad) {
    it(`refuses ${JSON.stringify(over).slice(0, 90)} as ${reason}`, () => {
      assert.equal(checkSample(sample(over)), reason);
    });
  }
});

type RawCall = grpc.ClientDuplexStream<AgentMessage, GatewayMessage__Output>;

for (const { mode, options, port } of AGENT_STREAM_MODES) describe(`sample check over real gRPC (${mode})`, () => {
  it('a bad sample between good ones is refused and counted by reason; the good ones are stored and the stream stays up', async () => {
    const gw = await startTestGateway(options);
    const client = new (oversellV1().AgentStream)(`127.0.0.1:${port(gw)}`, grpc.credentials.createInsecure());
    const call = client.Report() as unknown as RawCall;
    let error: grpc.ServiceError | undefined;
    call.on('data', () => {});
    call.on('error', (e: grpc.ServiceError) => (error = e));
    try {
      call.write({ hello: { nodeName: 'node-s', instanceId: 'i' } });
      const at = (seq: number, over: Partial<Sample__Output> = {}) => ({ sample: { ...sample(over), seq, timestampMs: Date.now() + seq } });
      call.write(at(1));
      call.write(at(2, { requests: { cpuMillicores: 9e18, memoryBytes: GI, podCount: 1, known: true } }));
      call.write(at(3, { pressure: psi(NaN) }));
      call.write(at(4, { podsIncluded: true, pods: [pod(-5, GI)] })); // crosses the ingest thread as an object
      call.write(at(5, { cpuUsageMillicores: 1700 }));
      await eventually(() => (gw.store.get('node-s')?.lastSeq === 5 ? true : undefined), 5000, 'seq 5 stored');
      const stored = gw.store.get('node-s')!;
      assert.equal(stored.window.length, 2, 'only the two good samples are in the window');
      assert.equal(stored.latest?.cpuUsageMillicores, 1700);
      assert.equal(stored.latest?.requests?.cpuMillicores, 6000, 'the 9e18 requests never reached the store');
      assert.equal(error, undefined, 'the stream stays up');
      const metrics = await eventually(async () => {
        const body = (await getHttp(gw.ports.metrics, '/metrics')).body;
        return /result="refused-pod-usage-invalid"\} 1/.test(body) ? body : undefined;
      }, 5000, 'refusals counted');
      assert.match(metrics, /oversell_samples_received_total\{result="refused-requests-over-capacity"\} 1/);
      assert.match(metrics, /oversell_samples_received_total\{result="refused-not-finite"\} 1/);
      assert.match(metrics, /oversell_samples_received_total\{result="stored"\} 2/);
      // And it keeps taking samples after the refusals.
      call.write(at(6));
      await eventually(() => (gw.store.get('node-s')?.lastSeq === 6 ? true : undefined), 5000, 'seq 6 stored');
    } finally {
      call.cancel();
      client.close();
      await gw.close();
    }
  });
});
