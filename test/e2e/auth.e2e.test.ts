// Who may talk to the gateway, asked of a real kube-apiserver: agents stream
// over TLS with a projected-style token (TokenRequest bound to their pod,
// audience oversell-gateway) that TokenReview accepts and binds to the pod's
// node; query callers need RBAC on nodeusages.oversell.io (SubjectAccessReview)
// through the ClusterRole shipped in deploy/base/rbac.yaml.
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import * as grpc from '@grpc/grpc-js';
import { loadAllYaml, type KubernetesObject } from '@kubernetes/client-node';
import type { NodeUsageClient } from '../../proto/gen/oversell/v1/NodeUsage.js';
import { oversellV1 } from '../../proto/load.js';
import { scrapeMetric } from '../helpers/metrics.js';
import { ADMIN_KUBECONFIG, REPO, core, objects } from './cluster.js';
import { eventually, fakeNode, startGatewayProcess, type FakeNode, type GatewayProc } from './fixtures.js';

const NS = 'oversell-e2e-auth';
const work = mkdtempSync(join(tmpdir(), 'oversell-e2e-auth-'));
const tlsDir = join(work, 'tls');
let gateway: GatewayProc;
const nodes: FakeNode[] = [];
const created: KubernetesObject[] = [];

async function create<T extends KubernetesObject>(o: T): Promise<T> {
  const made = (await objects().create(o)) as T;
  created.push(o);
  return made;
}

/** A token for a ServiceAccount from the TokenRequest API, as the kubelet gets one for a projected volume. */
async function tokenFor(serviceAccount: string, opts: { audience?: string; pod?: { name: string; uid: string } } = {}): Promise<string> {
  const res = await core().createNamespacedServiceAccountToken({
    name: serviceAccount,
    namespace: NS,
    body: {
      spec: {
        // Empty: the API server's own audience.
        audiences: opts.audience ? [opts.audience] : [],
        expirationSeconds: 600,
        ...(opts.pod && { boundObjectRef: { apiVersion: 'v1', kind: 'Pod', name: opts.pod.name, uid: opts.pod.uid } }),
      },
    },
  });
  assert.ok(res.status?.token, 'TokenRequest returned a token');
  return res.status.token;
}

/** An agent pod bound to a node (never started: kwok has no kubelet to run it), for its token to name. */
async function agentPod(name: string, nodeName: string): Promise<{ name: string; uid: string }> {
  const p = await core().createNamespacedPod({
    namespace: NS,
    body: { metadata: { name }, spec: { nodeName, serviceAccountName: 'oversell-agent', containers: [{ name: 'agent', image: 'oversell:test' }] } },
  });
  return { name, uid: p.metadata?.uid ?? '' };
}

function queryClient(token?: string): { client: NodeUsageClient; md: grpc.Metadata } {
  const client = new (oversellV1().NodeUsage)(`127.0.0.1:${gateway.ports.grpc}`, grpc.credentials.createSsl(Buffer.from(gateway.ca)), { 'grpc.ssl_target_name_override': 'localhost' });
  const md = new grpc.Metadata();
  if (token) md.set('authorization', `Bearer ${token}`);
  return { client, md };
}
const list = (token?: string) =>
  new Promise<string[]>((resolve, reject) => {
    const { client, md } = queryClient(token);
    client.ListNodes({}, md, (err, res) => {
      client.close();
      if (err) reject(err);
      else resolve((res?.nodes ?? []).map((n) => n.name));
    });
  });

/** Refusals of an agent claiming another node so far: 0 before the first (the series exists from then on). */
const nodeMismatches = async () => {
  const n = await scrapeMetric(gateway.ports.metrics, 'oversell_auth_refusals_total', '{api="agent-stream",reason="node-mismatch"}');
  return Number.isFinite(n) ? n : 0;
};

function tokenFile(name: string, token: string): string {
  const file = join(work, name);
  writeFileSync(file, token);
  return file;
}

const tlsArgs = (file: string) => ['--gateway-ca-file', join(tlsDir, 'ca.crt'), '--gateway-server-name', 'localhost', '--token-file', file];

