// deploy/components/hold-while-gateway-down on the real kube-apiserver, as
// shipped (failurePolicy Ignore): what it does to a kubelet's status write in
// each state of the gateway Service's EndpointSlice, and what it can never do
// (security.md, invariant 40). The kubelet is played by a node client
// certificate, its writes dry-run; the restart itself is in
// gateway-down-restart.e2e on the real node.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { PatchStrategy, setHeaderOptions, type V1EndpointSlice, type V1Node } from '@kubernetes/client-node';
import yaml from 'js-yaml';
import { ANNOTATION } from '../../gateway/decide/trusted-raw.js';
import { REPO, core, kubeletCredentials, kubeletPatchStatus, objects, type Credentials } from './cluster.js';
import { deleteNamespaceAndWait, eventually } from './fixtures.js';

const NS = 'oversell';
const NODE = 'e2e-hold';
const SLICE = 'oversell-gateway-hold-e2e';
const POLICY = join(REPO, 'deploy/components/hold-while-gateway-down/policy.yaml');
const GRANT = { cpu: '6', memory: '12Gi' };
const RAW = { cpu: '4', memory: '8Gi' };

type K8sObject = { apiVersion: string; kind: string; metadata: { name: string; namespace?: string } };
const shipped = () => yaml.loadAll(readFileSync(POLICY, 'utf8')) as K8sObject[];

const jsonPatch = setHeaderOptions('Content-Type', PatchStrategy.JsonPatch);

let creds: Credentials;
let createdNamespace = false;

/** The gateway Service's EndpointSlice: `ready` per endpoint; undefined: no slice at all. */
async function gatewayEndpoints(ready: boolean[] | undefined): Promise<void> {
  await objects().delete({ apiVersion: 'discovery.k8s.io/v1', kind: 'EndpointSlice', metadata: { name: SLICE, namespace: NS } }).catch(() => {});
  if (!ready) return;
  const slice: V1EndpointSlice & K8sObject = {
    apiVersion: 'discovery.k8s.io/v1',
    kind: 'EndpointSlice',
    metadata: { name: SLICE, namespace: NS, labels: { 'kubernetes.io/service-name': 'oversell-gateway' } },
    addressType: 'IPv4',
    endpoints: ready.map((r, i) => ({ addresses: [`10.0.0.${i + 1}`], conditions: { ready: r } })),
  };
  await objects().create(slice);
}

/** The node as stored: allocatable at the grant oversell recorded, the grant annotations as the webhook writes them. */
async function storedGranted(annotations: Record<string, string> = {}): Promise<void> {
  await core().patchNode({ name: NODE, body: [{ op: 'replace', path: '/metadata/annotations', value: { [ANNOTATION.grantedCpu]: GRANT.cpu, [ANNOTATION.grantedMemory]: GRANT.memory, ...annotations } }] }, jsonPatch);
  await core().patchNodeStatus({ name: NODE, body: [{ op: 'replace', path: '/status', value: { capacity: { cpu: '8', memory: '16Gi', pods: '110' }, allocatable: { ...GRANT, pods: '110' } } }] }, jsonPatch);
}

/** What the API server would store for the kubelet's write of `allocatable` (dry run). */
async function kubeletWrites(allocatable: Record<string, string>): Promise<Record<string, string>> {
  const res = await kubeletPatchStatus(creds, NODE, { allocatable }, { dryRun: true });
  assert.equal(res.status, 200, JSON.stringify(res.body));
  return res.body.status?.allocatable ?? {};
}

describe('hold-while-gateway-down on a real kube-apiserver', { timeout: 3 * 60_000 }, () => {
  before(async () => {
    createdNamespace = await core().createNamespace({ body: { metadata: { name: NS } } }).then(() => true, (e: { code?: number }) => {
      if (e.code !== 409) throw e;
      return false;
    });
    await core().deleteNode({ name: NODE }).catch(() => {});
    await eventually(`node ${NODE} gone`, () => core().readNode({ name: NODE }).then(() => undefined, () => true));
    const node: V1Node = { metadata: { name: NODE } };
    await core().createNode({ body: node });
    creds = kubeletCredentials(NODE);
    for (const o of shipped()) {
      await objects().delete(o).catch(() => {});
      await objects().create(o);
    }
  });

  after(async () => {
    for (const o of shipped()) await objects().delete(o).catch(() => {});
    await gatewayEndpoints(undefined);
    await core().deleteNode({ name: NODE }).catch(() => {});
    if (createdNamespace) await deleteNamespaceAndWait(NS, 120_000).catch(() => {});
  });

  it('no ready gateway: the kubelet\'s lower write keeps the stored grant, cpu and memory each; anything else of the write is its own', async () => {
    await storedGranted();
    await gatewayEndpoints([]);
    // The policy and its binding reach the API server's admission through an informer.
    const held = await eventually('the kubelet\'s raw write held at the grant', async () => {
      const a = await kubeletWrites({ ...RAW, pods: '100' });
      return a.memory === GRANT.memory ? a : undefined;
    }, 30_000);
    assert.deepEqual(held, { ...GRANT, pods: '100' });
    // A write above the grant is the kubelet's own (never lowered either).
    assert.deepEqual(await kubeletWrites({ cpu: '7', memory: '13Gi', pods: '110' }), { cpu: '7', memory: '13Gi', pods: '110' });
    // Only the lowered resource is held.
    assert.deepEqual(await kubeletWrites({ cpu: '4', memory: '13Gi', pods: '110' }), { cpu: '6', memory: '13Gi', pods: '110' });
    // Not-ready endpoints only (a draining replica) are no gateway either.
    await gatewayEndpoints([false, false]);
    assert.equal((await kubeletWrites({ ...RAW, pods: '110' })).memory, GRANT.memory);
  });

  it('a ready gateway, or no gateway installed: the kubelet\'s write is stored as it came, so the webhook sees its own raw', async () => {
    await storedGranted();
    await gatewayEndpoints([false, true]);
    assert.deepEqual(await kubeletWrites({ ...RAW, pods: '110' }), { ...RAW, pods: '110' });
    await gatewayEndpoints(undefined);
    assert.deepEqual(await kubeletWrites({ ...RAW, pods: '110' }), { ...RAW, pods: '110' });
  });

  it('never raises: a forged grant annotation above what is stored holds nothing, and only the node\'s own kubelet is held', async () => {
    await gatewayEndpoints([]);
    await storedGranted({ [ANNOTATION.grantedMemory]: '64Gi', [ANNOTATION.grantedCpu]: '64' });
    assert.deepEqual(await kubeletWrites({ ...RAW, pods: '110' }), { ...RAW, pods: '110' }, 'stored is not the recorded grant: not held');
    // Another node's kubelet cannot write this node's status (NodeRestriction); an admin's write is not the kubelet's.
    await storedGranted();
    const admin = await core().patchNodeStatus({ name: NODE, dryRun: 'All', body: [{ op: 'replace', path: '/status/allocatable/memory', value: RAW.memory }] }, jsonPatch);
    assert.equal(admin.status?.allocatable?.memory, RAW.memory, 'an admin lowering allocatable is not held');
  });
});
