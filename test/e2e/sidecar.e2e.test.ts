// Sidecar injection end to end: templates as ConfigMaps the gateway process
// watches, the pod webhooks of deploy/base/webhook.yaml registered with the real
// kube-apiserver, and pods made by the real controller-manager from a Deployment.
// In a namespace that requires its sidecars: a copy of an injected pod as the
// API server stored it is recognised, each look-alike of the sidecar is
// refused, and the ValidatingAdmissionPolicy of both install paths refuses an
// image swap on pod UPDATE.
import assert from 'node:assert/strict';
import { request, type RequestOptions } from 'node:https';
import { after, before, describe, it } from 'node:test';
import type { V1Deployment, V1Pod } from '@kubernetes/client-node';
import { AppsV1Api, PatchStrategy, setHeaderOptions } from '@kubernetes/client-node';
import { INJECT } from '../../gateway/inject/pod-injection.js';
import { TEMPLATE_KEY, TEMPLATE_LABEL } from '../../gateway/inject/sidecar-template.js';
import { ADMIN_KUBECONFIG, adminConfig, core, objects } from './cluster.js';
import { UNAUTHENTICATED_AGENTS, eventually, startGatewayProcess, webhookFromDeploy, type GatewayProc } from './fixtures.js';
import { one, render, type Obj } from './renders.js';

const TEMPLATES_NS = 'e2e-sidecar-system'; // the gateway's own namespace here
const ON = 'e2e-sidecar-on';
const OFF = 'e2e-sidecar-off';
const REQUIRED = 'e2e-sidecar-required';
const WEBHOOK = 'oversell-sidecar-e2e';
const KWOK_TOLERATION = [{ key: 'kwok.x-k8s.io/node', operator: 'Exists', effect: 'NoSchedule' }];

let gateway: GatewayProc;
/** How many look-alike pods the required namespace refused (set where they are declared). */
let LOOK_ALIKES_DENIED = 0;
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
// A second default of the required namespace only, with what a real auth proxy
// carries: a Secret volume, env from a Secret, resources ("1000m", stored as
// "1"; the memory limit also becomes the request), a locked-down
// securityContext, a probe the API server fills in, a native sidecar.
const authTemplate = [
  'default: true',
  `namespaces: [${REQUIRED}]`,
  'initContainers:',
  '  - name: auth-init',
  '    image: example.com/auth-init:2',
  '    restartPolicy: Always',
  '    volumeMounts: [{ name: auth-certs, mountPath: /etc/auth, readOnly: true }]',
  'containers:',
  '  - name: auth-proxy',
  '    image: example.com/auth-proxy:2',
  '    args: ["--upstream=127.0.0.1:8080"]',
  '    ports: [{ containerPort: 4180 }]',
  '    env: [{ name: TOKEN, valueFrom: { secretKeyRef: { name: auth-proxy, key: token } } }]',
  '    resources: { requests: { cpu: 100m }, limits: { cpu: 1000m, memory: 128Mi } }',
  '    securityContext: { runAsNonRoot: true, readOnlyRootFilesystem: true, allowPrivilegeEscalation: false, capabilities: { drop: [ALL] } }',
  '    readinessProbe: { httpGet: { port: 4180 } }',
  '    volumeMounts: [{ name: auth-certs, mountPath: /etc/auth, readOnly: true }]',
  'volumes:',
  '  - { name: auth-certs, secret: { secretName: auth-certs } }',
].join('\n');
/** Containers of a pod of the required namespace: the app, then both default templates' sidecars. */
// Templates are injected in the order of their names (auth, then mesh): gateway/inject/template-source.ts.
const REQUIRED_CONTAINERS = ['app', 'auth-proxy', 'mesh-proxy'];

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

interface RawAnswer {
  status: number;
  warnings: string[];
  pod: V1Pod;
}

/**
 * A pod request with the admin credentials, the JSON as the API server sends
 * it (client-node neither shows Warning headers nor keeps every field as stored).
 */
