// Sidecar injection end to end: templates as ConfigMaps the gateway process
// watches, the pod webhooks of deploy/base/webhook.yaml registered with the real
// kube-apiserver, and pods made by the real controller-manager from a Deployment.
import assert from 'node:assert/strict';
import { request, type RequestOptions } from 'node:https';
import { after, before, describe, it } from 'node:test';
import type { V1Deployment, V1Pod } from '@kubernetes/client-node';
import { AppsV1Api } from '@kubernetes/client-node';
import { INJECT } from '../../gateway/inject/pod-injection.js';
import { TEMPLATE_KEY, TEMPLATE_LABEL } from '../../gateway/inject/sidecar-template.js';
import { ADMIN_KUBECONFIG, adminConfig, core, objects } from './cluster.js';
import { UNAUTHENTICATED_AGENTS, eventually, startGatewayProcess, webhookFromDeploy, type GatewayProc } from './fixtures.js';

const TEMPLATES_NS = 'e2e-sidecar-system'; // the gateway's own namespace here
const ON = 'e2e-sidecar-on';
const OFF = 'e2e-sidecar-off';
const REQUIRED = 'e2e-sidecar-required';
const WEBHOOK = 'oversell-sidecar-e2e';
const KWOK_TOLERATION = [{ key: 'kwok.x-k8s.io/node', operator: 'Exists', effect: 'NoSchedule' }];

let gateway: GatewayProc;
const apps = () => adminConfig().makeApiClient(AppsV1Api);

const meshTemplate = [
  'default: true',
  'containers:',
  '  - name: mesh-proxy',
  '    image: example.com/envoy:1.30',
  '    volumeMounts: [{ name: mesh-config, mountPath: /etc/mesh }]',
  'volumes:',
  '  - { name: mesh-config, emptyDir: {} }',
  'downwardEnv:',
  '  POD_NAME: metadata.name',
  '  POD_NAMESPACE: metadata.namespace',
].join('\n');
const loggerTemplate = 'containers:\n  - { name: logger, image: example.com/fluent-bit:3 }\n';

function deployment(name: string): V1Deployment {
  const labels = { app: name };
  return {
    metadata: { name },
    spec: {
      replicas: 2,
      selector: { matchLabels: labels },
      template: { metadata: { labels }, spec: { tolerations: KWOK_TOLERATION, containers: [{ name: 'app', image: 'example.com/app:1' }] } },
    },
  };
}

const containerNames = (p: V1Pod) => (p.spec?.containers ?? []).map((c) => c.name);

async function controllerPods(namespace: string, app: string): Promise<V1Pod[]> {
  return eventually(`2 pods of ${namespace}/${app}`, async () => {
    const pods = (await core().listNamespacedPod({ namespace, labelSelector: `app=${app}` })).items;
    return pods.length === 2 ? pods : undefined;
  }, 60_000);
}

/** POST a pod with the admin credentials and keep the response headers: client-node does not show Warning headers. */
async function createPodRaw(namespace: string, body: V1Pod): Promise<{ status: number; warnings: string[]; pod: V1Pod }> {
  const kc = adminConfig();
  const server = new URL(kc.getCurrentCluster()?.server ?? '');
  const payload = JSON.stringify(body);
  const options: RequestOptions = {
    host: server.hostname,
    port: server.port,
    path: `/api/v1/namespaces/${namespace}/pods`,
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/json', 'content-length': Buffer.byteLength(payload) },
  };
  await kc.applyToHTTPSOptions(options);
  return new Promise((resolve, reject) => {
    const req = request(options, (res) => {
      let text = '';
      res.on('data', (c: Buffer) => (text += c));
      res.on('end', () => {
        const raw = res.headers.warning;
        const warnings = (Array.isArray(raw) ? raw : raw ? [raw] : []).flatMap((w) => w.split(/,(?=\s*\d{3} )/));
        resolve({ status: res.statusCode ?? 0, warnings, pod: JSON.parse(text || '{}') as V1Pod });
      });
    });
    req.on('error', reject);
    req.end(payload);
  });
}

const bare = (name: string, annotations?: Record<string, string>, containers = [{ name: 'app', image: 'example.com/app:1' }]): V1Pod => ({
  metadata: { name, ...(annotations && { annotations }) },
  spec: { tolerations: KWOK_TOLERATION, containers },
});

