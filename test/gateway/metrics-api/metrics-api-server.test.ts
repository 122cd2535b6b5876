// The metrics API over real HTTPS (gateway/metrics-api/metrics-api-server.ts):
// callers proven by the front-proxy CA of the extension-apiserver-authentication
// ConfigMap (served by a fake API server and watched, so a rotation takes
// effect on a kept-alive connection), the user from the proxy's headers only,
// each request authorized, and what is served: selectors, the sandbox
// dropped, stale nodes and another node's pods left out, refusals as Status.
import assert from 'node:assert/strict';
import { Agent, request } from 'node:https';
import { after, before, describe, it } from 'node:test';
import { NodeStore } from '../../../gateway/store/node-store.js';
import { GATEWAY_DEFAULTS } from '../../../gateway/config/defaults.js';
import { generateCa, generateServingCertificate, issueServingCertificate, type CertificateAuthority } from '../../../gateway/tls/self-signed.js';
import { AUTH_CONFIGMAP, watchFrontProxyTrust, type Caller, type FrontProxyTrust } from '../../../gateway/metrics-api/front-proxy.js';
import { PodDirectory } from '../../../gateway/store/pod-directory.js';
import { watchBoundPods } from '../../../gateway/ingest/bound-pods-watch.js';
import { buildMetricsApiServer, type MetricsApiServer } from '../../../gateway/metrics-api/metrics-api-server.js';
import { nodeReading } from '../../../gateway/metrics-api/metrics-reader.js';
import { metricsPlan } from '../../../gateway/metrics-api/metrics-plan.js';
import { planId } from '../../../lib/usage/summary-plan.js';
import type { Attributes, Decision } from '../../../gateway/metrics-api/access-review.js';
import type { Watching } from '../../../lib/list-watch.js';
import { FakeKubeApi, type FakeObject } from '../../helpers/fake-kube-api.js';
import { nodeSample } from '../../helpers/node-reviews.js';
import { storeSample } from '../../helpers/store-sample.js';
import { eventually } from '../../helpers/grpc.js';
import { silentLog } from '../../helpers/plugin-app.js';
import Fastify, { type FastifyInstance } from 'fastify';
import { MetricsReader } from '../../../gateway/metrics-api/metrics-reader.js';
import { peerPlugin } from '../../../gateway/shard/peer-plugin.js';
import { PeerClient } from '../../../gateway/shard/peer-client.js';
import { PeerQueries } from '../../../gateway/shard/peer-queries.js';
import { ShardView } from '../../../gateway/shard/shard-view.js';
import { LocalNodes } from '../../../gateway/query/local-nodes.js';
import { flagsPolicySource } from '../../../gateway/policies/policy-source.js';
import { DEFAULT_POLICY } from '../../../gateway/decide/policy.js';

const CONFIGMAPS = `/api/v1/namespaces/${AUTH_CONFIGMAP.namespace}/configmaps`;
const APP = 'a'.repeat(64);
const PAUSE = 'c'.repeat(64);
const OTHER = 'd'.repeat(64);
const NOW = Date.now();

interface Answer {
  status: number;
  body: string;
  json: Record<string, unknown> & { items?: Array<Record<string, unknown> & { metadata: { name: string; namespace?: string } }>; message?: string; reason?: string; kind?: string };
}
type Client = { cert: string; key: string } | undefined;

function authConfigMap(ca: CertificateAuthority, allowedNames: string[]): FakeObject {
  return {
    metadata: { name: AUTH_CONFIGMAP.name, namespace: AUTH_CONFIGMAP.namespace },
    data: {
      'requestheader-client-ca-file': ca.cert,
      'requestheader-allowed-names': JSON.stringify(allowedNames),
      'requestheader-username-headers': '["X-Remote-User"]',
      'requestheader-group-headers': '["X-Remote-Group"]',
      'requestheader-extra-headers-prefix': '["X-Remote-Extra-"]',
    },
  };
}

function pod(uid: string, namespace: string, name: string, node: string, labels: Record<string, string>, containerId: string): FakeObject {
  return {
    metadata: { uid, namespace, name, labels },
    spec: { nodeName: node },
    status: { phase: 'Running', containerStatuses: [{ name: 'app', containerID: `containerd://${containerId}` }] },
  };
}

