// Least privilege down to fields and names, on the real kube-apiserver, for
// the kustomize and the Helm render: the ValidatingAdmissionPolicies that bind
// the gateway's ServiceAccount on nodes/status (oversell-gateway-node-status)
// and on the objects it creates (oversell-gateway-own-objects), and the Pod
// Security labels of the namespace (the gateway's pod passes "restricted", the
// agent's needs "privileged"). Requests are made as the gateway's
// ServiceAccount by impersonation, with the RBAC the install grants it, so a
// refusal here is the policy's, not RBAC's.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import {
  CoordinationV1Api, CoreV1Api, KubeConfig, PatchStrategy, setHeaderOptions, type V1Node, type V1PodTemplateSpec,
} from '@kubernetes/client-node';
import { pino } from 'pino';
import { HistorySnapshots } from '../../gateway/act/history-snapshots.js';
import { loweringPatch } from '../../gateway/act/status-writer.js';
import { nudgePatch } from '../../gateway/act/kubelet-nudge.js';
import { parseBytes } from '../../lib/quantity.js';
import { decodeLoadHistory } from '../../gateway/decide/load-history-codec.js';
import { LoadHistory } from '../../gateway/decide/load-history.js';
import { NodeStore } from '../../gateway/store/node-store.js';
import { GrantProof } from '../../gateway/decide/grant-proof.js';
import type { Decision, ResourceDecision } from '../../gateway/decide/policy.js';
import { adminConfig, apiFailure, core, objects } from './cluster.js';
import { deleteNamespaceAndWait, eventually } from './fixtures.js';
import { one, render, type Obj, type Render } from './renders.js';

const NS = 'oversell';
const RESTRICTED_NS = 'oversell-e2e-restricted';
const GATEWAY = `system:serviceaccount:${NS}:oversell-gateway`;
const NODE = 'oversell-e2e-gateway-policy';
const GI = 1024n ** 3n;


/** A kubeconfig that acts as the gateway's ServiceAccount, by impersonation. */
function gatewayConfig(): KubeConfig {
  const admin = adminConfig();
  const kc = new KubeConfig();
  kc.loadFromOptions({ clusters: admin.clusters, contexts: admin.contexts, currentContext: admin.currentContext, users: admin.users.map((u) => ({ ...u, impersonateUser: GATEWAY })) });
  return kc;
}

/** A client of this API as the gateway's ServiceAccount. */
function asGateway<T>(api: new (config: never) => T): T {
  return gatewayConfig().makeApiClient(api as never) as T;
}

type Outcome = { ok: true } | { ok: false; code: number; message: string };
async function outcome(call: () => Promise<unknown>): Promise<Outcome> {
  try {
    await call();
    return { ok: true };
  } catch (err) {
    return apiFailure(err);
  }
}

const jsonPatch = setHeaderOptions('Content-Type', PatchStrategy.JsonPatch);
const patchStatus = (api: CoreV1Api, body: object[], dryRun?: 'All') => outcome(() => api.patchNodeStatus({ name: NODE, body, ...(dryRun && { dryRun }) }, jsonPatch));

// The node as the webhook leaves it: raw 4 cores / 8 GiB recorded, 6 / 12Gi granted.
const RAW = { cpu: '4', memory: '8Gi' };
function nodeObject(): V1Node {
  return {
    metadata: {
      name: NODE,
      labels: { 'e2e.oversell.io/owner': 'gateway-policy' },
      annotations: {
        'example.com/owner': 'team-a',
        'oversell.io/raw-allocatable-cpu': RAW.cpu,
        'oversell.io/raw-allocatable-memory': RAW.memory,
        'oversell.io/granted-allocatable-cpu': '6',
        'oversell.io/granted-allocatable-memory': '12Gi',
        'oversell.io/reason': 'e2e',
      },
    },
    status: {
      capacity: { cpu: '4', memory: '8Gi', pods: '110' },
      allocatable: { cpu: '6', memory: '12Gi', pods: '110' },
      conditions: [{ type: 'Ready', status: 'True', reason: 'KubeletReady', message: 'kubelet is posting ready status' }],
      addresses: [{ type: 'InternalIP', address: '198.18.0.10' }, { type: 'Hostname', address: NODE }],
    },
  };
}