describe('sidecar injection on a real control plane', { timeout: 5 * 60_000 }, () => {
  before(async () => {
    for (const [name, labels] of [[TEMPLATES_NS, {}], [ON, { [INJECT.optIn]: 'enabled' }], [OFF, {}], [REQUIRED, { [INJECT.optIn]: 'required' }]] as const) {
      await core().createNamespace({ body: { metadata: { name, labels } } });
    }
    for (const [name, text] of [['mesh', meshTemplate], ['logger', loggerTemplate]] as const) {
      await core().createNamespacedConfigMap({
        namespace: TEMPLATES_NS,
        body: { metadata: { name, labels: { [TEMPLATE_LABEL]: 'true' } }, data: { [TEMPLATE_KEY]: text } },
      });
    }
    gateway = await startGatewayProcess(undefined, undefined, [
      '--policies', 'flags', '--kubeconfig', ADMIN_KUBECONFIG,
      '--sidecars', 'configmap', '--sidecar-namespace', TEMPLATES_NS, '--lease-namespace', TEMPLATES_NS,
      ...UNAUTHENTICATED_AGENTS,
    ]);
    // Only the pod entries: node heartbeats are other tests' business.
    const config = webhookFromDeploy(gateway, WEBHOOK);
    config.webhooks = config.webhooks?.filter((h) => h.clientConfig.url?.includes('/mutate/pods'));
    assert.equal(config.webhooks?.length, 3);
    await objects().create(config);
    // The API server picks up a new webhook configuration within about a second.
    await eventually('the pod webhook to be in force', async () => {
      const probe = await createPodRaw(ON, bare(`probe-${Date.now()}`));
      return probe.pod.metadata?.annotations?.[INJECT.injected] === 'mesh' ? true : undefined;
    });
  });

  after(async () => {
    await objects().delete({ apiVersion: 'admissionregistration.k8s.io/v1', kind: 'MutatingWebhookConfiguration', metadata: { name: WEBHOOK } }).catch(() => {});
    await gateway?.kill();
    for (const name of [ON, OFF, REQUIRED, TEMPLATES_NS]) await core().deleteNamespace({ name }).catch(() => {});
  });

  it('a Deployment in an opted-in namespace: the controller-manager\'s pods are stored with the sidecar', async () => {
    await apps().createNamespacedDeployment({ namespace: ON, body: deployment('web') });
    const pods = await controllerPods(ON, 'web');
    for (const p of pods) {
      assert.equal(p.metadata?.ownerReferences?.[0]?.kind, 'ReplicaSet', 'made by the ReplicaSet controller');
      assert.deepEqual(containerNames(p), ['app', 'mesh-proxy']);
      assert.equal(p.metadata?.annotations?.[INJECT.injected], 'mesh');
      assert.ok(p.spec?.volumes?.some((v) => v.name === 'mesh-config' && v.emptyDir), 'the template volume');
      const proxy = p.spec?.containers.find((c) => c.name === 'mesh-proxy');
      assert.deepEqual(proxy?.env?.map((e) => [e.name, e.valueFrom?.fieldRef?.fieldPath]), [['POD_NAME', 'metadata.name'], ['POD_NAMESPACE', 'metadata.namespace']]);
      // The ServiceAccount admission plugin mounts the token into our container too: it runs again after a webhook changed the pod.
      assert.ok(proxy?.volumeMounts?.some((m) => m.name === 'mesh-config' && m.mountPath === '/etc/mesh'), JSON.stringify(proxy?.volumeMounts));
    }
  });

  it('a Deployment in an unlabelled namespace: its pods are untouched', async () => {
    await apps().createNamespacedDeployment({ namespace: OFF, body: deployment('web') });
    const pods = await controllerPods(OFF, 'web');
    for (const p of pods) {
      assert.deepEqual(containerNames(p), ['app']);
      assert.equal(p.metadata?.annotations?.[INJECT.injected], undefined);
    }
  });

  it('a pod annotated oversell.io/sidecars in an unlabelled namespace gets exactly the named template', async () => {
    const res = await createPodRaw(OFF, bare('asks-for-logger', { [INJECT.sidecars]: 'logger' }));
    assert.equal(res.status, 201, JSON.stringify(res.pod));
    const stored = await core().readNamespacedPod({ namespace: OFF, name: 'asks-for-logger' });
    assert.deepEqual(containerNames(stored), ['app', 'logger']);
    assert.equal(stored.metadata?.annotations?.[INJECT.injected], 'logger');
  });

  it('a name collision: the pod is created without the sidecar and the create response carries the warning', async () => {
    const res = await createPodRaw(ON, bare('collides', undefined, [{ name: 'mesh-proxy', image: 'example.com/my-own-proxy:1' }]));
    assert.equal(res.status, 201, JSON.stringify(res.pod));
    assert.ok(
      res.warnings.some((w) => w.includes('oversell: sidecar \\"mesh\\" not injected: container name \\"mesh-proxy\\" is already in the pod') || w.includes('oversell: sidecar "mesh" not injected: container name "mesh-proxy" is already in the pod')),
      `Warning headers: ${JSON.stringify(res.warnings)}`,
    );
    const stored = await core().readNamespacedPod({ namespace: ON, name: 'collides' });
    assert.deepEqual(stored.spec?.containers.map((c) => c.image), ['example.com/my-own-proxy:1']);
    assert.equal(stored.metadata?.annotations?.[INJECT.injected], undefined);
  });

  it('a pod that opts out in an opted-in namespace is untouched', async () => {
    const res = await createPodRaw(ON, bare('opts-out', { [INJECT.optIn]: 'disabled' }));
    assert.equal(res.status, 201);
    assert.deepEqual(containerNames(res.pod), ['app']);
    assert.deepEqual(res.warnings, []);
  });

  it('a forged oversell.io/injected annotation does not keep the sidecar out', async () => {
    const res = await createPodRaw(ON, bare('forged', { [INJECT.injected]: 'mesh' }));
    assert.equal(res.status, 201);
    assert.deepEqual(containerNames(res.pod), ['app', 'mesh-proxy']);
  });

  for (const [what, annotations] of [
    ['oversell.io/inject: disabled', { [INJECT.optIn]: 'disabled' }],
    ['an empty oversell.io/sidecars', { [INJECT.sidecars]: '' }],
    ['a forged oversell.io/injected', { [INJECT.injected]: 'mesh' }],
  ] as const) {
    it(`in a namespace labelled oversell.io/inject=required a pod cannot opt out with ${what}`, async () => {
      const res = await createPodRaw(REQUIRED, bare(`no-opt-out-${Object.keys(annotations)[0]?.replace(/[^a-z]/g, '')}`, annotations));
      assert.equal(res.status, 201, JSON.stringify(res.pod));
      assert.deepEqual(containerNames(res.pod), ['app', 'mesh-proxy']);
    });
  }

  it('in a required namespace a pod whose default sidecar cannot be added is refused, with the reason', async () => {
    const res = await createPodRaw(REQUIRED, bare('look-alike', undefined, [{ name: 'app', image: 'example.com/app:1' }, { name: 'mesh-proxy', image: 'example.com/busybox:1' }]));
    assert.equal(res.status, 403);
    assert.match((res.pod as { message?: string }).message ?? '', /required-pods\.oversell\.io.*requires its sidecars and "mesh" could not be added/);
    await assert.rejects(core().readNamespacedPod({ namespace: REQUIRED, name: 'look-alike' }));
  });

  it('the gateway counted the injections and the refusal', async () => {
    const text = await (await fetch(`http://127.0.0.1:${gateway.ports.metrics}/metrics`)).text();
    const injected = Number(/oversell_sidecar_injections_total\{template="mesh"\} (\d+)/.exec(text)?.[1] ?? 0);
    assert.ok(injected >= 3, `mesh injected ${injected} times (2 Deployment pods and the probe)`);
    assert.match(text, /oversell_sidecar_injections_total\{template="logger"\} 1/);
    // The collision in the opted-in namespace, and the look-alike in the required one.
    assert.match(text, /oversell_sidecar_refusals_total\{template="mesh",reason="collision"\} 2/);
    assert.match(text, /oversell_pod_webhook_request_duration_seconds_count\{outcome="denied"\} 1/);
  });
});