describe('metrics API over HTTPS', () => {
  let api: FakeKubeApi;
  let server: MetricsApiServer;
  let trust: FrontProxyTrust;
  let pods: Watching;
  let servingCa: string;
  let serving: { cert: string; key: string; ca: string };
  let directory: PodDirectory;
  let proxyCa: CertificateAuthority;
  let proxyClient: { cert: string; key: string };
  const reviews: Array<{ caller: Caller; attributes: Attributes }> = [];
  let answer: (caller: Caller, a: Attributes) => Promise<Decision> = async () => ({ allowed: true, reason: '' });
  const store = new NodeStore({ retainMs: 60_000, forgetAfterMs: GATEWAY_DEFAULTS.forgetAfterMs });

  before(async () => {
    proxyCa = await generateCa();
    proxyClient = await issueServingCertificate(proxyCa, ['front-proxy-client'], new Date(), 30, 'clientAuth');
    serving = await generateServingCertificate(['localhost', '127.0.0.1']);
    servingCa = serving.ca;
    api = await FakeKubeApi.start(['/api/v1/pods', CONFIGMAPS]);
    api.put(CONFIGMAPS, authConfigMap(proxyCa, ['front-proxy-client']));
    api.put('/api/v1/pods', pod('u1', 'shop', 'web-1', 'node-a', { app: 'web' }, APP));
    api.put('/api/v1/pods', pod('u2', 'tools', 'debug', 'node-a', { app: 'debug' }, 'e'.repeat(64)));
    // Bound to node-b; node-a's agent reports it too (a lie: only node-b's agent may speak for it).
    api.put('/api/v1/pods', pod('u3', 'shop', 'web-2', 'node-b', { app: 'web' }, OTHER));
    directory = new PodDirectory();
    trust = await watchFrontProxyTrust(api.kubeConfig(), silentLog);
    pods = await watchBoundPods(api.kubeConfig(), { directory }, silentLog);

    // node-a: fresh, two pod reports (the window is the time between them); node-b: its last sample 60 s old.
    store.attach('node-a', 'i1', null, 1);
    store.attach('node-b', 'i2', null, 2);
    const report = (at: number, app: number) => ({
      podsIncluded: true,
      pods: [
        { uid: 'u1', qosClass: 'burstable', cpuUsageMillicores: app + 1, memoryWorkingSetBytes: 0, cpuThrottledMicros: 0, containers: [{ containerId: PAUSE, cpuUsageMillicores: 1, memoryWorkingSetBytes: 40_960 }, { containerId: APP, cpuUsageMillicores: app, memoryWorkingSetBytes: 64 * 1024 ** 2 }] },
        { uid: 'u3', qosClass: 'burstable', cpuUsageMillicores: 999, memoryWorkingSetBytes: 0, cpuThrottledMicros: 0, containers: [{ containerId: OTHER, cpuUsageMillicores: 999, memoryWorkingSetBytes: 4096 }] },
      ],
      seq: at,
    });
    storeSample(store, 'node-a', 1, nodeSample(NOW - 12_000, report(NOW - 12_000, 100)), NOW - 12_000);
    storeSample(store, 'node-a', 1, nodeSample(NOW - 2000, { ...report(NOW - 2000, 250), cpuUsageMillicores: 1500 }), NOW - 2000);
    storeSample(store, 'node-a', 1, nodeSample(NOW - 1000, { cpuUsageMillicores: 1750, seq: NOW - 1000 }), NOW - 1000);
    storeSample(store, 'node-b', 2, nodeSample(NOW - 60_000, report(NOW - 60_000, 100)), NOW - 60_000);
    store.observe('node-a', { raw: undefined, labels: { zone: 'z1' }, nodeMaxRatio: {}, lastGrant: undefined }, NOW);

    server = await buildMetricsApiServer({
      bindAddress: '127.0.0.1',
      port: 0,
      tls: serving,
      handshakeTimeoutMs: 10_000,
      routes: {
        store,
        directory,
        staleAfterMs: () => 40_000,
        trust: () => trust.current(),
        review: (caller, attributes) => {
          reviews.push({ caller, attributes });
          return answer(caller, attributes);
        },
        notReady: () => trust.problem() ?? (directory.synced ? undefined : 'pods not listed yet'),
        now: () => Date.now(),
        log: silentLog,
      },
    });
    trust.onChange(() => server.trustChanged());
    await server.start();
  });

  after(async () => {
    await server?.close();
    await pods?.stop();
    await trust?.stop();
    await api?.close();
  });

  function get(path: string, client: Client, headers: Record<string, string | string[]> = {}, method = 'GET', agent: Agent | false = false, port = server.port): Promise<Answer> {
    return new Promise((resolve, reject) => {
      const req = request({ host: '127.0.0.1', port, path, method, ca: servingCa, servername: 'localhost', ...client, headers, agent }, (res) => {
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (c: string) => (body += c));
        res.on('end', () => {
          let json = {};
          try {
            json = JSON.parse(body);
          } catch {
            // Probes answer text.
          }
          resolve({ status: res.statusCode ?? 0, body, json });
        });
      });
      req.on('error', reject);
      req.end();
    });
  }
  const asAlice = (path: string) => get(path, proxyClient, { 'X-Remote-User': 'alice' });

  describe('who may call', () => {
    it('probes need no certificate: the kubelet has none', async () => {
      assert.equal((await get('/healthz', undefined)).body, 'ok');
      assert.equal((await get('/livez', undefined)).body, 'ok');
      assert.equal((await get('/readyz', undefined)).status, 200);
    });

    it('no client certificate: 401 Status, whatever the headers say', async () => {
      const before = reviews.length;
      const a = await get('/apis/metrics.k8s.io/v1beta1/nodes', undefined, { 'X-Remote-User': 'system:admin', 'X-Remote-Group': 'system:masters' });
      assert.equal(a.status, 401);
      assert.deepEqual(a.json, { kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Failure', message: 'Unauthorized', reason: 'Unauthorized', code: 401 });
      assert.equal(reviews.length, before, 'no access review for a caller that is not the proxy');
    });

    it('a client certificate from another CA with X-Remote-User: system:admin is refused (401), its headers never read', async () => {
      const other = await issueServingCertificate(await generateCa(), ['front-proxy-client'], new Date(), 30, 'clientAuth');
      const before = reviews.length;
      const a = await get('/apis/metrics.k8s.io/v1beta1/nodes', other, { 'X-Remote-User': 'system:admin', 'X-Remote-Group': 'system:masters' });
      assert.equal(a.status, 401);
      assert.equal(reviews.length, before);
    });

    it('the front-proxy CA but a CN not in requestheader-allowed-names: 401', async () => {
      const stranger = await issueServingCertificate(proxyCa, ['someone-else'], new Date(), 30, 'clientAuth');
      assert.equal((await get('/apis/metrics.k8s.io/v1beta1/nodes', stranger, { 'X-Remote-User': 'alice' })).status, 401);
    });

    it('the proxy without a user header: 401', async () => {
      assert.equal((await get('/apis/metrics.k8s.io/v1beta1/nodes', proxyClient)).status, 401);
    });

    it('the proxy\'s caller is asked about by name, groups (each header apart) and extra', async () => {
      reviews.length = 0;
      const a = await get('/apis/metrics.k8s.io/v1beta1/namespaces/shop/pods/web-1', proxyClient, {
        'X-Remote-User': 'alice', 'X-Remote-Group': ['devs', 'system:authenticated'], 'X-Remote-Extra-Scopes': ['a', 'b'], 'X-Remote-Extra-Team%2fName': 'blue',
      });
      assert.equal(a.status, 200);
      assert.deepEqual(reviews, [{
        caller: { username: 'alice', uid: '', groups: ['devs', 'system:authenticated'], extra: { scopes: ['a', 'b'], 'team/name': ['blue'] } },
        attributes: { verb: 'get', resource: 'pods', namespace: 'shop', name: 'web-1' },
      }]);
    });

    it('denied by the access review: 403 Status naming the user and the verb', async () => {
      answer = async () => ({ allowed: false, reason: 'no RBAC policy matched' });
      try {
        const a = await asAlice('/apis/metrics.k8s.io/v1beta1/pods');
        assert.equal(a.status, 403);
        assert.equal(a.json.reason, 'Forbidden');
        assert.equal(a.json.message, 'pods.metrics.k8s.io is forbidden: User "alice" cannot list resource "pods" in API group "metrics.k8s.io" at the cluster scope: no RBAC policy matched');
      } finally {
        answer = async () => ({ allowed: true, reason: '' });
      }
    });

    it('an access review that fails: 500, never served', async () => {
      answer = async () => {
        throw new Error('connect ECONNREFUSED');
      };
      try {
        const a = await asAlice('/apis/metrics.k8s.io/v1beta1/nodes');
        assert.equal(a.status, 500);
        assert.equal(a.json.kind, 'Status');
        assert.equal(a.json.items, undefined);
      } finally {
        answer = async () => ({ allowed: true, reason: '' });
      }
    });
  });

  describe('what is served', () => {
    it('discovery: nodes and pods, get and list', async () => {
      const a = await asAlice('/apis/metrics.k8s.io/v1beta1');
      assert.equal(a.json.kind, 'APIResourceList');
      assert.deepEqual((a.json.resources as Array<{ name: string; verbs: string[] }>).map((r) => [r.name, r.verbs]), [['nodes', ['get', 'list']], ['pods', ['get', 'list']]]);
      assert.equal((await asAlice('/apis')).json.kind, 'APIGroupList');
      assert.equal((await asAlice('/apis/metrics.k8s.io')).json.kind, 'APIGroup');
    });

    it('nodes: the fresh one, with its newest sample; the stale one left out', async () => {
      const a = await asAlice('/apis/metrics.k8s.io/v1beta1/nodes');
      assert.equal(a.json.kind, 'NodeMetricsList');
      assert.deepEqual(a.json.items?.map((n) => [n.metadata.name, n.usage, n.window]), [['node-a', { cpu: '1750m', memory: '6Gi' }, '1s']]);
      assert.equal((await asAlice('/apis/metrics.k8s.io/v1beta1/nodes/node-b')).status, 404);
      // A cgroup v1 node's agent also sends the root memory cgroup's working set: the kubelet's figure, which the API serves.
      const record = store.get('node-a')!;
      assert.equal(nodeReading(record, NOW).memoryWorkingSetBytes, 6 * 1024 ** 3, 'v2 (or an older agent): the host\'s working set');
      storeSample(store, 'node-a', 1, nodeSample(NOW - 500, { cpuUsageMillicores: 1750, rootCgroupMemoryWorkingSetBytes: 5 * 1024 ** 3, seq: NOW - 500 }), NOW - 500);
      assert.deepEqual((await asAlice('/apis/metrics.k8s.io/v1beta1/nodes/node-a')).json.usage, { cpu: '1750m', memory: '5Gi' });
      const missing = await asAlice('/apis/metrics.k8s.io/v1beta1/nodes/nope');
      assert.equal(missing.status, 404);
      assert.equal(missing.json.message, 'nodes.metrics.k8s.io "nope" not found');
    });

    it('node label and field selectors', async () => {
      const names = async (q: string) => (await asAlice(`/apis/metrics.k8s.io/v1beta1/nodes?${q}`)).json.items?.map((n) => n.metadata.name);
      assert.deepEqual(await names('labelSelector=zone%3Dz1'), ['node-a']);
      assert.deepEqual(await names('labelSelector=zone%3Dz2'), []);
      assert.deepEqual(await names('fieldSelector=metadata.name%3Dnode-a'), ['node-a']);
      assert.deepEqual(await names('fieldSelector=metadata.name!%3Dnode-a'), []);
    });

    it('an unknown field selector is a 400 Status, as from the API server', async () => {
      const a = await asAlice('/apis/metrics.k8s.io/v1beta1/pods?fieldSelector=spec.nodeName%3Dnode-a');
      assert.equal(a.status, 400);
      assert.equal(a.json.reason, 'BadRequest');
      assert.match(String(a.json.message), /"spec.nodeName" is not a known field selector/);
      assert.equal((await asAlice('/apis/metrics.k8s.io/v1beta1/pods?labelSelector=%3D%3D')).status, 400);
    });

    it('pods: containers by name, the sandbox dropped, the window between the last two reports', async () => {
      const a = await asAlice('/apis/metrics.k8s.io/v1beta1/namespaces/shop/pods/web-1');
      assert.equal(a.status, 200);
      assert.deepEqual(a.json.containers, [{ name: 'app', usage: { cpu: '250m', memory: '64Mi' } }]);
      assert.equal(a.json.window, '10s');
      assert.deepEqual((a.json.metadata as { labels: unknown }).labels, { app: 'web' });
    });

    it('a pod another node\'s agent reports is not served: an agent speaks only for the pods bound to its node', async () => {
      const a = await asAlice('/apis/metrics.k8s.io/v1beta1/pods');
      assert.deepEqual(a.json.items?.map((p) => `${p.metadata.namespace}/${p.metadata.name}`), ['shop/web-1']);
      assert.equal((await asAlice('/apis/metrics.k8s.io/v1beta1/namespaces/shop/pods/web-2')).status, 404);
    });

    it('a pod with no usage reported yet is left out of lists and 404 when asked for', async () => {
      assert.deepEqual((await asAlice('/apis/metrics.k8s.io/v1beta1/namespaces/tools/pods')).json.items, []);
      const a = await asAlice('/apis/metrics.k8s.io/v1beta1/namespaces/tools/pods/debug');
      assert.equal(a.status, 404);
      assert.equal(a.json.message, 'pods.metrics.k8s.io "tools/debug" not found');
    });

    it('pod selectors, per namespace', async () => {
      const names = async (path: string) => (await asAlice(path)).json.items?.map((p) => p.metadata.name);
      assert.deepEqual(await names('/apis/metrics.k8s.io/v1beta1/namespaces/shop/pods?labelSelector=app%3Dweb'), ['web-1']);
      assert.deepEqual(await names('/apis/metrics.k8s.io/v1beta1/namespaces/shop/pods?labelSelector=app%20notin%20(web)'), []);
      assert.deepEqual(await names('/apis/metrics.k8s.io/v1beta1/pods?fieldSelector=metadata.namespace%3Dshop'), ['web-1']);
      assert.deepEqual(await names('/apis/metrics.k8s.io/v1beta1/namespaces/other/pods'), []);
    });

    it('watch, writes and unknown paths are refused as the API server refuses them', async () => {
      assert.equal((await asAlice('/apis/metrics.k8s.io/v1beta1/pods?watch=true')).status, 405);
      assert.equal((await get('/apis/metrics.k8s.io/v1beta1/nodes/node-a', proxyClient, { 'X-Remote-User': 'alice' }, 'DELETE')).status, 405);
      const openapi = await asAlice('/openapi/v2');
      assert.equal(openapi.status, 404, 'the aggregator skips a 404 OpenAPI document; the APIService stays available');
      assert.equal(openapi.json.kind, 'Status');
    });
  });

  describe('sharded: a replica without the nodes\' usage answers with the replica that holds it', () => {
    // The holder: this file's store, told to the other replica over real HTTPS, on its webhook port's peer routes.
    let holder: FastifyInstance;
    let entry: MetricsApiServer;
    let client: PeerClient;
    let view: ShardView;
    const failures: string[][] = [];
    const self = '127.0.0.1:1';
    let holderMember: { key: string; webhook: string };
    const asAliceAtEntry = (path: string) => get(path, proxyClient, { 'X-Remote-User': 'alice' }, 'GET', false, entry.port);

    before(async () => {
      holder = Fastify({ https: { cert: serving.cert, key: serving.key, requestCert: true, rejectUnauthorized: false } });
      await holder.register(peerPlugin, {
        local: new LocalNodes(store, flagsPolicySource(DEFAULT_POLICY), () => Date.now()),
        certificate: () => serving.cert,
        watch: { streams: () => true, onMembersChange: () => () => {}, stallMs: 30_000 },
        inputs: { keep: () => {}, refused: () => {} },
        metrics: { reader: new MetricsReader({ store, directory, staleAfterMs: () => 40_000 }), now: () => Date.now() },
      });
      await holder.listen({ host: '127.0.0.1', port: 0 });
      holderMember = { key: '127.0.0.1:2', webhook: `127.0.0.1:${(holder.server.address() as { port: number }).port}` };
      client = new PeerClient(() => serving);
      view = new ShardView(1, (key) => key === self);
      view.set([{ key: self, webhook: '127.0.0.1:1' }, holderMember]);
      const peers = new PeerQueries(view, client, 'entry', 2000);
      entry = await buildMetricsApiServer({
        bindAddress: '127.0.0.1', port: 0, tls: serving, handshakeTimeoutMs: 10_000,
        routes: {
          // Holds no node's usage: every item comes from the holder.
          store: new NodeStore({ retainMs: 60_000, forgetAfterMs: GATEWAY_DEFAULTS.forgetAfterMs }),
          directory, staleAfterMs: () => 40_000, trust: () => trust.current(), review: async () => ({ allowed: true, reason: '' }),
          notReady: () => undefined, now: () => Date.now(), log: silentLog,
          peers: { ask: (q) => peers.metrics(q), onFailed: (f) => failures.push(f) },
        },
      });
      trust.onChange(() => entry.trustChanged());
      entry.trustChanged();
      await entry.start();
    });
    after(async () => {
      client?.close();
      await entry?.close();
      await holder?.close();
    });

    it('kubectl top nodes and pods, and a get, as the holder serves them', async () => {
      const nodes = await asAliceAtEntry('/apis/metrics.k8s.io/v1beta1/nodes');
      assert.deepEqual(nodes.json.items?.map((n) => n.metadata.name), ['node-a']);
      assert.deepEqual(nodes.json.items?.[0]?.usage, (await asAlice('/apis/metrics.k8s.io/v1beta1/nodes/node-a')).json.usage);
      const pods = await asAliceAtEntry('/apis/metrics.k8s.io/v1beta1/namespaces/shop/pods?labelSelector=app%3Dweb');
      assert.deepEqual(pods.json.items?.map((p) => `${p.metadata.namespace}/${p.metadata.name}`), ['shop/web-1'], 'the selector applied at the holder; web-2 is still only its own node\'s to report');
      const pod = await asAliceAtEntry('/apis/metrics.k8s.io/v1beta1/namespaces/shop/pods/web-1');
      assert.equal(pod.status, 200);
      assert.deepEqual(pod.json.containers, [{ name: 'app', usage: { cpu: '250m', memory: '64Mi' } }]);
      assert.equal((await asAliceAtEntry('/apis/metrics.k8s.io/v1beta1/nodes/node-b')).status, 404, 'stale at the holder too');
      assert.equal((await asAliceAtEntry('/apis/metrics.k8s.io/v1beta1/pods?labelSelector=%3D%3D')).status, 400, 'a bad selector is still the caller\'s 400');
      assert.deepEqual(failures, []);
    });

    it('the holder refuses a caller without the gateway\'s certificate, and an entry that cannot reach it says so', async () => {
      const refused = await new Promise<number>((resolve, reject) => {
        const req = request({ host: '127.0.0.1', port: Number(holderMember.webhook.split(':')[1]), path: '/shard/v1/metrics', method: 'POST', rejectUnauthorized: false, headers: { 'content-type': 'application/json' } }, (res) => {
          res.resume();
          resolve(res.statusCode ?? 0);
        });
        req.on('error', reject);
        req.end('{"resource":"nodes"}');
      });
      assert.equal(refused, 403);
      view.set([{ key: self, webhook: '127.0.0.1:1' }, { ...holderMember, webhook: '127.0.0.1:1' }]);
      try {
        const nodes = await asAliceAtEntry('/apis/metrics.k8s.io/v1beta1/nodes');
        assert.equal(nodes.status, 200);
        assert.deepEqual(nodes.json.items, [], 'what the replicas that answered hold');
        assert.equal(failures.length, 1);
        assert.match(failures[0]![0]!, /^127\.0\.0\.1:1: /);
      } finally {
        view.set([{ key: self, webhook: '127.0.0.1:1' }, holderMember]);
      }
    });
  });

  it('a rotated front-proxy CA holds on a kept-alive connection: the old certificate is refused, the new one let in', async () => {
    const agent = new Agent({ keepAlive: true, maxSockets: 1 });
    try {
      const viaAgent = (client: Client) => get('/apis/metrics.k8s.io/v1beta1/nodes', client, { 'X-Remote-User': 'alice' }, 'GET', agent);
      assert.equal((await viaAgent(proxyClient)).status, 200);
      const nextCa = await generateCa();
      api.put(CONFIGMAPS, authConfigMap(nextCa, ['front-proxy-client']));
      await eventually(() => (trust.current()?.clientCa === nextCa.cert ? true : undefined), 5000, 'the new CA read');
      assert.equal((await viaAgent(proxyClient)).status, 401, 'the kept connection was verified against the old CA');
      const next = await issueServingCertificate(nextCa, ['front-proxy-client'], new Date(), 30, 'clientAuth');
      assert.equal((await get('/apis/metrics.k8s.io/v1beta1/nodes', next, { 'X-Remote-User': 'alice' })).status, 200);
    } finally {
      agent.destroy();
      api.put(CONFIGMAPS, authConfigMap(proxyCa, ['front-proxy-client']));
    }
  });

  it('a ConfigMap without requestheader-client-ca-file: every caller refused, /readyz says why', async () => {
    api.put(CONFIGMAPS, { metadata: { name: AUTH_CONFIGMAP.name, namespace: AUTH_CONFIGMAP.namespace }, data: { 'client-ca-file': proxyCa.cert } });
    try {
      await eventually(() => (trust.current() === undefined ? true : undefined), 5000, 'the config dropped');
      assert.equal((await asAlice('/apis/metrics.k8s.io/v1beta1/nodes')).status, 401);
      const ready = await get('/readyz', undefined);
      assert.equal(ready.status, 503);
      assert.match(ready.body, /requestheader-client-ca-file/);
    } finally {
      api.put(CONFIGMAPS, authConfigMap(proxyCa, ['front-proxy-client']));
      await eventually(() => trust.current(), 5000, 'the config back');
    }
  });
});

describe('a node\'s figures from its agent\'s summaries (--agent-summaries)', () => {
  it('the mean CPU over the send interval and the time it covers; the newest sample\'s 1 s rate without it', () => {
    const store = new NodeStore({ retainMs: 60_000, forgetAfterMs: GATEWAY_DEFAULTS.forgetAfterMs });
    store.attach('sum-node', 'i1', null, 1);
    const plan = metricsPlan(20_000);
    const mean = { planId: planId(plan), samples: 20, spanMs: 20_000, cpuMillicores: 1234, memoryBytes: 0, cpuPressure: false, memoryPressure: false };
    storeSample(store, 'sum-node', 1, nodeSample(NOW - 21_000, { cpuUsageMillicores: 900, seq: 1 }), NOW - 21_000);
    storeSample(store, 'sum-node', 1, nodeSample(NOW - 1000, { cpuUsageMillicores: 1750, seq: 2, summaries: [mean] }), NOW - 1000);
    const r = store.get('sum-node')!;
    const read = nodeReading(r, NOW, plan);
    assert.deepEqual([read.cpuMillicores, read.windowMs, read.timestampMs], [1234, 20_000, NOW - 1000]);
    // The API without the plan: the newest 1 s rate, over the time since the sample before (20 s apart here).
    assert.deepEqual([nodeReading(r, NOW).cpuMillicores, nodeReading(r, NOW).windowMs], [1750, 20_000]);
    // Another plan's summary is not the metrics API's.
    assert.equal(nodeReading(r, NOW, metricsPlan(10_000)).cpuMillicores, 1750);
    // A newer sample without summaries (an agent rolled back): its own figure, not the older mean.
    storeSample(store, 'sum-node', 1, nodeSample(NOW - 500, { cpuUsageMillicores: 1600, seq: 3 }), NOW - 500);
    assert.deepEqual([nodeReading(r, NOW, plan).cpuMillicores, nodeReading(r, NOW, plan).windowMs], [1600, 500]);
  });
});
