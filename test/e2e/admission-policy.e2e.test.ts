// The install paths' own guards on the real kube-apiserver: the gateway's
// NetworkPolicy and the ValidatingAdmissionPolicy that lets the gateway's
// ServiceAccount change nothing of the MutatingWebhookConfiguration "oversell"
// but clientConfig.caBundle, as rendered by kustomize (deploy/) and Helm. The
// requests are made as that ServiceAccount (impersonation with the admin
// credentials), with the RBAC the install grants it.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import {
  AdmissionregistrationV1Api, KubeConfig, PatchStrategy, setHeaderOptions, type V1MutatingWebhookConfiguration, type V1NetworkPolicy, type V1NetworkPolicySpec, type V1ValidatingAdmissionPolicy,
} from '@kubernetes/client-node';
import yaml from 'js-yaml';
import { REPO, adminConfig, apiFailure, core, objects } from './cluster.js';
import { eventually } from './fixtures.js';
import { one, render, type Obj, type Render } from './renders.js';

const NS = 'oversell';
const GATEWAY = `system:serviceaccount:${NS}:oversell-gateway`;
const CONFIG = 'oversell';
// Marks the webhook configuration this test made, so a crashed run's leftover can be told from a real install.
const OWNER = { 'e2e.oversell.io/owner': 'admission-policy' };


/** A client that is the gateway's ServiceAccount, by impersonation. */
function asGateway(): AdmissionregistrationV1Api {
  const admin = adminConfig();
  const kc = new KubeConfig();
  kc.loadFromOptions({
    clusters: admin.clusters,
    contexts: admin.contexts,
    currentContext: admin.currentContext,
    users: admin.users.map((u) => ({ ...u, impersonateUser: GATEWAY })),
  });
  return kc.makeApiClient(AdmissionregistrationV1Api);
}

const admin = () => adminConfig().makeApiClient(AdmissionregistrationV1Api);
const jsonPatch = setHeaderOptions('Content-Type', PatchStrategy.JsonPatch);

/** The patch's outcome: 'ok', or the status code and message of the refusal. */
async function tryPatch(api: AdmissionregistrationV1Api, body: object[], dryRun?: 'All'): Promise<{ ok: true } | { ok: false; code: number; message: string }> {
  try {
    await api.patchMutatingWebhookConfiguration({ name: CONFIG, body, ...(dryRun && { dryRun }) }, jsonPatch);
    return { ok: true };
  } catch (err) {
    return apiFailure(err);
  }
}

/** deploy/base/webhook.yaml as installed, except that its selectors match nothing here: the test changes it, nothing calls it. */
function inertWebhookConfiguration(): V1MutatingWebhookConfiguration {
  const config = yaml.load(readFileSync(join(REPO, 'deploy/base/webhook.yaml'), 'utf8')) as V1MutatingWebhookConfiguration;
  config.metadata = { ...config.metadata, labels: { ...config.metadata?.labels, ...OWNER } };
  for (const w of config.webhooks ?? []) w.objectSelector = { matchLabels: { 'e2e.oversell.io/never': 'true' } };
  return config;
}

const CA = Buffer.from('-----BEGIN CERTIFICATE-----\nnot checked by the API server\n-----END CERTIFICATE-----\n').toString('base64');
const caBundleOnly = (config: V1MutatingWebhookConfiguration) =>
  (config.webhooks ?? []).map((_, i) => ({ op: 'add', path: `/webhooks/${i}/clientConfig/caBundle`, value: CA }));

// A webhook with a namespaceSelector, by name: the API server defaults an absent selector to {}, so setting {} on
// a webhook without one changes nothing and the policy rightly lets it through.
const SELECTED = (inertWebhookConfiguration().webhooks ?? []).findIndex((w) => w.name === 'pods.oversell.io');
assert.ok(SELECTED >= 0 && inertWebhookConfiguration().webhooks![SELECTED]!.namespaceSelector, 'deploy/base/webhook.yaml has pods.oversell.io with a namespaceSelector');

