// Agent and gateway over real gRPC on 127.0.0.1: the real agent code reading
// fixture roots, the real gateway, the real query API.
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import * as grpc from '@grpc/grpc-js';
import { startAgent, type AgentOptions, type RunningAgent } from '../agent/agent.js';
import { filePodSource } from '../agent/requests/pod-source.js';
import type { AgentMessage } from '../proto/gen/oversell/v1/AgentMessage.js';
import type { GatewayMessage__Output } from '../proto/gen/oversell/v1/GatewayMessage.js';
import { oversellV1 } from '../proto/load.js';
import { addressesOf } from '../lib/endpoint-addresses.js';
import { createLogger } from '../lib/log.js';
import { collectWatch, eventually, getNode, listNodes, queryClient } from './helpers/grpc.js';
import { copyFixtureHost } from './helpers/fake-host.js';
import { getHttp, postHttps, startTestGateway } from './helpers/gateway.js';
import { startSupervisedIngest } from '../gateway/ingest/ingest-worker.js';
import { NodeStore } from '../gateway/store/node-store.js';
import { GatewayMetrics } from '../gateway/metrics/metrics.js';

const log = createLogger('test-agent', process.env.TEST_LOG_LEVEL ?? 'silent');
const work = mkdtempSync(join(tmpdir(), 'oversell-pipeline-'));
after(() => rmSync(work, { recursive: true, force: true }));

const CALM_PSI = 'some avg10=0.00 avg60=0.00 avg300=0.00 total=0\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n';

/** The real agent, sampling every 50 ms from a private copy of the v2-systemd fixture host. */
function fixtureAgent(nodeName: string, agentPort: number, over: Partial<AgentOptions> = {}): RunningAgent {
  const { procRoot, cgroupRoot } = copyFixtureHost(join(work, nodeName));
  // The copied host was busy (cpu some avg10 49%); these tests start calm.
  writeFileSync(join(procRoot, 'pressure', 'cpu'), CALM_PSI);
  return startAgent({
    nodeName,
    gatewayAddresses: [`127.0.0.1:${agentPort}`],
    procRoot,
    cgroupRoot,
    intervalMs: 50,
    podReportEvery: 10,
    pods: filePodSource(fileURLToPath(new URL('../examples/local-pods.yaml', import.meta.url)), log),
    log,
    ...over,
  });
}

type RawCall = grpc.ClientDuplexStream<AgentMessage, GatewayMessage__Output>;

/** A hand-driven agent stream, for protocol-level checks. */
function rawStream(port: number) {
  const client = new (oversellV1().AgentStream)(`127.0.0.1:${port}`, grpc.credentials.createInsecure());
  const call = client.Report() as unknown as RawCall;
  const messages: GatewayMessage__Output[] = [];
  let error: grpc.ServiceError | undefined;
  call.on('data', (m: GatewayMessage__Output) => messages.push(m));
  call.on('error', (e: grpc.ServiceError) => (error = e));
  return { call, messages, error: () => error, close: () => { call.cancel(); client.close(); } };
}

const sample = (seq: number) => ({
  sample: { seq, timestampMs: Date.now(), cpuUsageMillicores: 100 * seq, memoryWorkingSetBytes: 1e9, capacity: { cpuMillicores: 4000, memoryBytes: 8e9 } },
});

