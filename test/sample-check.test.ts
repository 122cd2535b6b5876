// Sane agent data (issue 19, invariant 3): every sample is checked before it is
// stored; a bad one is refused with a counted reason, acknowledged, and the
// stream stays up.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import * as grpc from '@grpc/grpc-js';
import { oversellV1 } from '../proto/load.js';
import { sampleRow } from '../wire/sample-row.js';
import type { AgentMessage } from '../proto/gen/oversell/v1/AgentMessage.js';
import type { GatewayMessage__Output } from '../proto/gen/oversell/v1/GatewayMessage.js';
import type { ContainerUsage__Output } from '../proto/gen/oversell/v1/ContainerUsage.js';
import type { Sample__Output } from '../proto/gen/oversell/v1/Sample.js';
import type { UsageSummary__Output } from '../proto/gen/oversell/v1/UsageSummary.js';
import { checkHello, checkSample, checkSampleRow, SAMPLE_BOUNDS, type SampleRefusal } from '../gateway/store/sample-check.js';
import { boundedHostFacts, boundedPods, HELLO_BOUNDS } from '../wire/agent-bounds.js';
import type { Hello__Output } from '../proto/gen/oversell/v1/Hello.js';
import { getHttp, startTestGateway, type TestGateway } from './helpers/gateway.js';
import { eventually } from './helpers/grpc.js';

const GI = 1024 ** 3;
const NOW = 1_750_000_000_000;
const summary = (over: Partial<UsageSummary__Output> = {}): UsageSummary__Output => ({ planId: 7, samples: 300, spanMs: 300_000, cpuMillicores: 1000, memoryBytes: GI, cpuPressure: false, memoryPressure: false, ...over });

function sample(over: Partial<Sample__Output> = {}): Sample__Output {
  return {
    seq: 1, timestampMs: NOW - 1000, cpuUsageMillicores: 1500, memoryWorkingSetBytes: 3 * GI, rootCgroupMemoryWorkingSetBytes: 0, cpuManager: null,
    capacity: { cpuMillicores: 4000, memoryBytes: 8 * GI },
    pressure: { available: true, cpuSome: { avg10: 12.5, avg60: 8 }, cpuFull: { avg10: 0, avg60: 0 }, memorySome: { avg10: 0.5, avg60: 0.1 }, memoryFull: { avg10: 0, avg60: 0 }, cpuContention: null },
    requests: { cpuMillicores: 6000, memoryBytes: 10 * GI, podCount: 12, known: true },
    podsIncluded: false, pods: [],
    summaries: [], onBeat: false, podNamesAsBefore: false,
    ...over,
  };
}
const psi = (avg10: number, avg60 = 1) => ({ available: true, cpuSome: { avg10, avg60 }, cpuFull: { avg10: 0, avg60: 0 }, memorySome: { avg10: 0, avg60: 0 }, memoryFull: { avg10: 0, avg60: 0 }, cpuContention: null });
const pod = (cpu: number, mem: number, containers: ContainerUsage__Output[] = []) => ({ uid: 'u', qosClass: 'burstable', cpuUsageMillicores: cpu, memoryWorkingSetBytes: mem, containers, cpuThrottledMicros: 0 });
const CID = (n: number) => n.toString(16).padStart(64, '0');
const container = (cpu: number, mem: number, containerId = CID(1)) => ({ containerId, cpuUsageMillicores: cpu, memoryWorkingSetBytes: mem });
const { maxContainersPerPod, maxPodsPerSample, maxContainersPerSample, maxPodUidLength, maxQosClassLength } = SAMPLE_BOUNDS;
/** n pods of a little usage each, with `containers` containers apiece. */
const pods = (n: number, containers = 0) => Array.from({ length: n }, (_, i) => pod(1, 1, Array.from({ length: containers }, (_, j) => container(0, 1, CID(i * 64 + j)))));
const requests = (cpuMillicores: number, memoryBytes: number, known = true) => ({ cpuMillicores, memoryBytes, podCount: 1, known });
const { maxFutureMs, maxCapacityMillicores, maxCapacityBytes, requestsOverCapacity } = SAMPLE_BOUNDS;