describe('authenticated agents and query callers on a real control plane', { timeout: 5 * 60_000 }, () => {
  before(async () => {
    await create({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: NS } });
    await create({ apiVersion: 'v1', kind: 'ServiceAccount', metadata: { name: 'oversell-agent', namespace: NS } });
    await create({ apiVersion: 'v1', kind: 'ServiceAccount', metadata: { name: 'viewer', namespace: NS } });
    await create({ apiVersion: 'v1', kind: 'ServiceAccount', metadata: { name: 'nobody', namespace: NS } });
    // The viewer role exactly as shipped.
    const shipped = loadAllYaml(readFileSync(join(REPO, 'deploy/base/rbac.yaml'), 'utf8')) as KubernetesObject[];
    const viewerRole = shipped.find((o) => o.kind === 'ClusterRole' && o.metadata?.name === 'oversell-viewer');
    assert.ok(viewerRole, 'deploy/base/rbac.yaml ships ClusterRole oversell-viewer');
    await create({ ...viewerRole, metadata: { name: 'oversell-viewer-e2e' } });
    await create({
      apiVersion: 'rbac.authorization.k8s.io/v1', kind: 'ClusterRoleBinding', metadata: { name: 'oversell-viewer-e2e' },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'oversell-viewer-e2e' },
      subjects: [{ kind: 'ServiceAccount', name: 'viewer', namespace: NS }],
    } as KubernetesObject);
    gateway = await startGatewayProcess(undefined, tlsDir, [
      '--policies', 'flags', '--kubeconfig', ADMIN_KUBECONFIG, '--lease-namespace', NS,
      '--grpc-tls', 'on', '--auth', 'kubernetes', '--agent-service-accounts', `${NS}/oversell-agent`, '--sidecars', 'none',
    ]);
  });
  after(async () => {
    for (const n of nodes) await n.stop();
    await gateway?.kill();
    for (const o of created.reverse()) await objects().delete(o).catch(() => {});
  });

  it('publishes its CA (no key) in a ConfigMap for agents', async () => {
    const cm = await eventually('CA ConfigMap', async () => (await core().readNamespacedConfigMap({ name: 'oversell-gateway-ca', namespace: NS }).catch(() => undefined)));
    assert.equal(cm.data?.['ca.crt'], readFileSync(join(tlsDir, 'ca.crt'), 'utf8'));
    assert.deepEqual(Object.keys(cm.data ?? {}), ['ca.crt']);
  });

  it('an agent with a token bound to its pod streams over TLS, for its own node', async () => {
    const n = await fakeNode('e2e-auth-a');
    nodes.push(n);
    const podA = await agentPod('agent-a', n.name);
    const token = await tokenFor('oversell-agent', { audience: 'oversell-gateway', pod: podA });
    await n.startAgent(gateway, tlsArgs(tokenFile('token-a', token)));
    const viewer = await tokenFor('viewer');
    const names = await eventually('node listed', async () => {
      const l = await list(viewer);
      return l.includes(n.name) ? l : undefined;
    });
    assert.ok(names.includes(n.name));
  });

  it('the same token claiming another node is refused with PERMISSION_DENIED, counted, and nothing is stored', async () => {
    const before = await nodeMismatches();
    const victim = await fakeNode('e2e-auth-victim');
    nodes.push(victim);
    const token = readFileSync(join(work, 'token-a'), 'utf8');
    const agent = await victim.startAgent(gateway, tlsArgs(tokenFile('token-forged', token)), /gateway stream lost/);
    const lost = await agent.waitFor(/gateway stream lost/);
    assert.match(String(lost.reason), /PERMISSION_DENIED: .*runs on node e2e-auth-a and may not report for node e2e-auth-victim/);
    // Counted by the ingest thread, which hands its counts to the main thread's /metrics with its next batch.
    await eventually('the refusal counted', async () => ((await nodeMismatches()) > before ? true : undefined), 10_000);
    assert.ok(!(await list(await tokenFor('viewer'))).includes('e2e-auth-victim'));
  });

  it('a token for the API server (wrong audience) or no token at all: UNAUTHENTICATED', async () => {
    const n = await fakeNode('e2e-auth-c');
    nodes.push(n);
    const pod = await agentPod('agent-c', n.name);
    const apiToken = await tokenFor('oversell-agent', { pod });
    const agent = await n.startAgent(gateway, tlsArgs(tokenFile('token-c', apiToken)), /gateway stream lost/);
    const lost = await agent.waitFor(/gateway stream lost/);
    assert.match(String(lost.reason), /UNAUTHENTICATED/);
    await assert.rejects(list(), (e: grpc.ServiceError) => e.code === grpc.status.UNAUTHENTICATED);
  });

  it('query callers need RBAC on nodeusages.oversell.io', async () => {
    await assert.rejects(list(await tokenFor('nobody')), (e: grpc.ServiceError) =>
      e.code === grpc.status.PERMISSION_DENIED && /may not list nodeusages.oversell.io/.test(e.details));
    assert.ok((await list(await tokenFor('viewer'))).length >= 1);
  });
});