// What a stolen gateway token would do to a node, each refused by oversell-gateway-node-status.
const FORBIDDEN_NODE: Array<[string, object[], RegExp]> = [
  ['mark the node NotReady (a condition)', [{ op: 'replace', path: '/status/conditions/0/status', value: 'False' }], /only allocatable cpu\/memory of a node's status/],
  ['change an address', [{ op: 'replace', path: '/status/addresses/0/address', value: '198.18.0.99' }], /only allocatable cpu\/memory of a node's status/],
  ['change capacity', [{ op: 'replace', path: '/status/capacity/cpu', value: '64' }], /only allocatable cpu\/memory of a node's status/],
  ['raise allocatable cpu', [{ op: 'replace', path: '/status/allocatable/cpu', value: '7' }], /only lower allocatable/],
  ['raise allocatable memory', [{ op: 'replace', path: '/status/allocatable/memory', value: '13Gi' }], /only lower allocatable/],
  ['lower allocatable cpu below the recorded raw', [{ op: 'replace', path: '/status/allocatable/cpu', value: '3999m' }], /below the node's raw allocatable/],
  ['lower allocatable memory below the recorded raw', [{ op: 'replace', path: '/status/allocatable/memory', value: '7Gi' }], /below the node's raw allocatable/],
  ['move the raw record down, then allocatable with it', [
    { op: 'replace', path: '/metadata/annotations/oversell.io~1raw-allocatable-cpu', value: '1' },
    { op: 'replace', path: '/status/allocatable/cpu', value: '1' },
  ], /never its oversell.io\/raw-allocatable-\* record/],
  ['change allocatable pods', [{ op: 'replace', path: '/status/allocatable/pods', value: '500' }], /other allocatable resources stay/],
  ['change an annotation outside oversell.io/', [{ op: 'replace', path: '/metadata/annotations/example.com~1owner', value: 'attacker' }], /only oversell.io\/ annotations/],
  ['add an annotation outside oversell.io/', [{ op: 'add', path: '/metadata/annotations/example.com~1x', value: 'y' }], /only oversell.io\/ annotations/],
  ['add a label', [{ op: 'add', path: '/metadata/labels/oversell.io~1enabled', value: 'true' }], /labels, owners, finalizers and spec stay/],
];

/** The status writer's own write (gateway/act/status-writer.ts loweringPatch): CPU down to 5, memory's rise left out. */
function statusWriterPatch(node: V1Node): object[] {
  const resource = (raw: bigint, applied: bigint): ResourceDecision => ({ raw, granted: applied, applied, decidedBy: 'headroom', floor: raw, cap: raw * 2n, requestsOverCap: false, usage: undefined, headroom: undefined, loadFactor: undefined, avoided: undefined });
  const decision: Decision = { cpu: resource(4000n, 5000n), memory: resource(8n * GI, 14n * GI), policy: 'default', dryRun: false, reason: 'e2e: lowered ahead of the kubelet' };
  const facts = { name: NODE, incoming: { cpuMillicores: 6000n, memoryBytes: 12n * GI }, capacity: { cpuMillicores: 4000n, memoryBytes: 8n * GI }, annotations: node.metadata?.annotations };
  const held = { cpu: node.status?.allocatable?.cpu ?? '', memory: node.status?.allocatable?.memory ?? '' };
  return loweringPatch(facts, held, { cpuMillicores: 4000n, memoryBytes: 8n * GI }, decision, new GrantProof(randomBytes(32)));
}

/** The policies that bind the gateway's ServiceAccount in every certificate mode (deploy/base/gateway-policy.yaml). */
const GATEWAY_POLICIES = ['oversell-gateway-node-status', 'oversell-gateway-own-objects', 'oversell-gateway-node-events'];

const created: Obj[] = [];
let createdNamespace = false;
const remove = (o: Obj) => objects().delete(o).then(() => undefined, () => undefined);

describe('the gateway bound down to fields and names on the real API server (ValidatingAdmissionPolicies, Pod Security)', { timeout: 10 * 60_000 }, () => {
  const renders: Render[] = [];

  before(async () => {
    renders.push(render('kustomize'), render('helm'));
    const [kustomize] = renders as [Render];
    // The namespace as deploy/ ships it (its Pod Security labels), unless it exists.
    const namespace = one(kustomize, 'Namespace', NS);
    createdNamespace = await objects().create(namespace).then(() => true, (e: { code?: number }) => {
      if (e.code !== 409) throw e;
      return false;
    });
    if (!createdNamespace) {
      await core().patchNamespace({ name: NS, body: { metadata: { labels: (namespace.metadata as { labels: Record<string, string> }).labels } } }, setHeaderOptions('Content-Type', PatchStrategy.MergePatch));
    }
    // The gateway's and agent's RBAC as installed (kustomize and Helm grant the same: test/deploy/check.sh).
    for (const [kind, name] of [
      ['ServiceAccount', 'oversell-gateway'], ['ServiceAccount', 'oversell-agent'],
      ['ClusterRole', 'oversell-gateway'], ['ClusterRoleBinding', 'oversell-gateway'],
      ['Role', 'oversell-gateway'], ['RoleBinding', 'oversell-gateway'],
      ['Role', 'oversell-gateway-tls'], ['RoleBinding', 'oversell-gateway-tls'],
      // Events about Nodes, in namespace default.
      ['Role', 'oversell-gateway-events'], ['RoleBinding', 'oversell-gateway-events'],
    ] as const) {
      const o = one(kustomize, kind, name);
      await remove(o);
      created.push(o);
      await objects().create(o);
    }
    await core().deleteNode({ name: NODE }).catch(() => {});
    await core().createNode({ body: nodeObject() });
  });

  after(async () => {
    for (const o of created.reverse()) await remove(o);
    await core().deleteNode({ name: NODE }).catch(() => {});
    await core().deleteNamespacedConfigMap({ namespace: NS, name: 'oversell-gateway-ca' }).catch(() => {});
    await deleteNamespaceAndWait(RESTRICTED_NS, 90_000).catch(() => {});
    if (createdNamespace) await deleteNamespaceAndWait(NS, 90_000);
  });

  for (const path of ['kustomize', 'helm'] as const) {
    describe(`the policies rendered by ${path}`, () => {
      const mine: Obj[] = [];
      const gatewayCore = () => asGateway(CoreV1Api);

      before(async () => {
        const r = renders.find((x) => x.path === path)!;
        for (const name of GATEWAY_POLICIES) {
          mine.push(one(r, 'ValidatingAdmissionPolicy', name), one(r, 'ValidatingAdmissionPolicyBinding', name));
        }
        for (const o of mine) {
          await remove(o);
          created.push(o);
          await objects().create(o);
        }
        // In force (a dry run goes through admission too): a label change by the gateway is refused.
        await eventually('the node-status policy to refuse', async () => ((await patchStatus(gatewayCore(), FORBIDDEN_NODE.at(-1)![1], 'All')).ok ? undefined : true), 60_000);
        await eventually('the own-objects policy to refuse', async () => ((await outcome(() => gatewayCore().createNamespacedSecret({ namespace: NS, body: { metadata: { name: 'not-the-gateways' } }, dryRun: 'All' }))).ok ? undefined : true), 60_000);
        await eventually('the node-events policy to refuse', async () => ((await outcome(() => gatewayCore().createNamespacedEvent({ namespace: 'default', body: { metadata: { generateName: 'x.' }, involvedObject: { kind: 'Pod', name: 'x', namespace: 'default' }, reason: 'Spoofed' }, dryRun: 'All' }))).ok ? undefined : true), 60_000);
      });

      after(async () => {
        for (const o of mine.reverse()) await remove(o);
        // Out of force before the next path's turn, so its refusals are its own.
        await eventually('the policies to be out of force', async () => ((await patchStatus(gatewayCore(), FORBIDDEN_NODE.at(-1)![1], 'All')).ok ? true : undefined), 60_000);
      });

      it('each type-checks against the API server\'s schema without warnings', async () => {
        for (const name of GATEWAY_POLICIES) {
          const stored = await eventually(`${name}'s type check`, async () => {
            const p = (await objects().read({ apiVersion: 'admissionregistration.k8s.io/v1', kind: 'ValidatingAdmissionPolicy', metadata: { name } })) as { metadata?: { generation?: number }; status?: { observedGeneration?: number; typeChecking?: { expressionWarnings?: unknown[] } } };
            return p.status?.observedGeneration === p.metadata?.generation ? p : undefined;
          });
          assert.deepEqual(stored.status?.typeChecking?.expressionWarnings ?? [], [], name);
        }
      });

      for (const [what, patch, message] of FORBIDDEN_NODE) {
        it(`refuses the gateway's attempt to ${what}`, async () => {
          const r = await patchStatus(gatewayCore(), patch);
          assert.equal(r.ok, false, `the gateway could ${what}`);
          if (!r.ok) {
            assert.equal(r.code, 403, r.message);
            assert.match(r.message, /oversell-gateway-node-status/);
            assert.match(r.message, message);
          }
        });
      }

      it('allows the status writer\'s own lowering write (loweringPatch), and it is stored: CPU lowered, memory and everything else as before', async () => {
        const before = await core().readNode({ name: NODE });
        const r = await patchStatus(gatewayCore(), statusWriterPatch(before));
        assert.deepEqual(r, { ok: true });
        const stored = await core().readNode({ name: NODE });
        assert.equal(stored.status?.allocatable?.cpu, '5');
        assert.equal(stored.status?.allocatable?.memory, '12Gi');
        // Unchanged by this write (the node controller may have marked them Unknown meanwhile: no kubelet heartbeats here).
        assert.deepEqual(stored.status?.conditions?.map((c) => [c.type, c.status]), before.status?.conditions?.map((c) => [c.type, c.status]));
        assert.equal(stored.metadata?.annotations?.['example.com/owner'], 'team-a');
        assert.equal(stored.metadata?.annotations?.['oversell.io/granted-allocatable-cpu'], '5');
        // Down to exactly the recorded raw is allowed too.
        assert.deepEqual(await patchStatus(gatewayCore(), [{ op: 'replace', path: '/status/allocatable/memory', value: '8Gi' }]), { ok: true });
        // Back to the inflated node for the next path (as admin: the policy binds only the gateway).
        await core().patchNodeStatus({ name: NODE, body: [
          { op: 'replace', path: '/status/allocatable/cpu', value: '6' },
          { op: 'replace', path: '/status/allocatable/memory', value: '12Gi' },
        ] }, jsonPatch);
      });

      it('allows the kubelet nudge (kubelet-nudge.ts): memory one byte below what the node holds, even at the recorded raw; two bytes there are refused', async () => {
        await core().patchNodeStatus({ name: NODE, body: [{ op: 'replace', path: '/status/allocatable/memory', value: RAW.memory }] }, jsonPatch);
        try {
          const twoBytes = await patchStatus(gatewayCore(), [{ op: 'replace', path: '/status/allocatable/memory', value: String(8n * GI - 2n) }]);
          assert.equal(twoBytes.ok, false, 'two bytes below the recorded raw');
          if (!twoBytes.ok) assert.match(twoBytes.message, /below the node's raw allocatable/);
          assert.deepEqual(await patchStatus(gatewayCore(), nudgePatch(RAW.memory)), { ok: true });
          const stored = await core().readNode({ name: NODE });
          assert.equal(parseBytes(stored.status?.allocatable?.memory, 'memory'), 8n * GI - 1n);
          assert.equal(stored.status?.allocatable?.cpu, '6', 'CPU as it was');
          assert.equal(stored.metadata?.annotations?.['oversell.io/raw-allocatable-memory'], RAW.memory, 'the raw record as it was');
        } finally {
          await core().patchNodeStatus({ name: NODE, body: [{ op: 'replace', path: '/status/allocatable/memory', value: '12Gi' }] }, jsonPatch);
        }
      });

      it('binds only the gateway: an administrator may still raise allocatable', async () => {
        assert.deepEqual(await patchStatus(core(), [{ op: 'replace', path: '/status/allocatable/cpu', value: '7' }], 'All'), { ok: true });
      });

      it('lets the gateway create only its own ConfigMap, Secrets and Lease, by name (RBAC alone allows any name)', async () => {
        const gw = gatewayCore();
        const leases = asGateway(CoordinationV1Api);
        const cm = (name: string, labels?: Record<string, string>) => outcome(() => gw.createNamespacedConfigMap({ namespace: NS, body: { metadata: { name, ...(labels && { labels }) }, data: { 'ca.crt': 'x' } }, dryRun: 'All' }));
        const secret = (name: string) => outcome(() => gw.createNamespacedSecret({ namespace: NS, body: { metadata: { name }, data: {} }, dryRun: 'All' }));
        const lease = (name: string) => outcome(() => leases.createNamespacedLease({ namespace: NS, body: { metadata: { name }, spec: { holderIdentity: 'e2e' } }, dryRun: 'All' }));

        assert.deepEqual(await cm('oversell-gateway-ca'), { ok: true });
        assert.deepEqual(await secret('oversell-gateway-proof-key'), { ok: true });
        assert.deepEqual(await secret('oversell-gateway-tls'), { ok: true }, 'self-managed certificates (both renders\' default)');
        assert.deepEqual(await lease('oversell-gateway'), { ok: true });

        for (const [what, r, message] of [
          ['a ConfigMap of another name', await cm('oversell-gateway-ca2'), /only its own configmaps in namespace oversell \(oversell-gateway-ca, oversell-load-history-0 to -63\), not oversell\/oversell-gateway-ca2/],
          ['a default sidecar template', await cm('evil-sidecar', { 'oversell.io/sidecar-template': 'true' }), /only its own configmaps/],
          ['its own ConfigMap labelled as a sidecar template', await cm('oversell-gateway-ca', { 'oversell.io/sidecar-template': 'true' }), /may not create or label a sidecar template/],
          ['a Secret of another name', await secret('registry-credentials'), /only its own secrets in namespace oversell/],
          ['a Lease of another name', await lease('kube-scheduler'), /only its own leases in namespace oversell/],
        ] as const) {
          assert.equal(r.ok, false, `the gateway could create ${what}`);
          if (!r.ok) {
            assert.equal(r.code, 403, r.message);
            assert.match(r.message, message);
          }
        }
      });

      it('lets the gateway write in namespace default only the Events it writes (BoundRequestsOverCap on a Node); RBAC alone allows any Event there', async () => {
        const gw = gatewayCore();
        const at = new Date();
        const own = {
          metadata: { generateName: 'node-a.oversell-over-cap.' },
          involvedObject: { apiVersion: 'v1', kind: 'Node', name: 'node-a' },
          reason: 'BoundRequestsOverCap', message: 'bound requests exceed the cap', type: 'Warning',
          source: { component: 'oversell-gateway' }, reportingComponent: 'oversell.io/gateway', reportingInstance: 'gw-0', firstTimestamp: at, lastTimestamp: at, count: 1,
        };
        const event = (body: typeof own | Record<string, unknown>) => outcome(() => gw.createNamespacedEvent({ namespace: 'default', body: body as typeof own, dryRun: 'All' }));
        assert.deepEqual(await event(own), { ok: true }, 'the status writer\'s own Event (gateway/act/status-writer.ts)');
        assert.deepEqual(await event({ ...own, reason: 'PodRelieved', message: 'oversell evicted apps/batch-1 through the Eviction API' }), { ok: true }, 'relief\'s own Event (gateway/act/relief-actor.ts)');
        for (const [what, body] of [
          ['an Event on a Pod', { ...own, involvedObject: { apiVersion: 'v1', kind: 'Pod', namespace: 'default', name: 'web-1' } }],
          ['an Event in the kubelet\'s name', { ...own, reason: 'Killing', source: { component: 'kubelet', host: 'node-a' }, reportingComponent: 'kubelet' }],
          ['a Normal Event of another reason', { ...own, reason: 'NodeReady', type: 'Normal' }],
        ] as const) {
          const r = await event(body);
          assert.equal(r.ok, false, `the gateway could create ${what}`);
          if (!r.ok) {
            assert.equal(r.code, 403, r.message);
            assert.match(r.message, /may write only Warning BoundRequestsOverCap and PodRelieved Events on a Node/);
          }
        }
      });

      it('refuses the gateway labelling its CA ConfigMap as a sidecar template (an update RBAC allows by name)', async () => {
        await core().deleteNamespacedConfigMap({ namespace: NS, name: 'oversell-gateway-ca' }).catch(() => {});
        const cm = await core().createNamespacedConfigMap({ namespace: NS, body: { metadata: { name: 'oversell-gateway-ca' }, data: { 'ca.crt': 'x' } } });
        try {
          const gw = gatewayCore();
          const relabelled = { ...cm, metadata: { ...cm.metadata, labels: { 'oversell.io/sidecar-template': 'true' } } };
          const r = await outcome(() => gw.replaceNamespacedConfigMap({ namespace: NS, name: 'oversell-gateway-ca', body: relabelled }));
          assert.equal(r.ok, false);
          if (!r.ok) assert.match(r.message, /may not create or label a sidecar template/);
          // What gateway/tls/ca-bundle.ts does, a new ca.crt, is allowed.
          assert.deepEqual(await outcome(() => gw.replaceNamespacedConfigMap({ namespace: NS, name: 'oversell-gateway-ca', body: { ...cm, data: { 'ca.crt': 'y' } } })), { ok: true });
        } finally {
          await core().deleteNamespacedConfigMap({ namespace: NS, name: 'oversell-gateway-ca' }).catch(() => {});
        }
      });

      it('lets the gateway keep load histories in oversell-load-history-0 to -63 (the writer\'s own create and update), no other name, and never over a sidecar template', async () => {
        const gw = gatewayCore();
        const shard = (name: string, labels: Record<string, string> = {}) =>
          outcome(() => gw.createNamespacedConfigMap({ namespace: NS, body: { metadata: { name, labels: { 'oversell.io/load-history': 'v1', ...labels } }, binaryData: { n: 'AQ==' } }, dryRun: 'All' }));
        assert.deepEqual(await shard('oversell-load-history-0'), { ok: true });
        assert.deepEqual(await shard('oversell-load-history-63'), { ok: true });
        for (const [name, labels, message] of [
          ['oversell-load-history-64', {}, /only its own configmaps/],
          ['oversell-load-history-01', {}, /only its own configmaps/],
          ['oversell-load-history-x', {}, /only its own configmaps/],
          ['oversell-load-history-2', { 'oversell.io/sidecar-template': 'true' }, /may not create or label a sidecar template/],
        ] as const) {
          const r = await shard(name, labels);
          assert.equal(r.ok, false, `the gateway could create ${name} ${JSON.stringify(labels)}`);
          if (!r.ok) assert.match(r.message, message);
        }

        const cleanup = async () => {
          for (const name of ['oversell-load-history-0', 'oversell-load-history-1']) await core().deleteNamespacedConfigMap({ namespace: NS, name }).catch(() => {});
        };
        await cleanup();
        try {
          // The real writer as the gateway: a create, then an update of the same shard.
          const history = new LoadHistory(24 * 3_600_000);
          for (let t = 1; t <= 360; t++) history.record(t * 10_000, 0.5, 0.6);
          const store = new NodeStore({ retainMs: 600_000, forgetAfterMs: 3_600_000 });
          store.seedHistory('e2e-node', history);
          const nodes = [{ metadata: { name: 'e2e-node' } }];
          const snapshots = () => new HistorySnapshots({
            kubeConfig: gatewayConfig(), namespace: NS, store, nodes: { list: () => nodes, get: () => nodes[0] }, lease: { isLeader: true }, log: pino({ level: 'silent' }), everyMs: 60_000,
          });
          const writer = snapshots();
          await writer.load();
          assert.equal(await writer.write(), 1);
          assert.equal(await writer.write(), 1, 'the second write updates the shard');
          const stored = await core().readNamespacedConfigMap({ namespace: NS, name: 'oversell-load-history-0' });
          const decoded = decodeLoadHistory(Buffer.from(stored.binaryData?.['e2e-node'] ?? '', 'base64'));
          assert.ok('history' in decoded && decoded.history.spanMs() === history.spanMs(), JSON.stringify(decoded));
          assert.deepEqual(await snapshots().load(), { seeded: 0, keptOwn: 0, held: 1, refused: 0 }, 'a replica reads it back as the gateway');

          // A sidecar template that carries a shard's name: RBAC names it, the policy still refuses to rewrite it.
          const template = await core().createNamespacedConfigMap({ namespace: NS, body: { metadata: { name: 'oversell-load-history-1', labels: { 'oversell.io/sidecar-template': 'true' } }, data: { template: 'x' } } });
          const unlabelled = { ...template, metadata: { ...template.metadata, labels: { 'oversell.io/load-history': 'v1' } }, data: {}, binaryData: { n: 'AQ==' } };
          const r = await outcome(() => gw.replaceNamespacedConfigMap({ namespace: NS, name: 'oversell-load-history-1', body: unlabelled }));
          assert.equal(r.ok, false, 'the gateway rewrote a sidecar template');
          if (!r.ok) assert.match(r.message, /may not change a sidecar template/);
        } finally {
          await cleanup();
        }
      });
    });
  }

  describe('Pod Security: the gateway passes "restricted", the agent needs the privileged namespace it gets', () => {
    const podOf = (r: Render, kind: 'Deployment' | 'DaemonSet', name: string, namespace: string) => {
      const template = (one(r, kind, name).spec as { template: V1PodTemplateSpec }).template;
      return { metadata: { name: `${name}-pss-e2e`, namespace, labels: template.metadata?.labels }, spec: template.spec! };
    };

    before(async () => {
      await deleteNamespaceAndWait(RESTRICTED_NS, 90_000).catch(() => {});
      await core().createNamespace({ body: { metadata: { name: RESTRICTED_NS, labels: { 'pod-security.kubernetes.io/enforce': 'restricted', 'pod-security.kubernetes.io/enforce-version': 'latest' } } } });
      for (const sa of ['oversell-gateway', 'oversell-agent']) await core().createNamespacedServiceAccount({ namespace: RESTRICTED_NS, body: { metadata: { name: sa } } });
    });

    for (const path of ['kustomize', 'helm'] as const) {
      it(`${path}: the gateway's pod is admitted where "restricted" is enforced; the agent's is refused there for its hostPath`, async () => {
        const r = renders.find((x) => x.path === path)!;
        const gateway = await outcome(() => core().createNamespacedPod({ namespace: RESTRICTED_NS, body: podOf(r, 'Deployment', 'oversell-gateway', RESTRICTED_NS), dryRun: 'All' }));
        assert.deepEqual(gateway, { ok: true });
        const agent = await outcome(() => core().createNamespacedPod({ namespace: RESTRICTED_NS, body: podOf(r, 'DaemonSet', 'oversell-agent', RESTRICTED_NS), dryRun: 'All' }));
        assert.equal(agent.ok, false, 'the agent passed "restricted": the namespace could be restricted');
        if (!agent.ok) assert.match(agent.message, /violates PodSecurity "restricted:latest".*hostPath/);
      });
    }

    it('deploy/\'s namespace labels admit the agent (privileged, for its hostPath) and the gateway', async () => {
      const [kustomize] = renders as [Render];
      for (const [kind, name] of [['DaemonSet', 'oversell-agent'], ['Deployment', 'oversell-gateway']] as const) {
        assert.deepEqual(await outcome(() => core().createNamespacedPod({ namespace: NS, body: podOf(kustomize, kind, name, NS), dryRun: 'All' })), { ok: true }, name);
      }
    });
  });
});