describe('sample check (pure)', () => {
  const good: Array<[string, Partial<Sample__Output>]> = [
    ['a real sample', {}],
    ['CPU usage at 1.5 x capacity, working set at 1.1 x', { cpuUsageMillicores: 6000, memoryWorkingSetBytes: 1.1 * 8 * GI }],
    [`requests at ${requestsOverCapacity} x capacity`, { requests: requests(requestsOverCapacity * 4000, requestsOverCapacity * 8 * GI) }],
    ['PSI at 100', { pressure: psi(100, 100) }],
    ['idle with no capacity and no requests', { cpuUsageMillicores: 0, memoryWorkingSetBytes: 0, capacity: null, requests: null }],
    ['capacity at the ceiling', { capacity: { cpuMillicores: maxCapacityMillicores, memoryBytes: maxCapacityBytes } }],
    [`${SAMPLE_BOUNDS.maxSummaries} summaries at the node's bounds`, { summaries: Array.from({ length: SAMPLE_BOUNDS.maxSummaries }, (_, i) => summary({ planId: i + 1, cpuMillicores: 6000, memoryBytes: 1.1 * 8 * GI, samples: SAMPLE_BOUNDS.maxSummarySamples })) }],
    [`a timestamp ${maxFutureMs} ms ahead of the gateway`, { timestampMs: NOW + maxFutureMs }],
    ['an old timestamp (a replay after a long disconnect)', { timestampMs: NOW - 86_400_000 }],
    ['pods within the node\'s bounds', { podsIncluded: true, pods: [pod(500, GI), pod(0, 0), pod(6000, 1.1 * 8 * GI)] }],
    ['containers within the node\'s bounds', { podsIncluded: true, pods: [pod(500, GI, [container(0, 0), container(6000, 1.1 * 8 * GI, CID(2))])] }],
    [`${maxContainersPerPod} containers in a pod`, { podsIncluded: true, pods: [pod(500, GI, Array.from({ length: maxContainersPerPod }, (_, i) => container(1, 1, CID(i))))] }],
    ['a report without names (pod_names_as_before): empty container ids', { podsIncluded: true, podNamesAsBefore: true, pods: [{ ...pod(500, GI, [container(1, 1, '')]), uid: '', qosClass: '' }] }],
    // Unknown requests are not used by the gateway (the proto says so): their numbers are not judged.
    ['unknown requests past the bound', { requests: requests(9e18, 0, false) }],
    [`${maxPodsPerSample} pods in a sample`, { podsIncluded: true, pods: pods(maxPodsPerSample) }],
    [`${maxContainersPerSample} containers in a sample`, { podsIncluded: true, pods: pods(maxContainersPerSample / 4, 4) }],
    ['a pod throttled for a year', { podsIncluded: true, pods: [{ ...pod(1, 1), cpuThrottledMicros: 365 * 86_400 * 1e6 }] }],
    [`a pod uid of ${maxPodUidLength} characters and a QoS class of ${maxQosClassLength}`, { podsIncluded: true, pods: [{ ...pod(1, 1), uid: 'f'.repeat(maxPodUidLength), qosClass: 'q'.repeat(maxQosClassLength) }] }],
    ['a static CPU manager holding every CPU of the node exclusively', { cpuManager: { staticPolicy: true, exclusiveCpus: 4 } }],
    ['a static CPU manager holding none', { cpuManager: { staticPolicy: true, exclusiveCpus: 0 } }],
    ['CPU manager policy none', { cpuManager: { staticPolicy: false, exclusiveCpus: 0 } }],
  ];
  for (const [what, over] of good) {
    it(`passes ${what}`, () => assert.equal(checkSample(sample(over), NOW), undefined));
  }

  const bad: Array<[SampleRefusal, string, Partial<Sample__Output>]> = [
    ['not-finite', 'PSI NaN', { pressure: psi(NaN) }],
    ['not-finite', 'PSI Infinity', { pressure: psi(Infinity) }],
    ['not-finite', 'usage -Infinity', { cpuUsageMillicores: -Infinity }],
    ['not-finite', 'memory NaN', { memoryWorkingSetBytes: NaN }],
    ['negative', 'CPU usage -1', { cpuUsageMillicores: -1 }],
    ['negative', 'requests -5', { requests: requests(-5, 0) }],
    ['negative', 'a negative timestamp', { timestampMs: -1 }],
    ['timestamp-implausible', `a timestamp ${maxFutureMs + 1} ms ahead`, { timestampMs: NOW + maxFutureMs + 1 }],
    ['timestamp-implausible', 'a timestamp in the year 287,000', { timestampMs: 9e15 }],
    ['capacity-implausible', 'CPU capacity past 100,000 cores', { capacity: { cpuMillicores: maxCapacityMillicores + 1, memoryBytes: 8 * GI } }],
    ['capacity-implausible', 'memory capacity past 1 PiB', { capacity: { cpuMillicores: 4000, memoryBytes: maxCapacityBytes + 1 } }],
    ['no-capacity', 'usage without capacity', { capacity: null }],
    ['no-capacity', 'memory usage with zero memory capacity', { capacity: { cpuMillicores: 4000, memoryBytes: 0 } }],
    ['usage-over-capacity', 'CPU usage past 1.5 x', { cpuUsageMillicores: 6001 }],
    ['usage-over-capacity', 'working set past 1.1 x', { memoryWorkingSetBytes: Math.ceil(1.1 * 8 * GI) + 1 }],
    ['usage-over-capacity', 'the root cgroup\'s working set past 1.1 x', { rootCgroupMemoryWorkingSetBytes: Math.ceil(1.1 * 8 * GI) + 1 }],
    ['negative', 'the root cgroup\'s working set -1', { rootCgroupMemoryWorkingSetBytes: -1 }],
    ['requests-over-capacity', 'CPU requests of 9e18 millicores', { requests: requests(9e18, GI) }],
    ['requests-over-capacity', `memory requests past ${requestsOverCapacity} x`, { requests: requests(1000, requestsOverCapacity * 8 * GI + 1) }],
    ['pressure-out-of-range', 'PSI avg10 100.5', { pressure: psi(100.5) }],
    ['pressure-out-of-range', 'PSI avg60 101', { pressure: psi(1, 101) }],
    ['pod-usage-invalid', 'a pod with negative usage', { podsIncluded: true, pods: [pod(500, GI), pod(-1, GI)] }],
    ['pod-usage-invalid', 'a pod past the node\'s CPU bound', { podsIncluded: true, pods: [pod(6001, GI)] }],
    ['pod-usage-invalid', 'a pod with NaN memory', { podsIncluded: true, pods: [pod(1, NaN)] }],
    ['pod-usage-invalid', 'a container with negative CPU', { podsIncluded: true, pods: [pod(500, GI, [container(-1, 0)])] }],
    ['pod-usage-invalid', 'a container past the node\'s memory bound', { podsIncluded: true, pods: [pod(500, GI, [container(1, Math.ceil(1.1 * 8 * GI) + 1)])] }],
    ['pod-usage-invalid', 'a container past the node\'s CPU bound', { podsIncluded: true, pods: [pod(500, GI, [container(6001, 0)])] }],
    ['pod-usage-invalid', 'a container with NaN memory', { podsIncluded: true, pods: [pod(500, GI, [container(1, NaN)])] }],
    ['pod-usage-invalid', `${maxContainersPerPod + 1} containers in a pod`, { podsIncluded: true, pods: [pod(500, GI, Array.from({ length: maxContainersPerPod + 1 }, (_, i) => container(1, 1, CID(i))))] }],
    ['pod-usage-invalid', 'a container id with its runtime prefix', { podsIncluded: true, pods: [pod(500, GI, [container(1, 1, `containerd://${CID(1)}`)])] }],
    ['pod-usage-invalid', 'a container id of 63 hex digits', { podsIncluded: true, pods: [pod(500, GI, [container(1, 1, CID(1).slice(1))])] }],
    ['pod-usage-invalid', 'a container id in upper case', { podsIncluded: true, pods: [pod(500, GI, [container(1, 1, `${'A'.repeat(63)}1`)])] }],
    ['pod-usage-invalid', 'an empty container id', { podsIncluded: true, pods: [pod(500, GI, [container(1, 1, '')])] }],
    ['pod-usage-invalid', 'a report without names past the node\'s CPU bound', { podsIncluded: true, podNamesAsBefore: true, pods: [pod(500, GI, [container(6001, 0, '')])] }],
    // Issue 43: one node's agent could make the store keep any number of pods and any length of string.
    ['too-many-pods', `${maxPodsPerSample + 1} pods in a sample`, { podsIncluded: true, pods: pods(maxPodsPerSample + 1) }],
    ['too-many-pods', '20,000 pods in a sample (issue 43: 40 MiB more heap)', { podsIncluded: true, pods: pods(20_000) }],
    ['too-many-pods', `${maxContainersPerSample + 1} containers in a sample, none of its pods over ${maxContainersPerPod}`, { podsIncluded: true, pods: [...pods(maxContainersPerSample / 4 - 1, 4), pod(1, 1, Array.from({ length: 5 }, (_, j) => container(0, 1, CID(1e6 + j))))] }],
    ['pod-usage-invalid', `a pod uid of ${maxPodUidLength + 1} characters`, { podsIncluded: true, pods: [{ ...pod(1, 1), uid: 'f'.repeat(maxPodUidLength + 1) }] }],
    ['pod-usage-invalid', 'a pod uid of 1 MiB', { podsIncluded: true, pods: [{ ...pod(1, 1), uid: 'f'.repeat(2 ** 20) }] }],
    ['pod-usage-invalid', `a QoS class of ${maxQosClassLength + 1} characters`, { podsIncluded: true, pods: [{ ...pod(1, 1), qosClass: 'q'.repeat(maxQosClassLength + 1) }] }],
    ['pod-usage-invalid', 'a negative throttled time', { podsIncluded: true, pods: [{ ...pod(1, 1), cpuThrottledMicros: -1 }] }],
    ['pod-usage-invalid', 'a throttled time past 2^53', { podsIncluded: true, pods: [{ ...pod(1, 1), cpuThrottledMicros: 2 ** 54 }] }],
    // Issue 45: exclusive CPUs only lower the grant, but a node cannot hold more than it has, nor any under policy none.
    ['cpu-manager-implausible', 'more exclusive CPUs than the node has', { cpuManager: { staticPolicy: true, exclusiveCpus: 5 } }],
    ['cpu-manager-implausible', 'exclusive CPUs under policy none', { cpuManager: { staticPolicy: false, exclusiveCpus: 1 } }],
    ['cpu-manager-implausible', 'a fraction of an exclusive CPU', { cpuManager: { staticPolicy: true, exclusiveCpus: 1.5 } }],
    ['cpu-manager-implausible', 'exclusive CPUs with no CPU capacity', { cpuUsageMillicores: 0, capacity: { cpuMillicores: 0, memoryBytes: 8 * GI }, requests: null, cpuManager: { staticPolicy: true, exclusiveCpus: 1 } }],
    // Issue 46: a summary stands for a window of samples, bounded as each of them is.
    ['summary-implausible', `${SAMPLE_BOUNDS.maxSummaries + 1} summaries`, { summaries: Array.from({ length: SAMPLE_BOUNDS.maxSummaries + 1 }, (_, i) => summary({ planId: i + 1 })) }],
    ['summary-implausible', 'a summary of plan 0', { summaries: [summary({ planId: 0 })] }],
    ['summary-implausible', 'a summary of no samples', { summaries: [summary({ samples: 0 })] }],
    ['summary-implausible', 'a summary of more samples than a window holds', { summaries: [summary({ samples: SAMPLE_BOUNDS.maxSummarySamples + 1 })] }],
    ['summary-implausible', 'a summary\'s CPU past the node\'s bound', { summaries: [summary({ cpuMillicores: 6001 })] }],
    ['summary-implausible', 'a summary\'s memory past the node\'s bound', { summaries: [summary({ memoryBytes: Math.ceil(1.1 * 8 * GI) + 1 })] }],
    ['summary-implausible', 'a summary\'s rates covering more than two of the longest windows', { summaries: [summary({ spanMs: SAMPLE_BOUNDS.maxSummarySpanMs + 1 })] }],
    ['summary-implausible', 'a negative summary', { summaries: [summary({ cpuMillicores: -1 })] }],
    ['summary-implausible', 'a NaN summary', { summaries: [summary({ memoryBytes: NaN })] }],
    ['not-finite', 'NaN exclusive CPUs', { cpuManager: { staticPolicy: true, exclusiveCpus: NaN } }],
    ['negative', 'negative exclusive CPUs', { cpuManager: { staticPolicy: true, exclusiveCpus: -1 } }],
  ];
  for (const [reason, what, over] of bad) {
    it(`refuses ${what} as ${reason}`, () => assert.equal(checkSample(sample(over), NOW), reason));
  }

  it('the pod bounds are generous to any real node: the kubelet\'s default of 110 pods and the 250 of managed clusters, several times over', () => {
    assert.ok(maxPodsPerSample >= 4 * 250);
    assert.ok(maxContainersPerSample >= 4 * maxPodsPerSample);
    assert.ok(maxPodUidLength >= 36, 'a pod uid (a UUID) fits');
  });

  it('the row check (the ingest thread\'s) says what the object check says, at any offset of a batch', () => {
    const layout = sampleRow();
    const rows = new Float64Array(3 + layout.width);
    for (const over of [...bad.map(([, , o]) => o), ...good.map(([, o]) => o)]) {
      const s = sample(over);
      if (s.pods.length > 0 || s.summaries.length > 0) continue; // pods and summaries cross as objects
      rows.fill(7);
      layout.write(s, rows, 3);
      assert.equal(checkSampleRow(rows, 3, NOW), checkSample(s, NOW), JSON.stringify(over));
    }
  });
});

