// Sharding (issue 32, item 5): three real gateways on 127.0.0.1 with
// --shard-copies, real agent streams (agent/stream/gateway-set.ts over real
// gRPC) and real HTTPS between the replicas. An agent streams to its node's
// owners only, as the gateways compute them; the owners report the node's
// decision inputs to every replica, so a review that reaches a replica
// without the node's stream is decided there, as an owner decides it; a
// replica that does not answer, or answers with another certificate, is not
// believed.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { createServer } from 'node:https';
import { type AddressInfo, createServer as createTcpServer, type Socket } from 'node:net';
import { after, before, describe, it } from 'node:test';
import * as grpc from '@grpc/grpc-js';
import type { V1EndpointSlice } from '@kubernetes/client-node';
import { GatewaySet } from '../../../agent/stream/gateway-set.js';
import { createLogger } from '../../../lib/log.js';
import { owners } from '../../../lib/rendezvous.js';
import { PeerClient } from '../../../gateway/shard/peer-client.js';
import type { NodeSummaries__Output } from '../../../proto/gen/oversell/v1/NodeSummaries.js';
import { ShardView, type ShardMember } from '../../../gateway/shard/shard-view.js';
import { membersOf, watchShardMembers } from '../../../gateway/shard/shard-members.js';
import { FakeKubeApi, type FakeObject } from '../../helpers/fake-kube-api.js';
import { generateServingCertificate } from '../../../gateway/tls/self-signed.js';
import { collectWatch, eventually, getNode, listNodes, queryClient } from '../../helpers/grpc.js';
import { postHttps, startTestGateway, type TestGateway } from '../../helpers/gateway.js';
import { FIXTURE_NODE, kubeletReview, nodeSample, patchOf } from '../../helpers/node-reviews.js';

const log = createLogger('test', process.env.TEST_LOG_LEVEL ?? 'silent');
const COPIES = 2;
const proofKey = randomBytes(32);

/** The allocatable operations of a review's answer: what a grant is (its annotations carry the time of signing). */
const allocatableOps = (body: string) => patchOf(JSON.parse(body) as { response: { patch?: string } }).filter((op) => op.path.startsWith('/status/allocatable/'));

describe('ShardView', () => {
  const members: ShardMember[] = ['10.0.0.1:50052', '10.0.0.2:50052', '10.0.0.3:50052'].map((key) => ({ key, webhook: key.replace('50052', '8443') }));

  it('forwards to the node\'s owners other than this replica, best first', () => {
    const want = owners('node-a', members.map((m) => m.key), COPIES);
    const outsider = members.find((m) => !want.includes(m.key))!;
    const asOutsider = new ShardView(COPIES, (k) => k === outsider.key);
    asOutsider.set(members);
    assert.deepEqual(asOutsider.forwardTo('node-a').map((m) => m.key), want);
    assert.equal(asOutsider.forwardTo('node-a')[0]!.webhook, want[0]!.replace('50052', '8443'));
    const asOwner = new ShardView(COPIES, (k) => k === want[1]);
    asOwner.set(members);
    assert.deepEqual(asOwner.forwardTo('node-a').map((m) => m.key), [want[0]], 'an owner without data asks the other owner');
    const alone = new ShardView(1, (k) => k === want[0]);
    alone.set(members);
    assert.deepEqual(alone.forwardTo('node-a'), [], 'the only owner: nobody else to ask');
    assert.deepEqual(new ShardView(COPIES, () => false).forwardTo('node-a'), [], 'no members listed: nobody to ask');
    assert.throws(() => new ShardView(0, () => false), /shard copies must be a whole number of 1 or more/);
  });
});