describe('agent -> gRPC -> gateway -> query API', () => {
  // Through the ingest thread, samples without pods cross to the store as rows of numbers and those with pods as ops whose figures are numbers too.
  it('a sample read by the agent is visible through GetNode, ListNodes and WatchNodes', async () => {
    const gw = await startTestGateway();
    const query = queryClient(gw.ports.grpc);
    const watch = collectWatch(query);
    const agent = fixtureAgent('node-a', gw.ports.agent, { podReportEvery: 2 });
    try {
      const n = await eventually(async () => {
        const s = await getNode(query, 'node-a');
        // Batches end with whatever made the agent send (here the pod report), so the newest sample may carry pods or not.
        return s.window && s.window.samples >= 3 ? s : undefined;
      }, 5000, 'three samples of node-a');
      assert.equal(n.name, 'node-a');
      assert.equal(n.connected, true);
      assert.equal(n.instanceId, agent.instanceId);
      assert.equal(n.host?.cgroupMode, 'v2');
      assert.equal(n.host?.cgroupDriver, 'systemd');
      assert.equal(n.latest?.capacity?.cpuMillicores, 2000);
      assert.equal(n.latest?.capacity?.memoryBytes, 24684084 * 1024);
      assert.equal(n.latest?.requests?.known, true);
      assert.equal(n.latest?.requests?.cpuMillicores, 1850);
      assert.equal(n.latest?.pressure?.available, true);
      assert.ok(n.ageMs < 2000, `data age ${n.ageMs}`);
      assert.equal(n.rawAllocatableKnown, false);

      // Pods ride on every 2nd sample, and the fixture's three pods are there.
      const withPods = await eventually(async () => {
        const s = await getNode(query, 'node-a');
        return s.latest?.podsIncluded && s.latest.pods.length === 3 ? s : undefined;
      }, 5000, 'a pod report');
      assert.deepEqual(withPods.latest?.pods.map((p) => p.qosClass).sort(), ['besteffort', 'burstable', 'guaranteed']);

      const all = await listNodes(query);
      assert.deepEqual(all.map((x) => x.name), ['node-a']);

      const types = watch.events.map((e) => e.type);
      const synced = types.indexOf('SYNCED');
      assert.ok(synced >= 0, `watch never synced: ${types.join(',')}`);
      assert.ok(types.slice(synced + 1).includes('UPDATED'), 'no UPDATED after SYNCED');
      assert.ok(watch.events.some((e) => e.type === 'UPDATED' && e.node?.name === 'node-a' && (e.node.window?.samples ?? 0) > 0));

      const metrics = (await getHttp(gw.ports.metrics, '/metrics')).body;
      assert.match(metrics, /oversell_agents_connected 1/);
      assert.match(metrics, /oversell_samples_received_total\{result="stored"\} [3-9]|oversell_samples_received_total\{result="stored"\} \d\d/);
      assert.match(metrics, /oversell_node_sample_age_seconds\{node="node-a"\} /);
    } finally {
      watch.cancel();
      await agent.stop();
      await gw.close();
    }
  });

  it('the agent reconnects after the gateway restarts and the new gateway gets fresh data', async () => {
    let gw = await startTestGateway();
    const { grpc: grpcPort, agent: agentPort } = gw.ports;
    const agent = fixtureAgent('node-r', agentPort, { backoffInitialMs: 50, backoffMaxMs: 300 });
    try {
      await eventually(() => (agent.gateways.live ? true : undefined), 5000, 'first connection');
      await gw.close();
      await eventually(() => (!agent.gateways.live ? true : undefined), 5000, 'the agent to notice');
      await new Promise((r) => setTimeout(r, 300)); // samples pile up while the gateway is away
      gw = await startTestGateway({ grpcPort, agentPort });
      const query = queryClient(grpcPort);
      const n = await eventually(async () => {
        const s = await getNode(query, 'node-r');
        return (s.window?.samples ?? 0) >= 3 ? s : undefined;
      }, 8000, 'data at the restarted gateway');
      assert.equal(n.connected, true);
      assert.ok(agent.gateways.reconnects >= 1);
      // The replayed backlog arrived without being counted twice.
      const metrics = (await getHttp(gw.ports.metrics, '/metrics')).body;
      assert.doesNotMatch(metrics, /oversell_samples_received_total\{result="duplicate"\} [1-9]/);
      const record = gw.store.get('node-r');
      const seqs = record?.window.points().map((p) => p.timestampMs) ?? [];
      assert.equal(new Set(seqs).size, seqs.length, 'duplicate samples in the window');
    } finally {
      await agent.stop();
      await gw.close();
    }
  });
});