describe('hello check (pure)', () => {
  const hello = (over: Partial<Hello__Output> = {}, host: Partial<NonNullable<Hello__Output['host']>> = {}): Hello__Output => ({
    nodeName: 'node-h', instanceId: '5f0c6c1e-2f8a-4e6b-9a51-3d2f0c1b7e44', agentVersion: '0.1.0', readsSummaryAckEvery: true,
    host: { cpuModel: 'Intel(R) Xeon(R) Platinum 8375C CPU @ 2.90GHz', logicalCpus: 8, memoryTotalBytes: 32 * GI, os: 'Ubuntu 22.04.4 LTS', kernel: '6.5.0-1020-aws', cgroupMode: 'v2', cgroupDriver: 'systemd', ...host },
    ...over,
  });

  it('passes a real hello, one without host facts, and every string at its bound', () => {
    assert.equal(checkHello(hello()), undefined);
    assert.equal(checkHello(hello({ host: null })), undefined);
    const b = HELLO_BOUNDS;
    assert.equal(checkHello(hello({ instanceId: 'i'.repeat(b.instanceId), agentVersion: 'v'.repeat(b.agentVersion) }, {
      cpuModel: 'c'.repeat(b.cpuModel), os: 'o'.repeat(b.os), kernel: 'k'.repeat(b.kernel), cgroupMode: 'm'.repeat(b.cgroupMode), cgroupDriver: 'd'.repeat(b.cgroupDriver),
    })), undefined);
  });

  // Issue 43: the host facts of one node's status passed the 4 MiB a peer takes of it.
  const over: Array<[string, Hello__Output]> = [
    ['hello.instance_id', hello({ instanceId: 'i'.repeat(HELLO_BOUNDS.instanceId + 1) })],
    ['hello.agent_version', hello({ agentVersion: 'v'.repeat(HELLO_BOUNDS.agentVersion + 1) })],
    ['hello.host.cpu_model', hello({}, { cpuModel: 'c'.repeat(HELLO_BOUNDS.cpuModel + 1) })],
    ['hello.host.os', hello({}, { os: 'o'.repeat(4 * 2 ** 20) })],
    ['hello.host.kernel', hello({}, { kernel: 'k'.repeat(HELLO_BOUNDS.kernel + 1) })],
    ['hello.host.cgroup_mode', hello({}, { cgroupMode: 'm'.repeat(HELLO_BOUNDS.cgroupMode + 1) })],
    ['hello.host.cgroup_driver', hello({}, { cgroupDriver: 'd'.repeat(HELLO_BOUNDS.cgroupDriver + 1) })],
  ];
  for (const [field, h] of over) {
    it(`refuses ${field} past its bound, naming the field and the bound`, () => {
      const why = checkHello(h);
      assert.ok(why?.startsWith(`${field} is `), why);
      assert.match(why ?? '', /; at most \d+$/);
    });
  }
});