describe('shard members from the agents\' Service', () => {
  const SLICES = '/apis/discovery.k8s.io/v1/namespaces/oversell/endpointslices';
  const slice = (name: string, addresses: string[], ports: Array<{ name: string; port: number }>, ready = true): FakeObject => ({
    metadata: { name, namespace: 'oversell', labels: { 'kubernetes.io/service-name': 'oversell-gateway-agents' } },
    addressType: 'IPv4',
    ports,
    endpoints: addresses.map((a) => ({ addresses: [a], conditions: { ready } })),
  });

  it('every ready address on the grpc port; the webhook on the slice\'s webhook port, else the replica\'s own', () => {
    const members = membersOf(([
      slice('a', ['10.0.0.2', '10.0.0.1'], [{ name: 'grpc', port: 50052 }]),
      slice('b', ['10.0.0.3'], [{ name: 'grpc', port: 50053 }, { name: 'webhook', port: 9443 }]),
      slice('c', ['10.0.0.9'], [{ name: 'grpc', port: 50052 }], false),
    ] as unknown as V1EndpointSlice[]), 8443);
    assert.deepEqual(members, [
      { key: '10.0.0.1:50052', webhook: '10.0.0.1:8443' },
      { key: '10.0.0.2:50052', webhook: '10.0.0.2:8443' },
      { key: '10.0.0.3:50053', webhook: '10.0.0.3:9443' },
    ]);
  });

  it('the watch keeps the view at the Service\'s members as they change', async () => {
    const api = await FakeKubeApi.start([SLICES]);
    const view = new ShardView(1, (k) => k === '10.0.0.1:50052');
    api.put(SLICES, slice('a', ['10.0.0.1', '10.0.0.2'], [{ name: 'grpc', port: 50052 }]));
    const watching = await watchShardMembers({ kubeConfig: api.kubeConfig(), namespace: 'oversell', service: 'oversell-gateway-agents', webhookPort: 8443, view, log });
    try {
      assert.equal(view.members, 2, 'the first list is in before the watch resolves');
      api.put(SLICES, slice('b', ['10.0.0.3'], [{ name: 'grpc', port: 50052 }]));
      await eventually(() => (view.members === 3 ? true : undefined), 5000, 'the new member');
      const owned = ['n1', 'n2', 'n3', 'n4', 'n5', 'n6'].filter((n) => view.isFirstOwner(n));
      assert.ok(owned.length > 0 && owned.length < 6, `this replica owns some nodes, not all: ${owned}`);
    } finally {
      await watching.stop();
      await api.close();
    }
  });
});