describe('the whole chain', () => {
  it('usage read by the agent turns into an inflated allocatable in a real AdmissionReview answer', async () => {
    const gw = await startTestGateway();
    const agentNode = 'ip-10-0-17-42.eu-west-1.compute.internal';
    const agent = fixtureAgent(agentNode, gw.ports.agent);
    try {
      const review = readFileSync(new URL('./fixtures/admission/node-status-update.json', import.meta.url), 'utf8');
      const patch = await eventually(async () => {
        const res = await postHttps(gw, '/mutate/nodes', review);
        const answer = res.json() as { response: { patch?: string } };
        return answer.response.patch ? (JSON.parse(Buffer.from(answer.response.patch, 'base64').toString()) as Array<{ path: string; value: string }>) : undefined;
      }, 5000, 'a patch');
      // The fixture /proc/stat does not move, so usage is 0m; requests 1850m on raw 7910m:
      // headroom = 1850 + 4746/0.1 -> capped at 2x.
      assert.equal(patch.find((op) => op.path === '/status/allocatable/cpu')?.value, '15820m');
      const q = await getNode(queryClient(gw.ports.grpc), 'ip-10-0-17-42.eu-west-1.compute.internal');
      assert.equal(q.rawAllocatableKnown, true);
      assert.equal(q.rawAllocatable?.cpuMillicores, 7910);
      assert.equal(q.decision?.allocatable?.cpuMillicores, 15820);
      assert.equal(q.decision?.cpuBound, 'cap');

      // CPU pressure appears on the host: the next answer drops cpu to raw at once (one millicore above it, so the kubelet keeps writing).
      writeFileSync(join(work, agentNode, 'proc', 'pressure', 'cpu'), 'some avg10=55.00 avg60=20.00 avg300=5.00 total=1\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n');
      const calmed = await eventually(async () => {
        const res = await postHttps(gw, '/mutate/nodes', review);
        const answer = res.json() as { response: { patch?: string } };
        const ops = answer.response.patch ? (JSON.parse(Buffer.from(answer.response.patch, 'base64').toString()) as Array<{ path: string; value: string }>) : [];
        return ops.find((op) => op.path === '/status/allocatable/cpu')?.value === '7911m' ? ops : undefined;
      }, 5000, 'cpu to fall back under pressure');
      assert.match(calmed.find((op) => op.path.endsWith('reason'))?.value ?? '', /cpu 7910m->7911m \(pressure: floor until calm; one unit above raw/);
    } finally {
      await agent.stop();
      await gw.close();
    }
  });
});

describe('AgentStream protocol', () => {
  it('resumes without double counting: Welcome carries the last stored seq, replays are dropped', async () => {
    const gw = await startTestGateway();
    try {
      const a = rawStream(gw.ports.agent);
      a.call.write({ hello: { nodeName: 'node-p', instanceId: 'inst-1' } });
      for (let s = 1; s <= 5; s++) a.call.write(sample(s));
      await eventually(() => (gw.store.get('node-p')?.lastSeq === 5 ? true : undefined), 3000, 'five samples');
      assert.equal(a.messages[0]?.welcome?.lastSeq, 0);
      assert.equal(a.messages.find((m) => m.ack)?.ack?.lastSeq, 5, 'ack after 5 samples');
      a.close();

      const b = rawStream(gw.ports.agent);
      b.call.write({ hello: { nodeName: 'node-p', instanceId: 'inst-1' } });
      await eventually(() => b.messages[0], 3000, 'welcome');
      assert.equal(b.messages[0]?.welcome?.lastSeq, 5);
      for (let s = 3; s <= 8; s++) b.call.write(sample(s)); // 3..5 are replays
      await eventually(() => (gw.store.get('node-p')?.lastSeq === 8 ? true : undefined), 3000, 'seq 8');
      assert.equal(gw.store.get('node-p')?.window.length, 8);
      const metrics = (await getHttp(gw.ports.metrics, '/metrics')).body;
      assert.match(metrics, /oversell_samples_received_total\{result="duplicate"\} 3/);

      // A restarted agent (new instance) starts from seq 1 and is accepted.
      const c = rawStream(gw.ports.agent);
      c.call.write({ hello: { nodeName: 'node-p', instanceId: 'inst-2' } });
      await eventually(() => c.messages[0], 3000, 'welcome');
      assert.equal(c.messages[0]?.welcome?.lastSeq, 0);
      c.call.write(sample(1));
      await eventually(() => (gw.store.get('node-p')?.instanceId === 'inst-2' && gw.store.get('node-p')?.lastSeq === 1 ? true : undefined), 3000, 'new instance');
      // The older stream of inst-1 is no longer the node's reporter.
      b.call.write(sample(9));
      await eventually(() => b.error(), 3000, 'older stream closed');
      assert.equal(b.error()?.code, grpc.status.ABORTED);
      b.close();
      c.close();
    } finally {
      await gw.close();
    }
  });

  const refusals: Array<[string, AgentMessage[], grpc.status, RegExp]> = [
    ['a sample before hello', [sample(1)], grpc.status.FAILED_PRECONDITION, /hello first/],
    ['an invalid node name', [{ hello: { nodeName: 'Not_A_Node!', instanceId: 'x' } }], grpc.status.INVALID_ARGUMENT, /not a valid Kubernetes node name/],
    ['an empty instance id', [{ hello: { nodeName: 'node-x', instanceId: '' } }], grpc.status.INVALID_ARGUMENT, /instance_id/],
    ['hello twice', [{ hello: { nodeName: 'node-y', instanceId: 'i' } }, { hello: { nodeName: 'node-z', instanceId: 'i' } }], grpc.status.INVALID_ARGUMENT, /twice/],
  ];
  for (const [what, messages, code, details] of refusals) {
    it(`refuses ${what} with ${grpc.status[code]}, and keeps serving others`, async () => {
      const gw = await startTestGateway();
      try {
        const bad = rawStream(gw.ports.agent);
        for (const m of messages) bad.call.write(m);
        const err = await eventually(() => bad.error(), 3000, 'the refusal');
        assert.equal(err.code, code);
        assert.match(err.details, details);
        bad.close();
        const good = rawStream(gw.ports.agent);
        good.call.write({ hello: { nodeName: 'node-ok', instanceId: 'i' } });
        await eventually(() => good.messages[0]?.welcome, 3000, 'a welcome for a good stream');
        good.close();
      } finally {
        await gw.close();
      }
    });
  }

});

describe('ingest thread', () => {
  it('an agent on the agent port is stored, queried and connected on the main thread; the thread stops with the gateway', async () => {
    const gw = await startTestGateway();
    let agent: RunningAgent | undefined;
    try {
      assert.ok(gw.ports.agent > 0 && gw.ports.agent !== gw.ports.grpc, `agent port ${gw.ports.agent} beside grpc ${gw.ports.grpc}`);
      agent = fixtureAgent('node-thread', gw.ports.agent);
      const q = queryClient(gw.ports.grpc);
      const status = await eventually(async () => {
        const s = await getNode(q, 'node-thread').catch(() => undefined);
        return s?.latest && s.window?.samples && s.window.samples >= 3 ? s : undefined;
      }, 5000, 'three samples via the ingest thread');
      assert.equal(status.connected, true);
      assert.ok(status.latest?.capacity?.cpuMillicores, 'capacity carried across the thread');
      const metrics = (await getHttp(gw.ports.metrics, '/metrics')).body;
      assert.match(metrics, /oversell_agents_connected 1/);
      assert.match(metrics, /oversell_samples_received_total\{result="stored"\} [1-9]/);
      // The thread reports its own heap (a second isolate: the main thread's figures do not include it).
      const limit = Number(/^oversell_ingest_thread_heap_bytes\{thread="ingest-0",kind="limit"\} (\d+)/m.exec(metrics)?.[1]);
      const used = Number(/^oversell_ingest_thread_heap_bytes\{thread="ingest-0",kind="used"\} (\d+)/m.exec(metrics)?.[1]);
      assert.ok(used > 0 && used < limit, `ingest thread heap ${used} of ${limit}`);
      assert.notEqual(used, Number(/^oversell_gateway_nodejs_heap_size_used_bytes (\d+)/m.exec(metrics)?.[1]), 'the main thread\'s heap reported as the thread\'s');
      await agent.stop();
      agent = undefined;
      await eventually(async () => ((await getNode(q, 'node-thread')).connected === false ? true : undefined), 3000, 'disconnect seen on the main thread');
      q.close();
    } finally {
      await agent?.stop();
      await gw.close();
    }
    // Closed means closed: nothing listens on the agent port any more.
    const probe = rawStream(gw.ports.agent);
    probe.call.write({ hello: { nodeName: 'late', instanceId: 'i' } });
    const err = await eventually(() => probe.error(), 5000, 'a refused connection');
    assert.equal(err.code, grpc.status.UNAVAILABLE);
    probe.close();
  });

  it('a thread that dies is reported, started again on the same port, and its agents come back', async () => {
    const store = new NodeStore({ retainMs: 60_000, forgetAfterMs: 600_000 });
    const down: Array<string | undefined> = [];
    const ingest = await startSupervisedIngest({
      store, metrics: new GatewayMetrics(store, Date.now), log, bindAddress: '127.0.0.1', port: 0, maxReceiveMessageBytes: 1 << 20,
      restartDelayMs: 100, onDown: (reason) => down.push(reason),
    });
    try {
      const port = ingest.port;
      const before = rawStream(port);
      before.call.write({ hello: { nodeName: 'node-crash', instanceId: 'i' } });
      before.call.write(sample(1));
      await eventually(() => (store.get('node-crash')?.lastSeq === 1 ? true : undefined), 3000, 'a sample through the thread');
      const first = ingest.thread;
      await first.terminate(); // as a crash would end it
      await eventually(() => (down.length >= 2 ? true : undefined), 5000, 'down, then up again');
      assert.match(down[0] ?? '', /ingest thread stopped.*exited.*restarting/);
      assert.equal(down[1], undefined, 'serving again');
      assert.notEqual(ingest.thread, first);
      assert.equal(ingest.port, port, 'same port: agents reconnect where they were');
      await eventually(() => before.error(), 5000, 'the old stream ended, so the agent reconnects');
      before.close();
      // The agent's reconnect: the store kept its data, so the welcome says where to resume.
      const after = rawStream(port);
      after.call.write({ hello: { nodeName: 'node-crash', instanceId: 'i' } });
      const welcome = await eventually(() => after.messages[0]?.welcome, 3000, 'a welcome from the new thread');
      assert.equal(welcome?.lastSeq, 1);
      after.close();
    } finally {
      await ingest.close();
    }
  });

  it('a hello the store cannot take ends that stream with UNAVAILABLE; the thread and other streams go on', async () => {
    const store = new NodeStore({ retainMs: 60_000, forgetAfterMs: 600_000 });
    const attach = store.attach.bind(store);
    store.attach = (name, ...rest) => {
      if (name === 'node-bad') throw new Error('store refused node-bad');
      return attach(name, ...rest);
    };
    const ingest = await startSupervisedIngest({
      store, metrics: new GatewayMetrics(store, Date.now), log, bindAddress: '127.0.0.1', port: 0, maxReceiveMessageBytes: 1 << 20, onDown: () => {},
    });
    try {
      const bad = rawStream(ingest.port);
      bad.call.write({ hello: { nodeName: 'node-bad', instanceId: 'i' } });
      const err = await eventually(() => bad.error(), 3000, 'the refused stream ends');
      assert.equal(err.code, grpc.status.UNAVAILABLE);
      assert.match(err.details, /store refused node-bad.*reconnect/);
      bad.close();
      const good = rawStream(ingest.port);
      good.call.write({ hello: { nodeName: 'node-good', instanceId: 'i' } });
      good.call.write(sample(1));
      await eventually(() => (store.get('node-good')?.lastSeq === 1 ? true : undefined), 3000, 'another stream stored');
      good.close();
    } finally {
      await ingest.close();
    }
  });

  it('an agent port in use fails the start with a message that names the flag', async () => {
    const first = await startTestGateway();
    try {
      await assert.rejects(startTestGateway({ agentPort: first.ports.agent }), /already in use.*--agent-port/);
    } finally {
      await first.close();
    }
  });
});

describe('query API', () => {
  it('GetNode of an unknown node is NOT_FOUND, an empty name INVALID_ARGUMENT', async () => {
    const gw = await startTestGateway();
    try {
      const q = queryClient(gw.ports.grpc);
      await assert.rejects(getNode(q, 'nope'), (e: grpc.ServiceError) => e.code === grpc.status.NOT_FOUND && /nope/.test(e.details));
      await assert.rejects(getNode(q, ''), (e: grpc.ServiceError) => e.code === grpc.status.INVALID_ARGUMENT);
    } finally {
      await gw.close();
    }
  });
});

describe('high availability: every sample to every gateway replica', () => {
  it('two replicas both hold current data; losing one loses nothing', async () => {
    const a = await startTestGateway();
    const b = await startTestGateway();
    const agent = fixtureAgent('node-ha', a.ports.agent, { gatewayAddresses: [`127.0.0.1:${a.ports.agent}`, `127.0.0.1:${b.ports.agent}`] });
    try {
      for (const gw of [a, b]) {
        await eventually(async () => ((await getNode(queryClient(gw.ports.grpc), 'node-ha')).window?.samples ?? 0) >= 3 || undefined, 5000, 'data at each replica');
      }
      await a.close();
      const before = (await getNode(queryClient(b.ports.grpc), 'node-ha')).latest?.seq ?? 0;
      // A batch of 10 samples 50 ms apart leaves at least every 500 ms.
      await new Promise((r) => setTimeout(r, 700));
      const after = await getNode(queryClient(b.ports.grpc), 'node-ha');
      assert.ok((after.latest?.seq ?? 0) > before, 'samples keep arriving at the surviving replica');
      assert.ok(after.ageMs < 1000);
      assert.deepEqual(agent.gateways.addresses, [`127.0.0.1:${a.ports.agent}`, `127.0.0.1:${b.ports.agent}`].sort());
      // Discovery says A is gone: its stream is closed, B's stays.
      agent.gateways.set([`127.0.0.1:${b.ports.agent}`]);
      assert.deepEqual(agent.gateways.addresses, [`127.0.0.1:${b.ports.agent}`]);
      assert.equal(agent.gateways.live, true);
    } finally {
      await agent.stop();
      await b.close();
    }
  });

  it('EndpointSlices become addresses: ready endpoints on the grpc port', () => {
    const slices = [
      { addressType: 'IPv4', endpoints: [{ addresses: ['10.0.0.1'], conditions: { ready: true } }, { addresses: ['10.0.0.2'], conditions: { ready: false } }], ports: [{ name: 'grpc', port: 50051 }, { name: 'metrics', port: 9090 }] },
      { addressType: 'IPv6', endpoints: [{ addresses: ['fd00::3'] }], ports: [{ name: 'grpc', port: 50051 }] },
      { addressType: 'IPv4', endpoints: [{ addresses: ['10.0.0.4'] }], ports: [{ name: 'metrics', port: 9090 }, { name: 'web', port: 80 }] },
    ];
    assert.deepEqual(addressesOf(slices), ['10.0.0.1:50051', '[fd00::3]:50051']);
  });
});