describe('the agent keeps within the bounds (wire/agent-bounds.ts)', () => {
  it('cuts host facts to their bounds, and leaves real ones as they are', () => {
    const real = { cpuModel: 'AMD EPYC 7R13 Processor', logicalCpus: 4, memoryTotalBytes: 16 * GI, os: 'Amazon Linux 2023', kernel: '6.1.61-85.141.amzn2023.x86_64', cgroupMode: 'v2', cgroupDriver: 'systemd' };
    assert.deepEqual(boundedHostFacts(real), real);
    const cut = boundedHostFacts({ ...real, cpuModel: 'c'.repeat(5000), kernel: 'k'.repeat(300) });
    assert.equal(cut.cpuModel.length, HELLO_BOUNDS.cpuModel);
    assert.equal(cut.kernel.length, HELLO_BOUNDS.kernel);
    assert.equal(checkHello({ nodeName: 'n', instanceId: 'i', agentVersion: 'v', host: cut }), undefined);
  });

  it('leaves a pod report within the bounds as it is (the same array), and cuts a larger one to what the gateway takes', () => {
    const fine = pods(110, 3);
    assert.equal(boundedPods(fine).pods, fine);
    const many = boundedPods(pods(maxPodsPerSample + 500));
    assert.equal(many.pods.length, maxPodsPerSample);
    assert.deepEqual(many.dropped, { pods: 500, containers: 0 });
    const crowded = boundedPods([pod(1, 1, Array.from({ length: maxContainersPerPod + 6 }, (_, i) => container(0, 1, CID(i)))), ...pods(maxPodsPerSample - 1, 5)]);
    assert.equal(crowded.pods.length, maxPodsPerSample);
    assert.equal(crowded.pods[0]!.containers.length, maxContainersPerPod);
    assert.equal(crowded.pods.reduce((n, p) => n + p.containers.length, 0), maxContainersPerSample);
    const named = boundedPods([{ ...pod(1, 1), uid: 'f'.repeat(maxPodUidLength + 1) }, pod(2, 2)]);
    assert.deepEqual(named.pods.map((p) => p.cpuUsageMillicores), [2]);
    for (const { pods: cut } of [many, crowded, named]) {
      assert.equal(checkSample(sample({ podsIncluded: true, pods: cut }), NOW), undefined, 'what the agent sends is taken');
    }
  });
});