async function podRaw(method: 'GET' | 'POST', namespace: string, name?: string, body?: object): Promise<RawAnswer> {
  const kc = adminConfig();
  const server = new URL(kc.getCurrentCluster()?.server ?? '');
  const payload = body === undefined ? '' : JSON.stringify(body);
  const options: RequestOptions = {
    host: server.hostname,
    port: server.port,
    path: `/api/v1/namespaces/${namespace}/pods${name ? `/${name}` : ''}`,
    method,
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

const createPodRaw = (namespace: string, body: V1Pod) => podRaw('POST', namespace, undefined, body);

const bare = (name: string, annotations?: Record<string, string>, containers = [{ name: 'app', image: 'example.com/app:1' }]): V1Pod => ({
  metadata: { name, ...(annotations && { annotations }) },
  spec: { tolerations: KWOK_TOLERATION, containers },
});

describe('sidecar injection on a real control plane', { timeout: 5 * 60_000 }, () => {
  before(async () => {
    for (const [name, labels] of [[TEMPLATES_NS, {}], [ON, { [INJECT.optIn]: 'enabled' }], [OFF, {}], [REQUIRED, { [INJECT.optIn]: 'required' }]] as const) {
      await core().createNamespace({ body: { metadata: { name, labels } } });
    }
    for (const [name, text] of [['mesh', meshTemplate], ['logger', loggerTemplate], ['auth', authTemplate]] as const) {
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
      assert.deepEqual(containerNames(res.pod), REQUIRED_CONTAINERS);
    });
  }

  it('in a required namespace a pod whose default sidecar cannot be added is refused, with the reason', async () => {
    const res = await createPodRaw(REQUIRED, bare('look-alike', undefined, [{ name: 'app', image: 'example.com/app:1' }, { name: 'mesh-proxy', image: 'example.com/busybox:1' }]));
    assert.equal(res.status, 403);
    assert.match((res.pod as { message?: string }).message ?? '', /required-pods\.oversell\.io.*requires its sidecars and "mesh" could not be added/);
    await assert.rejects(core().readNamespacedPod({ namespace: REQUIRED, name: 'look-alike' }));
  });

  describe('in a required namespace a container of the sidecar\'s name must be exactly the template\'s', () => {
    /** The pod "real" as the API server stored it, with its injected sidecars. */
    let stored: V1Pod;
    /** A copy of it to submit again, under another name: what a controller or `kubectl get -o json | kubectl create` sends. */
    const copy = (name: string): V1Pod & { spec: NonNullable<V1Pod['spec']> } => {
      const spec = structuredClone(stored.spec)!;
      // Set by the scheduler and the Priority plugin, which would check them against their own again.
      delete spec.nodeName;
      delete spec.priority;
      delete spec.preemptionPolicy;
      return { metadata: { name, annotations: stored.metadata?.annotations, labels: stored.metadata?.labels }, spec };
    };
    const authProxy = (p: V1Pod) => p.spec!.containers.find((c) => c.name === 'auth-proxy')!;

    it('the injected pod is stored as the API server defaults it, and a copy of it is taken as carrying its sidecars (201, nothing added twice)', async () => {
      const res = await createPodRaw(REQUIRED, bare('real'));
      assert.equal(res.status, 201, JSON.stringify(res.pod));
      stored = (await podRaw('GET', REQUIRED, 'real')).pod;
      assert.deepEqual(containerNames(stored), REQUIRED_CONTAINERS);
      assert.deepEqual(stored.spec?.initContainers?.map((c) => c.name), ['auth-init']);
      // What the comparison has to see through: the template's "1000m" stored as "1", the
      // memory limit copied to requests, defaults filled in, the token mounted into the sidecar.
      const proxy = authProxy(stored);
      assert.deepEqual(proxy.resources, { limits: { cpu: '1', memory: '128Mi' }, requests: { cpu: '100m', memory: '128Mi' } });
      assert.equal(proxy.imagePullPolicy, 'IfNotPresent');
      assert.equal(proxy.readinessProbe?.periodSeconds, 10);
      assert.equal(stored.spec?.volumes?.find((v) => v.name === 'auth-certs')?.secret?.defaultMode, 420);
      assert.ok(proxy.volumeMounts?.some((m) => m.mountPath === '/var/run/secrets/kubernetes.io/serviceaccount'), JSON.stringify(proxy.volumeMounts));

      const again = await createPodRaw(REQUIRED, copy('real-copy'));
      assert.equal(again.status, 201, JSON.stringify(again.pod));
      assert.deepEqual(again.warnings, []);
      assert.deepEqual(containerNames(again.pod), REQUIRED_CONTAINERS);
      assert.deepEqual(again.pod.spec?.initContainers?.map((c) => c.name), ['auth-init']);
    });

    type Spec = NonNullable<V1Pod['spec']>;
    const lookAlikes: Array<[string, (spec: Spec) => void, string]> = [
      ['its volume an emptyDir instead of the template\'s Secret', (spec) => (spec.volumes = spec.volumes?.map((v) => (v.name === 'auth-certs' ? { name: 'auth-certs', emptyDir: {} } : v))), 'volume name "auth-certs"'],
      ['env valueFrom the pod author\'s ConfigMap instead of the template\'s Secret', (spec) => (authProxy({ spec }).env![0]!.valueFrom = { configMapKeyRef: { name: 'mine', key: 'token' } }), 'env differs'],
      ['envFrom added', (spec) => (authProxy({ spec }).envFrom = [{ configMapRef: { name: 'mine' } }]), 'envFrom differs'],
      ['an extra mount', (spec) => authProxy({ spec }).volumeMounts!.push({ name: 'auth-certs', mountPath: '/srv/certs' }), 'volumeMounts differs'],
      ['a subPath on the template\'s mount', (spec) => (authProxy({ spec }).volumeMounts![0]!.subPath = 'tls.crt'), 'volumeMounts differs'],
      ['the template\'s mount read-write', (spec) => delete authProxy({ spec }).volumeMounts![0]!.readOnly, 'volumeMounts differs'],
      ['other resources', (spec) => (authProxy({ spec }).resources = { limits: { cpu: '4', memory: '128Mi' }, requests: { cpu: '100m', memory: '128Mi' } }), 'resources differs'],
      ['a looser securityContext', (spec) => (authProxy({ spec }).securityContext = { ...authProxy({ spec }).securityContext, allowPrivilegeEscalation: true }), 'securityContext differs'],
      ['the native sidecar\'s restartPolicy dropped', (spec) => delete spec.initContainers![0]!.restartPolicy, 'restartPolicy differs'],
    ];
    lookAlikes.forEach(([what, change, difference], i) => {
      it(`a copy with ${what} is refused (403, naming what differs) and never stored`, async () => {
        const pod = copy(`look-alike-${i}`);
        change(pod.spec);
        const res = await createPodRaw(REQUIRED, pod);
        assert.equal(res.status, 403, JSON.stringify(res.pod).slice(0, 500));
        const message = (res.pod as { message?: string }).message ?? '';
        assert.match(message, /required-pods\.oversell\.io.*requires its sidecars and "auth" could not be added .*is already in the pod, and it is not the template's/);
        assert.ok(message.includes(difference), message);
        await assert.rejects(core().readNamespacedPod({ namespace: REQUIRED, name: `look-alike-${i}` }));
      });
    });
    LOOK_ALIKES_DENIED = lookAlikes.length;

    for (const path of ['kustomize', 'helm'] as const) {
      describe(`the pod-image ValidatingAdmissionPolicy rendered by ${path}`, () => {
        const POLICY = 'oversell-required-pod-images';
        let policy: Obj;
        let binding: Obj;
        const jsonPatch = setHeaderOptions('Content-Type', PatchStrategy.JsonPatch);
        /** The outcome of a JSON patch of a pod: 'ok', or the refusal's code and message. */
        const tryPatch = async (namespace: string, name: string, body: object[], dryRun?: 'All') => {
          try {
            await core().patchNamespacedPod({ namespace, name, body, ...(dryRun && { dryRun }) }, jsonPatch);
            return { ok: true as const };
          } catch (err) {
            const e = err as { code?: number; body?: unknown };
            const text = typeof e.body === 'string' ? e.body : JSON.stringify(e.body ?? (err as Error).message);
            return { ok: false as const, code: e.code ?? 0, message: text };
          }
        };
        // containers/1 is auth-proxy (REQUIRED_CONTAINERS); the test op makes the patch fail rather than swap another container.
        const swapProxy = [{ op: 'test', path: '/spec/containers/1/name', value: 'auth-proxy' }, { op: 'replace', path: '/spec/containers/1/image', value: 'example.com/my-own-proxy:1' }];

        before(async () => {
          const r = render(path);
          policy = one(r, 'ValidatingAdmissionPolicy', POLICY);
          binding = one(r, 'ValidatingAdmissionPolicyBinding', POLICY);
          // A run killed before its after hook may have left them.
          for (const o of [binding, policy]) await objects().delete(o).catch(() => {});
          await objects().create(policy);
          await objects().create(binding);
        });

        after(async () => {
          await objects().delete(binding).catch(() => {});
          await objects().delete(policy).catch(() => {});
          // Out of force before the next path's turn, or its refusals could be this one's.
          await eventually('the policy to be out of force', async () => ((await tryPatch(REQUIRED, 'real', swapProxy, 'All')).ok ? true : undefined));
        });

        it('refuses swapping the sidecar\'s image on pod UPDATE (kubectl set image), naming the container', async () => {
          // A dry run goes through admission too: wait for the policy to be in force without changing anything.
          const refused = await eventually('the policy to refuse', async () => {
            const r = await tryPatch(REQUIRED, 'real', swapProxy, 'All');
            return r.ok ? undefined : r;
          });
          assert.equal(refused.code, 403, refused.message);
          const real = await tryPatch(REQUIRED, 'real', swapProxy);
          assert.equal(real.ok, false);
          if (!real.ok) assert.match(real.message, new RegExp(`${POLICY}.*namespace ${REQUIRED} requires its sidecars, so a pod keeps the images it was admitted with \\(changed: auth-proxy\\)`));
          assert.equal(authProxy((await podRaw('GET', REQUIRED, 'real')).pod).image, 'example.com/auth-proxy:2');
        });

        it('refuses swapping an init container\'s image and the app\'s, allows an UPDATE that keeps the images', async () => {
          for (const patch of [[{ op: 'replace', path: '/spec/initContainers/0/image', value: 'example.com/mine:1' }], [{ op: 'replace', path: '/spec/containers/0/image', value: 'example.com/app:2' }]]) {
            const r = await tryPatch(REQUIRED, 'real', patch);
            assert.equal(r.ok, false, JSON.stringify(patch));
          }
          assert.deepEqual(await tryPatch(REQUIRED, 'real', [{ op: 'add', path: '/metadata/labels', value: { tier: 'web' } }]), { ok: true });
        });

        it('binds only namespaces labelled required: elsewhere an image may change', async () => {
          assert.deepEqual(await tryPatch(ON, 'forged', [{ op: 'replace', path: '/spec/containers/0/image', value: 'example.com/app:2' }], 'All'), { ok: true });
        });
      });
    }
  });

  it('the gateway counted the injections and the refusal', async () => {
    const text = await (await fetch(`http://127.0.0.1:${gateway.ports.metrics}/metrics`)).text();
    const injected = Number(/oversell_sidecar_injections_total\{template="mesh"\} (\d+)/.exec(text)?.[1] ?? 0);
    assert.ok(injected >= 3, `mesh injected ${injected} times (2 Deployment pods and the probe)`);
    assert.match(text, /oversell_sidecar_injections_total\{template="logger"\} 1/);
    // The collision in the opted-in namespace, and the look-alike in the required one.
    assert.match(text, /oversell_sidecar_refusals_total\{template="mesh",reason="collision"\} 2/);
    // Each look-alike of "auth" refused: the mesh look-alike's pod was denied too, without counting "auth" as injected.
    assert.match(text, new RegExp(`oversell_sidecar_refusals_total\\{template="auth",reason="collision"\\} ${LOOK_ALIKES_DENIED}\n`));
    assert.match(text, new RegExp(`oversell_pod_webhook_request_duration_seconds_count\\{outcome="denied"\\} ${1 + LOOK_ALIKES_DENIED}\n`));
    // Into the three pods that tried to opt out and "real"; not into its copy (already there) nor any denied pod.
    assert.match(text, /oversell_sidecar_injections_total\{template="auth"\} 4\n/);
  });
});
