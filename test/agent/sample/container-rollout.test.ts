// Per-container usage (issue 33) during a rollout, both ways, over real gRPC:
// a new agent's pod reports still read by a gateway on the contract before
// containers (test/fixtures/proto/before-batches, whose PodUsage is the one
// before them), and an old agent's pod reports stored by a new gateway with no
// containers.
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import * as grpc from '@grpc/grpc-js';
import { ReportStream } from '../../../agent/stream/report-stream.js';
import type { PodUsage__Output } from '../../../proto/gen/oversell/v1/PodUsage.js';
import type { Sample__Output } from '../../../proto/gen/oversell/v1/Sample.js';
import { contractBeforeBatches, startOldGateway } from '../../helpers/contract-before-batches.js';
import { createLogger } from '../../../lib/log.js';
import { eventually } from '../../helpers/grpc.js';
import { startTestGateway } from '../../helpers/gateway.js';

const log = createLogger('test-agent', process.env.TEST_LOG_LEVEL ?? 'silent');
const hello = (node: string) => ({ nodeName: node, instanceId: `i-${node}`, agentVersion: 'test', host: null });
const MI = 1024 ** 2;

function sample(seq: number, pods: PodUsage__Output[]): Sample__Output {
  return {
    seq, timestampMs: Date.now() - 1000 + seq, cpuUsageMillicores: 1000, memoryWorkingSetBytes: 4 * 1024 ** 3, rootCgroupMemoryWorkingSetBytes: 0, cpuManager: null,
    capacity: { cpuMillicores: 4000, memoryBytes: 16 * 1024 ** 3 },
    pressure: { available: true, cpuSome: { avg10: 0, avg60: 0 }, cpuFull: null, memorySome: { avg10: 0, avg60: 0 }, memoryFull: null, cpuContention: null },
    requests: { cpuMillicores: 2000, memoryBytes: 8 * 1024 ** 3, podCount: 1, known: true }, summaries: [], onBeat: false, podNamesAsBefore: false, podsIncluded: true, pods,
  };
}

const POD: PodUsage__Output = {
  uid: '8a2d3c4b-6e7f-4a8b-9c0d-1e2f3a4b5c02', qosClass: 'burstable', cpuUsageMillicores: 350, memoryWorkingSetBytes: 197 * MI, cpuThrottledMicros: 2_043_117,
  containers: [
    { containerId: '6a37451f32e7a64d17e9812b1ecd5c5e2d0bd03adf7aefab5759fe1842de6321', cpuUsageMillicores: 350, memoryWorkingSetBytes: 194 * MI },
    { containerId: 'e6d6e54fd397976ce109a3ad26e43063f675864a62e41aeff9c3a1fd4a5898ad', cpuUsageMillicores: 0, memoryWorkingSetBytes: 3 * MI },
  ],
};
// The old contract has neither the containers nor the throttled time (issue 45): an old gateway skips both as unknown fields.
const { containers: _, cpuThrottledMicros: _t, ...POD_BEFORE } = POD;

/** The contract before containers (and batches), as an old gateway or agent speaks it. */
const oldContract = contractBeforeBatches;

const cleanups: (() => unknown)[] = [];
after(async () => {
  for (const c of cleanups.reverse()) await c();
});

describe('per-container usage in a rollout, against the contract before it', () => {
  it('a new agent and an old gateway: the old gateway reads every pod of the report as before, the containers skipped as an unknown field', async () => {
    const pods: Record<string, unknown>[][] = [];
    const { port, close } = await startOldGateway((m) => {
      if (m.sample) pods.push(m.sample.pods);
    });
    cleanups.push(close);
    const rs = new ReportStream({ gatewayAddress: `127.0.0.1:${port}`, hello: hello('old-gateway'), log });
    cleanups.push(() => rs.stop());
    rs.start();
    await eventually(async () => rs.live || undefined, 5000, 'welcomed by the old gateway');
    rs.push(sample(1, [POD]));
    await eventually(async () => pods.length === 1 || undefined, 5000, 'the pod report at the old gateway');
    assert.deepEqual(pods[0], [POD_BEFORE], 'the pod exactly as the old contract has it');
  });

  it('an old agent and a new gateway: its pods are stored as before, with no containers', async () => {
    const gw = await startTestGateway();
    cleanups.push(() => gw.close());
    const V1 = oldContract();
    const client = new (V1.AgentStream as unknown as new (address: string, creds: grpc.ChannelCredentials) => grpc.Client & { Report(): grpc.ClientDuplexStream<unknown, unknown> })(`127.0.0.1:${gw.ports.agent}`, grpc.credentials.createInsecure());
    cleanups.push(() => client.close());
    const call = client.Report();
    cleanups.push(() => call.cancel());
    call.on('error', () => undefined);
    call.write({ hello: hello('old-agent') });
    call.write({ sample: { ...sample(1, []), pods: [POD_BEFORE] } });
    const stored = await eventually(async () => gw.store.get('old-agent')?.latest ?? undefined, 5000, 'the old agent\'s pod report stored');
    assert.deepEqual(stored.pods, [{ ...POD_BEFORE, containers: [], cpuThrottledMicros: 0 }]);
  });

  it('a new agent and a new gateway: the pod\'s throttled time arrives over the wire as read', async () => {
    const gw = await startTestGateway();
    cleanups.push(() => gw.close());
    const rs = new ReportStream({ gatewayAddress: `127.0.0.1:${gw.ports.agent}`, hello: hello('new-agent'), log });
    cleanups.push(() => rs.stop());
    rs.start();
    await eventually(async () => rs.live || undefined, 5000, 'welcomed by the gateway');
    rs.push(sample(1, [POD]));
    const stored = await eventually(async () => gw.store.get('new-agent')?.latest ?? undefined, 5000, 'the pod report stored');
    assert.equal(stored.pods[0]?.cpuThrottledMicros, 2_043_117);
  });
});