type RawCall = grpc.ClientDuplexStream<AgentMessage, GatewayMessage__Output>;

/** One agent stream over real gRPC, keeping what the gateway says. */
function agent(port: number) {
  const client = new (oversellV1().AgentStream)(`127.0.0.1:${port}`, grpc.credentials.createInsecure());
  const call = client.Report() as unknown as RawCall;
  const said: GatewayMessage__Output[] = [];
  let error: grpc.ServiceError | undefined;
  call.on('data', (m: GatewayMessage__Output) => said.push(m));
  call.on('error', (e: grpc.ServiceError) => (error = e));
  return {
    said,
    error: () => error,
    write: (m: AgentMessage) => call.write(m),
    close() {
      call.cancel();
      client.close();
    },
  };
}

const live = (seq: number, over: Partial<Sample__Output> = {}): AgentMessage => ({ sample: { ...sample(over), seq, timestampMs: Date.now() - 100 + seq } });
const metricsBody = async (gw: TestGateway) => (await getHttp(gw.ports.metrics, '/metrics')).body;
const counted = (body: string, result: string) => Number(new RegExp(`oversell_samples_received_total\\{result="${result}"\\} (\\d+)`).exec(body)?.[1] ?? 0);

describe('sample check over real gRPC', () => {
  it('bad samples between good ones are refused and counted by reason; the good ones are stored and the stream stays up', async () => {
    const gw = await startTestGateway();
    const a = agent(gw.ports.agent);
    try {
      a.write({ hello: { nodeName: 'node-s', instanceId: 'i' } });
      a.write(live(1));
      a.write(live(2, { requests: requests(9e18, GI) }));
      a.write(live(3, { pressure: psi(NaN) }));
      a.write(live(4, { podsIncluded: true, pods: [pod(-5, GI)] })); // crosses the ingest thread as an object
      a.write({ sample: { ...sample(), seq: 5, timestampMs: Date.now() + 2 * 86_400_000 } });
      a.write(live(6, { cpuUsageMillicores: 1700 }));
      await eventually(() => (gw.store.get('node-s')?.lastSeq === 6 ? true : undefined), 5000, 'seq 6 stored');
      const stored = gw.store.get('node-s')!;
      assert.deepEqual(stored.window.points().map((p) => p.cpuMillicores), [1500, 1700], 'only the two good samples are in the window');
      assert.equal(stored.latest?.requests?.cpuMillicores, 6000, 'the 9e18 requests never reached the store');
      const body = await eventually(async () => {
        const b = await metricsBody(gw);
        return counted(b, 'refused-timestamp-implausible') === 1 ? b : undefined;
      }, 5000, 'refusals counted');
      assert.equal(counted(body, 'refused-requests-over-capacity'), 1);
      assert.equal(counted(body, 'refused-not-finite'), 1);
      assert.equal(counted(body, 'refused-pod-usage-invalid'), 1);
      assert.equal(counted(body, 'stored'), 2);
      assert.equal(a.error(), undefined, 'the stream stays up');
      // It keeps taking samples after the refusals.
      a.write(live(7));
      await eventually(() => (gw.store.get('node-s')?.lastSeq === 7 ? true : undefined), 5000, 'seq 7 stored');
      assert.equal(gw.store.get('node-s')?.window.length, 3);
    } finally {
      a.close();
      await gw.close();
    }
  });

  it('one node\'s agent cannot bloat the store: a sample of 20,000 pods is refused and counted, a hello with a 1 MiB OS name ends its stream; nothing of either is stored', async () => {
    const gw = await startTestGateway();
    const a = agent(gw.ports.agent);
    const b = agent(gw.ports.agent);
    try {
      a.write({ hello: { nodeName: 'node-p', instanceId: 'i' } });
      a.write(live(1, { podsIncluded: true, pods: pods(20_000) }));
      a.write(live(2, { podsIncluded: true, pods: pods(3, 2) }));
      await eventually(() => (gw.store.get('node-p')?.lastSeq === 2 ? true : undefined), 5000, 'seq 2 stored');
      assert.equal(gw.store.get('node-p')?.latest?.pods.length, 3, 'the pods of seq 2; none of seq 1');
      assert.equal(gw.store.get('node-p')?.window.length, 1);
      await eventually(async () => (counted(await metricsBody(gw), 'refused-too-many-pods') === 1 ? true : undefined), 5000, 'the refusal counted');
      assert.equal(a.error(), undefined, 'the stream stays up');

      b.write({ hello: { nodeName: 'node-q', instanceId: 'i', host: { cpuModel: 'x', logicalCpus: 1, memoryTotalBytes: GI, os: 'o'.repeat(2 ** 20), kernel: '', cgroupMode: 'v2', cgroupDriver: '' } } });
      const error = await eventually(() => b.error(), 5000, 'the stream ended');
      assert.equal(error.code, grpc.status.INVALID_ARGUMENT);
      assert.match(error.details, /hello\.host\.os is 1048576 characters long; at most 256/);
      assert.equal(gw.store.get('node-q'), undefined, 'nothing of the hello stored');
    } finally {
      a.close();
      b.close();
      await gw.close();
    }
  });

  it('a pod report\'s containers are stored with their pod, on either thread; a pod with a forged container is refused whole', async () => {
    const gw = await startTestGateway();
    const a = agent(gw.ports.agent);
    try {
      a.write({ hello: { nodeName: 'node-c', instanceId: 'i' } });
      const containers = [container(120, 64 * 1024 ** 2, CID(0xabc)), container(0, 512 * 1024, CID(0xdef))];
      a.write(live(1, { podsIncluded: true, pods: [pod(130, 70 * 1024 ** 2, containers)] }));
      a.write(live(2, { podsIncluded: true, pods: [pod(130, 70 * 1024 ** 2, [container(1, 1, 'not-an-id')])] }));
      await eventually(() => (gw.store.get('node-c')?.lastSeq === 2 ? true : undefined), 5000, 'seq 2 taken');
      const stored = gw.store.get('node-c')!;
      assert.deepEqual(stored.latest?.pods.map((p) => p.containers), [containers], 'the containers of seq 1, as sent; nothing of seq 2');
      assert.equal(counted(await eventually(async () => {
        const b = await metricsBody(gw);
        return counted(b, 'refused-pod-usage-invalid') === 1 ? b : undefined;
      }, 5000, 'the refusal counted'), 'stored'), 1);
    } finally {
      a.close();
      await gw.close();
    }
  });

  it('refused samples are acknowledged and not asked for again: an agent whose every sample fails is not left to replay them', async () => {
    const gw = await startTestGateway();
    const first = agent(gw.ports.agent);
    let second: ReturnType<typeof agent> | undefined;
    try {
      first.write({ hello: { nodeName: 'node-r', instanceId: 'i' } });
      // Five (the gateway's ack interval) samples from a node whose clock runs an hour ahead.
      for (let seq = 1; seq <= 5; seq++) first.write({ sample: { ...sample(), seq, timestampMs: Date.now() + 2 * 86_400_000 } });
      const ack = await eventually(() => first.said.find((m) => m.ack)?.ack ?? undefined, 5000, 'an ack');
      assert.equal(Number(ack.lastSeq), 5);
      assert.equal(first.error(), undefined, 'the stream stays up');
      const record = gw.store.get('node-r')!;
      assert.equal(record.hasSample, false, 'nothing of them stored');
      assert.equal(record.window.length, 0);
      first.close();
      await eventually(() => (gw.store.get('node-r')?.streamId === undefined ? true : undefined), 5000, 'the first stream detached');
      // The agent reconnects (same process): welcomed past the refused samples, it replays none of them.
      second = agent(gw.ports.agent);
      second.write({ hello: { nodeName: 'node-r', instanceId: 'i' } });
      const welcome = await eventually(() => second!.said.find((m) => m.welcome)?.welcome ?? undefined, 5000, 'welcome');
      assert.equal(Number(welcome.lastSeq), 5);
      second.write(live(6));
      await eventually(() => (gw.store.get('node-r')?.lastSeq === 6 && gw.store.get('node-r')?.hasSample ? true : undefined), 5000, 'seq 6 stored');
      assert.equal(counted(await metricsBody(gw), 'refused-timestamp-implausible'), 5);
    } finally {
      first.close();
      second?.close();
      await gw.close();
    }
  });
});