// What a stolen gateway token would like to do, each refused by the policy.
const FORBIDDEN: Array<[string, object[]]> = [
  ['widen the rules (DELETE on nodes)', [{ op: 'add', path: '/webhooks/0/rules/0/operations/-', value: 'DELETE' }]],
  ['drop the matchConditions', [{ op: 'remove', path: '/webhooks/0/matchConditions' }]],
  ['flip failurePolicy to Fail', [{ op: 'replace', path: '/webhooks/0/failurePolicy', value: 'Fail' }]],
  ['point the webhook at a URL', [{ op: 'remove', path: '/webhooks/0/clientConfig/service' }, { op: 'add', path: '/webhooks/0/clientConfig/url', value: 'https://attacker.example/mutate' }]],
  ['remove a webhook', [{ op: 'remove', path: '/webhooks/1' }]],
  ['rename a webhook', [{ op: 'replace', path: '/webhooks/0/name', value: 'nodes2.oversell.io' }]],
  ['change the namespaceSelector', [{ op: 'replace', path: `/webhooks/${SELECTED}/namespaceSelector`, value: {} }]],
  ['add a label', [{ op: 'add', path: '/metadata/labels/extra', value: 'x' }]],
  ['caBundle and a rule at once', [{ op: 'add', path: '/webhooks/0/clientConfig/caBundle', value: CA }, { op: 'replace', path: '/webhooks/0/timeoutSeconds', value: 30 }]],
];

const created: Obj[] = [];
let createdNamespace = false;

async function remove(o: Obj): Promise<void> {
  await objects().delete(o).catch(() => {});
}