describe('three sharded replicas', () => {
  const gateways: TestGateway[] = [];
  let agents: GatewaySet | undefined;
  const keyOf = (gw: TestGateway) => `127.0.0.1:${gw.ports.agent}`;
  const membersOf = (list: TestGateway[]): ShardMember[] => list.map((gw) => ({ key: keyOf(gw), webhook: `127.0.0.1:${gw.ports.webhook}` }));
  let ownerSet: TestGateway[] = [];
  let outsider: TestGateway;

  before(async () => {
    for (let i = 0; i < 3; i++) {
      // One grant-signing key, as replicas share one: an owner's answer is the same whichever owner gives it.
      gateways.push(await startTestGateway({ shard: { copies: COPIES }, agentSending: { maxBatchSamples: 0, sendEveryMs: 1000 }, proofKey }));
    }
    for (const gw of gateways) gw.shard!.set(membersOf(gateways));
    const want = owners(FIXTURE_NODE, gateways.map(keyOf), COPIES);
    ownerSet = gateways.filter((gw) => want.includes(keyOf(gw)));
    outsider = gateways.find((gw) => !want.includes(keyOf(gw)))!;
  });
  after(async () => {
    await agents?.stop();
    for (const gw of gateways) await gw.close();
  });

  it('an agent told the copies streams to its node\'s owners only, and only they hold its data', async () => {
    agents = GatewaySet.withOptions({
      hello: { nodeName: FIXTURE_NODE, instanceId: 'i-1', agentVersion: 'test', host: null },
      log,
      backoffInitialMs: 100,
      backoffMaxMs: 500,
      connection: { credentials: grpc.credentials.createInsecure(), channelOptions: { 'grpc.use_local_subchannel_pool': 1 } },
      onSettings: (s) => agents?.shardCopies(s.shardCopies),
    }, log);
    agents.set(gateways.map(keyOf));
    await eventually(() => (agents!.addresses.length === COPIES ? true : undefined), 10_000, 'the agent narrowed to the owners');
    assert.deepEqual(agents.addresses, ownerSet.map(keyOf).sort());
    await eventually(() => ([...ownerSet].every((gw) => agents!.stream(keyOf(gw))?.live) ? true : undefined), 10_000, 'streams to both owners live');
    for (let i = 0; i < 5; i++) agents.push(nodeSample(Date.now() + i));
    await eventually(() => (ownerSet.every((gw) => (gw.store.get(FIXTURE_NODE)?.lastSeq ?? 0) > 0) ? true : undefined), 10_000, 'both owners hold the node');
    assert.equal(outsider.store.get(FIXTURE_NODE)?.lastSeq ?? 0, 0, 'the replica that does not own the node never got its samples (at most its hello, before the welcome)');
  });

  it('the query API at a replica without the node answers with an owner\'s view of it', async () => {
    const client = queryClient(outsider.ports.grpc);
    const last = (gw: TestGateway) => gw.store.get(FIXTURE_NODE)?.latest?.timestampMs;
    await eventually(() => (last(ownerSet[0]!) === last(ownerSet[1]!) ? true : undefined), 10_000, 'both owners have the last sample');
    try {
      const direct = await getNode(queryClient(ownerSet[0]!.ports.grpc), FIXTURE_NODE);
      const got = await getNode(client, FIXTURE_NODE);
      assert.ok(got.latest, 'the owner\'s sample, not the outsider\'s empty record');
      assert.equal(got.latest.cpuUsageMillicores, direct.latest?.cpuUsageMillicores);
      assert.equal(got.latest.timestampMs, direct.latest?.timestampMs, "the same sample (each owner keeps its own receive time)");
      const listed = (await listNodes(client)).find((n) => n.name === FIXTURE_NODE);
      assert.ok(listed?.latest, `ListNodes shows the node with the owner's sample: ${JSON.stringify(listed)}`);
      const summaries = await new Promise<NodeSummaries__Output>((resolve, reject) => client.listNodeSummaries({}, (err, v) => (err || !v ? reject(err) : resolve(v))));
      const row = summaries.name.indexOf(FIXTURE_NODE);
      assert.ok(row >= 0 && summaries.hasSample[row], `ListNodeSummaries shows the node with a sample: ${JSON.stringify(summaries)}`);
      assert.equal(summaries.cpuUsageMillicores[row], direct.latest?.cpuUsageMillicores);
      assert.equal(summaries.name.filter((n) => n === FIXTURE_NODE).length, 1, 'once, though two owners hold it');
    } finally {
      client.close();
    }
  });

  it('a watch at a replica without the node streams it from its first owner, once, then its changes', async () => {
    const client = queryClient(outsider.ports.grpc);
    const watch = collectWatch(client);
    try {
      const synced = await eventually(() => (watch.events.some((e) => e.type === 'SYNCED') ? watch.events.slice() : undefined), 10_000, 'the merged watch synced');
      const snapshot = synced.slice(0, synced.findIndex((e) => e.type === 'SYNCED'));
      const ofNode = snapshot.filter((e) => e.node?.name === FIXTURE_NODE);
      assert.equal(ofNode.length, 1, `the node once in the snapshot, though every replica has its record: ${JSON.stringify(snapshot.map((e) => e.node?.name))}`);
      assert.ok(ofNode[0]!.node?.latest, 'with the first owner\'s sample');
      assert.equal(synced.filter((e) => e.type === 'SYNCED').length, 1, 'one SYNCED for all the replicas');
      const cpu = 4321;
      agents!.push(nodeSample(Date.now(), { cpuUsageMillicores: cpu }));
      await eventually(() => (watch.events.some((e) => e.type === 'UPDATED' && e.node?.name === FIXTURE_NODE && e.node.latest?.cpuUsageMillicores === cpu) ? true : undefined), 10_000, 'the new sample as an update');
    } finally {
      watch.cancel();
      client.close();
    }
  });

  it('when a replica leaves, the watch gets its nodes from their new first owner and never drops them', async () => {
    const client = queryClient(outsider.ports.grpc);
    const watch = collectWatch(client);
    const first = gateways.find((gw) => keyOf(gw) === owners(FIXTURE_NODE, gateways.map(keyOf), COPIES)[0])!;
    const remaining = gateways.filter((gw) => gw !== first);
    try {
      await eventually(() => (watch.events.some((e) => e.type === 'SYNCED') ? true : undefined), 10_000, 'synced');
      const mark = watch.events.length;
      for (const gw of remaining) gw.shard!.set(membersOf(remaining));
      await eventually(() => (watch.events.slice(mark).some((e) => e.type === 'UPDATED' && e.node?.name === FIXTURE_NODE) ? true : undefined), 10_000, 'the node re-sent by its new first owner');
      assert.ok(!watch.events.slice(mark).some((e) => e.type === 'REMOVED' && e.node?.name === FIXTURE_NODE), 'never removed: it still has owners');
    } finally {
      for (const gw of remaining) gw.shard!.set(membersOf(gateways));
      watch.cancel();
      client.close();
    }
  });

  it('a replica tells only another replica what it holds: the caller must present the gateway\'s certificate', async () => {
    const body = JSON.stringify({ names: [FIXTURE_NODE] });
    const anonymous = await postHttps(ownerSet[0]!, '/shard/v1/nodes', body);
    assert.equal(anonymous.status, 403);
    assert.match(anonymous.body, /only a replica of this gateway/);
    const other = await generateServingCertificate(['localhost']);
    const stranger = await postHttps(ownerSet[0]!, '/shard/v1/summaries', '{}', undefined, false, other);
    assert.equal(stranger.status, 403, 'another certificate is not this gateway\'s');
  });

  it('a review at a replica the node\'s agent does not stream to is decided there, from the owners\' report, as an owner decides it', async () => {
    // The agent's samples reach the owners over a few seconds: compare once the owners hold the same newest one and the
    // replica's report is of it too (the report's sample arrived at the first owner, the reporter, no earlier), so
    // both decide from the same sample.
    const first = ownerSet.find((gw) => gw.shard!.isFirstOwner(FIXTURE_NODE))!;
    const seqs = () => ownerSet.map((gw) => gw.store.get(FIXTURE_NODE)?.lastSeq ?? 0);
    await eventually(() => (new Set(seqs()).size === 1 ? true : undefined), 15_000, 'every owner holds the same newest sample');
    await eventually(() => {
      const u = outsider.peerInputs!.usage(FIXTURE_NODE, Date.now());
      return u && Date.now() - u.ageMs >= first.store.get(FIXTURE_NODE)!.receivedAtMs ? true : undefined;
    }, 10_000, 'the first owner\'s report of the last sample reached the replica');
    const review = JSON.stringify(kubeletReview());
    const newest = seqs()[0];
    const direct = await postHttps(first, '/mutate/nodes', review);
    assert.ok(allocatableOps(direct.body).length > 0, `the owner's data inflates it: ${direct.body}`);
    const here = await postHttps(outsider, '/mutate/nodes', review);
    assert.deepEqual(seqs(), [newest, newest], 'no sample arrived meanwhile');
    assert.deepEqual(allocatableOps(here.body), allocatableOps(direct.body), 'the owner\'s grant');
    assert.equal(outsider.store.get(FIXTURE_NODE)?.lastSeq ?? 0, 0, 'decided without the node\'s samples');
    assert.match(await outsider.metrics.exposition(), /oversell_webhook_request_duration_seconds_count\{outcome="patched"\} [1-9]/);
  });

  it('a report of node inputs is believed only from a replica, and only whole and within bounds', async () => {
    const report = (ageMs: number) => JSON.stringify({ nodes: [{ name: 'reported-node', ageMs, capacityMemoryBytes: 2 ** 34, requests: [1000, 2 ** 30, 1], cpuManager: null, summaries: [], history: null }] });
    const anonymous = await postHttps(outsider, '/shard/v1/inputs', report(0));
    assert.equal(anonymous.status, 403, 'no certificate: not a replica');
    const bad = await postHttps(outsider, '/shard/v1/inputs', report(-1), undefined, undefined, outsider.serving);
    assert.equal(bad.status, 400);
    assert.match(bad.body, /reported-node: ageMs out of bounds/);
    assert.equal(outsider.peerInputs!.usage('reported-node', Date.now()), undefined, 'nothing kept from a refused report');
    assert.match(await outsider.metrics.exposition(), /oversell_peer_inputs_total\{result="refused"\} 1/);
    const good = await postHttps(outsider, '/shard/v1/inputs', report(0), undefined, undefined, outsider.serving);
    assert.equal(good.status, 200, good.body);
    assert.equal(outsider.peerInputs!.usage('reported-node', Date.now())?.requests.cpuMillicores, 1000);
  });

  it('when no owner can be reached, a review is still decided here from their last report; a query answers with what the replicas that answered hold', async () => {
    const down = membersOf(gateways).map((m) => (m.key === keyOf(outsider) ? m : { ...m, webhook: '127.0.0.1:1' }));
    outsider.shard!.set(down);
    try {
      const res = await postHttps(outsider, '/mutate/nodes', JSON.stringify(kubeletReview()));
      assert.equal(res.status, 200);
      assert.ok(allocatableOps(res.body).length > 0, `decided from the owners' last report: ${res.body}`);
      // The query API the same: no owner answers, so the node is not found, and the message says where it is.
      const client = queryClient(outsider.ports.grpc);
      try {
        const err = await getNode(client, FIXTURE_NODE).then(() => undefined, (e: grpc.ServiceError) => e);
        assert.equal(err?.code, grpc.status.NOT_FOUND);
        const owners = ownerSet.map(keyOf);
        assert.ok(owners.every((k) => err?.details.includes(k)), `names the owners ${owners}: ${err?.details}`);
        assert.match(err?.details ?? '', /or to its owners .* \(not answering: /);
        const listed = (await listNodes(client)).find((n) => n.name === FIXTURE_NODE);
        assert.equal(listed?.latest ?? undefined, undefined, 'a list answers with what the replicas that answered hold');
        // A watch does not wait for replicas that cannot be reached: it syncs with what this one streams.
        const watch = collectWatch(client);
        try {
          await eventually(() => (watch.events.some((e) => e.type === 'SYNCED') ? true : undefined), 10_000, 'synced without the other replicas');
        } finally {
          watch.cancel();
        }
        assert.match(await outsider.metrics.exposition(), /oversell_query_peers_failed_total [1-9]/);
      } finally {
        client.close();
      }
    } finally {
      outsider.shard!.set(membersOf(gateways));
    }
  });

  // Issue 43: a replica that is listed but does not answer (stopped, GC-stalled,
  // partitioned) until its readiness changes. Here a TCP server that accepts and
  // never speaks, listed as the first owner of the node, whose second owner is a
  // real replica holding its data.
  describe('with a hung replica listed as the node\'s first owner', () => {
    let hung: { member: ShardMember; close: () => Promise<void> };
    let second: TestGateway;
    const withHung = () => [...membersOf(gateways), hung.member];

    before(async () => {
      const sockets = new Set<Socket>();
      const server = createTcpServer((socket) => {
        sockets.add(socket);
        socket.on('close', () => sockets.delete(socket));
      });
      await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
      const real = gateways.map(keyOf);
      // A key the node hashes highest: the hung replica is its first owner, the real replicas' first owner its second.
      let key = '';
      for (let i = 1; !key; i++) if (owners(FIXTURE_NODE, [...real, `10.255.0.${i}:50052`], COPIES)[0] === `10.255.0.${i}:50052`) key = `10.255.0.${i}:50052`;
      hung = {
        member: { key, webhook: `127.0.0.1:${(server.address() as AddressInfo).port}` },
        close: async () => {
          for (const s of sockets) s.destroy();
          await new Promise((r) => server.close(r));
        },
      };
      second = gateways.find((gw) => keyOf(gw) === owners(FIXTURE_NODE, real, COPIES)[0])!;
      assert.deepEqual(owners(FIXTURE_NODE, withHung().map((m) => m.key), COPIES), [key, keyOf(second)]);
      for (const gw of gateways) gw.shard!.set(withHung());
      // Fresh data at both real owners (the agent streams to them), so the second owner decides with it.
      const cpu = 777;
      agents!.push(nodeSample(Date.now(), { cpuUsageMillicores: cpu }));
      await eventually(() => (ownerSet.every((gw) => gw.store.get(FIXTURE_NODE)?.latest?.cpuUsageMillicores === cpu) ? true : undefined), 10_000, 'both real owners hold the new sample');
    });
    after(async () => {
      for (const gw of gateways) gw.shard!.set(membersOf(gateways));
      await hung?.close();
    });

    it('the healthy owner reports in the hung first owner\'s place while its sends to the hung one wait; a review here is decided from the newest, patched', async () => {
      const sampleAt = Math.max(...ownerSet.map((gw) => gw.store.get(FIXTURE_NODE)!.receivedAtMs));
      const arrived = await eventually(() => {
        const u = outsider.peerInputs!.usage(FIXTURE_NODE, Date.now());
        return u && Date.now() - u.ageMs >= sampleAt - 5 ? Date.now() : undefined;
      }, 10_000, 'the report of the new sample');
      // The hung replica is the node's first owner and reports nothing: the second owner reports once its 1 s grace has
      // passed, at most two 250 ms ticks around it (1.5 s), not after its sends to the hung replica time out (2 s each).
      assert.ok(arrived - sampleAt < 2000, `reported ${arrived - sampleAt} ms after the sample arrived`);
      const started = performance.now();
      const res = await postHttps(outsider, '/mutate/nodes', JSON.stringify(kubeletReview()));
      const ms = performance.now() - started;
      assert.ok(allocatableOps(res.body).length > 0, `patched: ${res.body}`);
      assert.ok(ms < 600, `answered in ${Math.round(ms)} ms: no owner is asked`);
      await eventually(async () => (/oversell_peer_inputs_total\{result="send-failed"\} [1-9]/.test(await second.metrics.exposition()) ? true : undefined), 10_000, 'the send to the hung replica failed, counted');
    });

    it('GetNode asks the other owner when the first does not answer, and a list does not wait the whole deadline for it', async () => {
      const client = queryClient(outsider.ports.grpc);
      try {
        let started = performance.now();
        const got = await getNode(client, FIXTURE_NODE);
        const getMs = performance.now() - started;
        assert.equal(got.latest?.cpuUsageMillicores, 777, 'the second owner\'s sample');
        assert.ok(getMs < 1500, `answered in ${Math.round(getMs)} ms, inside the 2 s the hung owner would have taken`);
        started = performance.now();
        const listed = (await listNodes(client)).find((n) => n.name === FIXTURE_NODE);
        const listMs = performance.now() - started;
        assert.equal(listed?.latest?.cpuUsageMillicores, 777, 'listed with the second owner\'s sample');
        assert.ok(listMs < 1500, `listed in ${Math.round(listMs)} ms: every node has an owner that answered, so the hung one gets a share, not the 2 s`);
        log.info({ getMs: Math.round(getMs), listMs: Math.round(listMs) }, 'GetNode and ListNodes with a hung first owner');
        assert.match(await outsider.metrics.exposition(), /oversell_query_peers_failed_total [1-9]/);
      } finally {
        client.close();
      }
    });

    it('WatchNodes syncs without the hung replica, with its nodes from their second owner, then their changes', async () => {
      const client = queryClient(outsider.ports.grpc);
      const started = performance.now();
      const watch = collectWatch(client);
      try {
        const synced = await eventually(() => (watch.events.some((e) => e.type === 'SYNCED') ? watch.events.slice() : undefined), 6000, 'the watch synced without the hung replica');
        const ms = performance.now() - started;
        assert.ok(ms < 4000, `synced in ${Math.round(ms)} ms`);
        log.info({ ms: Math.round(ms) }, 'WatchNodes synced with a hung replica listed');
        const snapshot = synced.slice(0, synced.findIndex((e) => e.type === 'SYNCED'));
        const ofNode = snapshot.filter((e) => e.node?.name === FIXTURE_NODE);
        assert.equal(ofNode.length, 1, `the hung replica's node once in the snapshot, from its second owner: ${JSON.stringify(snapshot.map((e) => e.node?.name))}`);
        assert.equal(ofNode[0]!.node?.latest?.cpuUsageMillicores, 777);
        const cpu = 4567;
        agents!.push(nodeSample(Date.now(), { cpuUsageMillicores: cpu }));
        await eventually(() => (watch.events.some((e) => e.type === 'UPDATED' && e.node?.name === FIXTURE_NODE && e.node.latest?.cpuUsageMillicores === cpu) ? true : undefined), 10_000, 'the node\'s change, from its second owner');
        // The hung replica leaves: its stand-ins close without a word, and the node's new first owner re-sends it.
        const mark = watch.events.length;
        for (const gw of gateways) gw.shard!.set(membersOf(gateways));
        await eventually(() => (watch.events.slice(mark).some((e) => e.type === 'UPDATED' && e.node?.name === FIXTURE_NODE) ? true : undefined), 10_000, 'the node re-sent by its first owner');
        assert.ok(!watch.events.slice(mark).some((e) => e.type === 'REMOVED'), 'never removed: it still has owners');
      } finally {
        watch.cancel();
        client.close();
      }
    });
  });

  it('requests at once to one peer each see its certificate: no TLS session is resumed without one', async () => {
    const ours = await generateServingCertificate(['localhost']);
    // Slow enough that the requests overlap: each after the first opens a connection of its own.
    const peer = createServer({ cert: ours.cert, key: ours.key }, (_req, res) => setTimeout(() => res.end('{"ok":true}'), 50));
    await new Promise<void>((r) => peer.listen(0, '127.0.0.1', r));
    const client = new PeerClient(() => ours);
    try {
      const webhook = `127.0.0.1:${(peer.address() as AddressInfo).port}`;
      const post = () => client.post(webhook, '/mutate/nodes', Buffer.from('{}'), { timeoutMs: 2000, headers: {} }).then(String, (err: Error) => err.message);
      assert.equal(await post(), '{"ok":true}');
      assert.deepEqual(await Promise.all([post(), post(), post()]), Array(3).fill('{"ok":true}'), 'a resumed session presents no certificate, so the pin would refuse it');
    } finally {
      client.close();
      peer.closeAllConnections();
      peer.close();
    }
  });

  it('a peer that presents another certificate is not believed', async () => {
    const other = await generateServingCertificate(['localhost', '127.0.0.1']);
    const impostor = createServer({ cert: other.cert, key: other.key }, (_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end('{"forged":true}');
    });
    await new Promise<void>((r) => impostor.listen(0, '127.0.0.1', r));
    const ours = await generateServingCertificate(['localhost']);
    const client = new PeerClient(() => ours);
    const post = (c: PeerClient) => c.post(`127.0.0.1:${(impostor.address() as AddressInfo).port}`, '/shard/v1/nodes', Buffer.from('{}'), { timeoutMs: 2000, headers: {} }).then(String, (err: Error) => err.message);
    try {
      assert.match(await post(client), /does not present this gateway's serving certificate/);
      // The same server presenting our certificate is believed.
      impostor.setSecureContext({ cert: ours.cert, key: ours.key });
      const freshClient = new PeerClient(() => ours);
      try {
        assert.equal(await post(freshClient), '{"forged":true}');
      } finally {
        freshClient.close();
      }
    } finally {
      client.close();
      impostor.closeAllConnections();
      impostor.close();
    }
  });
});

describe('an owner whose agent streams to it', () => {
  it('decides a review and answers GetNode itself, though its data is older than 10 s (an agent summarizing sends every 20 s)', async () => {
    // Two replicas, each owning every node; one's clock runs 15 s ahead, so the data it holds is 15 s old to it.
    let skewMs = 0;
    const ahead = await startTestGateway({ shard: { copies: 2 }, agentSending: { maxBatchSamples: 0, sendEveryMs: 1000 }, proofKey, now: () => Date.now() + skewMs });
    const other = await startTestGateway({ shard: { copies: 2 }, agentSending: { maxBatchSamples: 0, sendEveryMs: 1000 }, proofKey });
    const key = (gw: TestGateway) => `127.0.0.1:${gw.ports.agent}`;
    const members = [ahead, other].map((gw) => ({ key: key(gw), webhook: `127.0.0.1:${gw.ports.webhook}` }));
    for (const gw of [ahead, other]) gw.shard!.set(members);
    const agent = GatewaySet.withOptions({
      hello: { nodeName: FIXTURE_NODE, instanceId: 'i-skew', agentVersion: 'test', host: null },
      log, backoffInitialMs: 100, backoffMaxMs: 500,
      connection: { credentials: grpc.credentials.createInsecure(), channelOptions: { 'grpc.use_local_subchannel_pool': 1 } },
    }, log);
    const client = queryClient(ahead.ports.grpc);
    try {
      agent.set([key(ahead), key(other)]);
      await eventually(() => ([ahead, other].every((gw) => agent.stream(key(gw))?.live) ? true : undefined), 10_000, 'streams to both owners live');
      agent.push(nodeSample(Date.now()));
      await eventually(() => ([ahead, other].every((gw) => (gw.store.get(FIXTURE_NODE)?.lastSeq ?? 0) > 0) ? true : undefined), 10_000, 'both hold the node');
      skewMs = 15_000;
      const res = await postHttps(ahead, '/mutate/nodes', JSON.stringify(kubeletReview()));
      assert.ok(allocatableOps(res.body).length > 0, `patched from its own data: ${res.body}`);
      const node = await getNode(client, FIXTURE_NODE);
      assert.ok(Number(node.ageMs) >= 15_000, `its own view, 15 s old to it: ${node.ageMs} ms`);
    } finally {
      client.close();
      await agent.stop();
      await ahead.close();
      await other.close();
    }
  });
});