describe('install-path policies on the real API server (NetworkPolicy, caBundle-only ValidatingAdmissionPolicy)', { timeout: 10 * 60_000 }, () => {
  const renders: Render[] = [];

  before(async () => {
    renders.push(render('kustomize'), render('helm'));
    createdNamespace = await core().createNamespace({ body: { metadata: { name: NS } } }).then(() => true, (e: { code?: number }) => {
      if (e.code !== 409) throw e;
      return false;
    });
    const existing = await admin().readMutatingWebhookConfiguration({ name: CONFIG }).catch(() => undefined);
    if (existing && existing.metadata?.labels?.['e2e.oversell.io/owner'] !== OWNER['e2e.oversell.io/owner']) {
      throw new Error(`a MutatingWebhookConfiguration "${CONFIG}" that this test did not make exists (an install?); remove it or run this test on a fresh cluster`);
    }
    if (existing) await admin().deleteMutatingWebhookConfiguration({ name: CONFIG });
    const config = inertWebhookConfiguration();
    created.push(config as Obj);
    await objects().create(config);
    // The gateway's RBAC on the webhook configuration, as the install grants it (get and patch, by name).
    const [kustomize] = renders as [Render];
    for (const o of [one(kustomize, 'ClusterRole', 'oversell-gateway-webhook'), one(kustomize, 'ClusterRoleBinding', 'oversell-gateway-webhook')]) {
      created.push(o);
      await objects().create(o);
    }
  });

  after(async () => {
    // Policies first: they never outlive the test even when it failed half-way.
    for (const o of created.reverse()) await remove(o);
    if (createdNamespace) {
      await core().deleteNamespace({ name: NS }).catch(() => {});
      // Gone, not terminating: the next test file creates things in it.
      await eventually(`namespace ${NS} to be gone`, async () => (await core().readNamespace({ name: NS }).then(() => undefined, () => true)), 90_000);
    }
  });

  it('the NetworkPolicy of each install path passes the API server\'s validation (server-side dry run)', async () => {
    for (const r of renders) {
      const np = one(r, 'NetworkPolicy', 'oversell-gateway');
      const stored = (await objects().create(np, undefined, 'All')) as V1NetworkPolicy;
      assert.equal(stored.metadata?.namespace, NS, `${r.path}`);
      // The API server keeps every rule and port as rendered (the client's classes name "from" "_from": compare ports).
      const ports = (rules: Array<{ ports?: Array<{ port?: unknown }> }> | undefined) => (rules ?? []).map((x) => (x.ports ?? []).map((p) => p.port));
      assert.deepEqual(ports(stored.spec?.ingress), ports((np.spec as V1NetworkPolicySpec).ingress), `${r.path}: rules and ports as rendered`);
      // Agent pods reach the agent port only; the query port only from labelled pods in labelled namespaces.
      assert.deepEqual(ports(stored.spec?.ingress), [[8443], [50052], [50051], [9090]]);
    }
  });

  for (const path of ['kustomize', 'helm'] as const) {
    describe(`the ValidatingAdmissionPolicy rendered by ${path}`, () => {
      let policy: Obj;
      let binding: Obj;

      before(async () => {
        const r = renders.find((x) => x.path === path)!;
        // Each render has more policies (gateway-policy.e2e tests the others): this one by name.
        policy = one(r, 'ValidatingAdmissionPolicy', 'oversell-gateway-cabundle-only');
        binding = one(r, 'ValidatingAdmissionPolicyBinding', 'oversell-gateway-cabundle-only');
        created.push(policy, binding);
        await objects().create(policy);
        await objects().create(binding);
      });

      after(async () => {
        await remove(binding);
        await remove(policy);
        // Until the API server has dropped it, the next path's policy could not be told apart.
        await eventually('the policy to be out of force', async () => ((await tryPatch(asGateway(), [{ op: 'add', path: '/metadata/labels/extra', value: 'x' }], 'All')).ok ? true : undefined));
      });

      it('is accepted, and its CEL type-checks against MutatingWebhookConfiguration without warnings', async () => {
        const stored = await eventually('the policy\'s type check', async () => {
          const p = (await objects().read({ apiVersion: 'admissionregistration.k8s.io/v1', kind: 'ValidatingAdmissionPolicy', metadata: { name: policy.metadata?.name ?? '' } })) as V1ValidatingAdmissionPolicy;
          return p.status?.observedGeneration === p.metadata?.generation ? p : undefined;
        });
        assert.deepEqual(stored.status?.typeChecking?.expressionWarnings ?? [], []);
      });

      it('refuses a rules change made as the gateway\'s ServiceAccount (and is in force: GA and on by default)', async () => {
        // A dry run goes through admission too: wait for the policy to be in force without changing anything.
        const first = FORBIDDEN[0]![1];
        const refused = await eventually('the policy to refuse', async () => {
          const r = await tryPatch(asGateway(), first, 'All');
          return r.ok ? undefined : r;
        });
        assert.equal(refused.code, 403, refused.message);
        assert.match(refused.message, /oversell-gateway-cabundle-only.*the gateway may change only clientConfig\.caBundle/);
      });

      for (const [what, patch] of FORBIDDEN) {
        it(`refuses the gateway's attempt to ${what}`, async () => {
          const r = await tryPatch(asGateway(), patch);
          assert.equal(r.ok, false, `the gateway could ${what}`);
          if (!r.ok) assert.match(r.message, /the gateway may change only clientConfig\.caBundle/);
        });
      }

      it('allows the gateway a caBundle-only change (what gateway/tls/ca-bundle.ts does), and it is stored', async () => {
        const before = await admin().readMutatingWebhookConfiguration({ name: CONFIG });
        const r = await tryPatch(asGateway(), [{ op: 'test', path: '/metadata/resourceVersion', value: before.metadata?.resourceVersion }, ...caBundleOnly(before)]);
        assert.deepEqual(r, { ok: true });
        const after = await admin().readMutatingWebhookConfiguration({ name: CONFIG });
        assert.ok(after.webhooks?.every((w) => w.clientConfig.caBundle === CA));
        // Back to no caBundle, for the next path's turn (as admin: the policy binds only the gateway).
        await admin().patchMutatingWebhookConfiguration({ name: CONFIG, body: (after.webhooks ?? []).map((_, i) => ({ op: 'remove', path: `/webhooks/${i}/clientConfig/caBundle` })) }, jsonPatch);
      });

      it('binds only the gateway: an administrator may still change the rules', async () => {
        assert.deepEqual(await tryPatch(admin(), FORBIDDEN[0]![1], 'All'), { ok: true });
      });
    });
  }
});
