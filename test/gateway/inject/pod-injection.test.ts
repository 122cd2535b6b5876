// Which sidecars a pod gets and the patch that adds them (gateway/inject/pod-injection.ts),
// without I/O: many pod shapes, each patch applied with fast-json-patch in
// validating mode, as the API server would. Templates themselves are
// test/gateway/inject/sidecar-template.test.ts.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import jsonpatch from 'fast-json-patch';
import { INJECT, nameList, planInjection, type InjectionInput } from '../../../gateway/inject/pod-injection.js';
import { parseTemplate, type TemplateEntry } from '../../../gateway/inject/sidecar-template.js';
import { logs, proxy } from '../../helpers/sidecar-templates.js';

type Pod = { metadata?: Record<string, unknown>; spec?: Record<string, unknown> } & Record<string, unknown>;

const TEMPLATES: TemplateEntry[] = [proxy, logs];

const EXCLUDED = new Set(['kube-system', 'oversell']);

function plan(pod: unknown, over: Partial<InjectionInput> = {}) {
  return planInjection({ pod, namespace: 'shop', templates: TEMPLATES, excludedNamespaces: EXCLUDED, ...over });
}

/** The patched pod, every op applied with validation (a bad path throws). */
function patched(pod: unknown, over: Partial<InjectionInput> = {}): { pod: Pod; result: ReturnType<typeof plan> } {
  const result = plan(pod, over);
  const doc = jsonpatch.applyPatch(structuredClone(pod), result.ops as jsonpatch.Operation[], true, false).newDocument as Pod;
  return { pod: doc, result };
}

const names = (v: unknown) => (Array.isArray(v) ? v.map((x: { name: string }) => x.name) : []);

/** What the ServiceAccount admission plugin adds to a pod and mounts into every container. */
const TOKEN_VOLUME = {
  name: 'kube-api-access-x7k2p',
  projected: {
    defaultMode: 420,
    sources: [
      { serviceAccountToken: { expirationSeconds: 3607, path: 'token' } },
      { configMap: { name: 'kube-root-ca.crt', items: [{ key: 'ca.crt', path: 'ca.crt' }] } },
      { downwardAPI: { items: [{ path: 'namespace', fieldRef: { apiVersion: 'v1', fieldPath: 'metadata.namespace' } }] } },
    ],
  },
};
const TOKEN_MOUNT = { name: 'kube-api-access-x7k2p', readOnly: true, mountPath: '/var/run/secrets/kubernetes.io/serviceaccount' };

function basePod(): Pod {
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { generateName: 'web-7d9c-', labels: { app: 'web' } },
    spec: { containers: [{ name: 'app', image: 'shop:1' }] },
  };
}

describe('nameList', () => {
  it('nameList trims, drops blanks and repeats, keeps order', () => {
    assert.deepEqual(nameList(' b, a,,b ,'), ['b', 'a']);
    assert.deepEqual(nameList(undefined), []);
  });
});

describe('pod injection: what gets patched', () => {
  it('a namespace-opted pod gets the default templates: init container first, container and volume appended, annotation recorded', () => {
    const pod = basePod();
    (pod.spec as Record<string, unknown>).initContainers = [{ name: 'migrate', image: 'shop:1' }];
    (pod.spec as Record<string, unknown>).volumes = [{ name: 'data', emptyDir: {} }];
    const { pod: out, result } = patched(pod);
    assert.deepEqual(result.injected, ['proxy']);
    assert.deepEqual(names(out.spec?.containers), ['app', 'proxy']);
    assert.deepEqual(names(out.spec?.initContainers), ['proxy-init', 'migrate']);
    assert.deepEqual(names(out.spec?.volumes), ['data', 'proxy-config']);
    assert.equal((out.metadata?.annotations as Record<string, string>)[INJECT.injected], 'proxy');
    assert.deepEqual(result.refused, []);
  });

  it('adds the downward API variables to every container of the template, keeping a variable the template sets itself', () => {
    const t = parseTemplate('t', {
      default: true,
      containers: [{ name: 'side', image: 'x', env: [{ name: 'POD_NAME', value: 'fixed' }] }],
      downwardEnv: { POD_NAME: 'metadata.name', NODE_NAME: 'spec.nodeName' },
    });
    const { pod: out } = patched(basePod(), { templates: [t] });
    const side = (out.spec?.containers as Array<{ name: string; env: unknown[] }>).find((c) => c.name === 'side');
    assert.deepEqual(side?.env, [{ name: 'POD_NAME', value: 'fixed' }, { name: 'NODE_NAME', valueFrom: { fieldRef: { fieldPath: 'spec.nodeName' } } }]);
    // The app container is not ours: untouched.
    assert.deepEqual((out.spec?.containers as unknown[])[0], { name: 'app', image: 'shop:1' });
  });

  it('a pod without containers, initContainers, volumes or annotations gets whole lists and a whole annotations object', () => {
    const pod: Pod = { metadata: { name: 'bare' }, spec: {} };
    const { pod: out, result } = patched(pod);
    const paths = result.ops.map((o) => o.path).sort();
    assert.deepEqual(paths, ['/metadata/annotations', '/spec/containers', '/spec/initContainers', '/spec/volumes']);
    assert.deepEqual(names(out.spec?.containers), ['proxy']);
    assert.deepEqual(out.metadata?.annotations, { [INJECT.injected]: 'proxy' });
  });

  it('null lists and null annotations are replaced whole, not appended to', () => {
    const pod: Pod = { metadata: { name: 'n', annotations: null }, spec: { containers: null, initContainers: null, volumes: null } };
    const { pod: out } = patched(pod);
    assert.deepEqual(names(out.spec?.containers), ['proxy']);
    assert.deepEqual(names(out.spec?.initContainers), ['proxy-init']);
    assert.deepEqual(out.metadata?.annotations, { [INJECT.injected]: 'proxy' });
  });

  it('empty lists are appended to', () => {
    const pod: Pod = { metadata: { name: 'e', annotations: {} }, spec: { containers: [], initContainers: [], volumes: [] } };
    const { pod: out, result } = patched(pod);
    assert.ok(result.ops.some((o) => o.path === '/spec/containers/-'));
    assert.ok(result.ops.some((o) => o.path === '/spec/initContainers/0'));
    assert.deepEqual(names(out.spec?.containers), ['proxy']);
  });

  it('a pod with no metadata at all gets one, with the annotation', () => {
    const { pod: out } = patched({ spec: { containers: [{ name: 'app', image: 'x' }] } });
    assert.deepEqual(out.metadata, { annotations: { [INJECT.injected]: 'proxy' } });
  });

  it('escapes the annotation key as a JSON pointer and keeps the pod\'s other annotations', () => {
    const pod = basePod();
    pod.metadata = { ...pod.metadata, annotations: { 'a~b/c': 'kept', 'example.com/x': 'y' } };
    const { pod: out, result } = patched(pod);
    assert.ok(result.ops.some((o) => o.path === '/metadata/annotations/oversell.io~1injected'));
    assert.deepEqual(out.metadata?.annotations, { 'a~b/c': 'kept', 'example.com/x': 'y', [INJECT.injected]: 'proxy' });
  });

  it('the pod annotation names the templates, in its order, instead of the defaults', () => {
    const pod = basePod();
    pod.metadata = { ...pod.metadata, annotations: { [INJECT.sidecars]: 'logs, proxy' } };
    (pod.spec as Record<string, unknown>).volumes = [{ name: 'app-logs', emptyDir: {} }];
    const { pod: out, result } = patched(pod);
    assert.deepEqual(result.injected, ['logs', 'proxy']);
    assert.deepEqual(names(out.spec?.containers), ['app', 'log-shipper', 'proxy']);
    assert.equal((out.metadata?.annotations as Record<string, string>)[INJECT.injected], 'logs,proxy');
  });

  it('an empty annotation asks for nothing, even in an opted-in namespace', () => {
    const pod = basePod();
    pod.metadata = { ...pod.metadata, annotations: { [INJECT.sidecars]: ' ' } };
    const result = plan(pod);
    assert.deepEqual(result.ops, []);
    assert.equal(result.skipped, undefined);
  });

  it('no default template and no annotation: nothing to do', () => {
    const result = plan(basePod(), { templates: [logs] });
    assert.deepEqual([result.ops, result.injected, result.refused], [[], [], []]);
  });
});

describe('pod injection: what is left alone', () => {
  it('a pod that opts out', () => {
    const pod = basePod();
    pod.metadata = { ...pod.metadata, annotations: { [INJECT.optIn]: 'disabled', [INJECT.sidecars]: 'proxy' } };
    const result = plan(pod);
    assert.deepEqual(result.ops, []);
    assert.match(result.skipped ?? '', /opted out/);
  });

  for (const ns of ['kube-system', 'oversell']) {
    it(`a pod in ${ns}, even when the object says another namespace`, () => {
      const pod = basePod();
      pod.metadata = { ...pod.metadata, namespace: 'shop' };
      const result = plan(pod, { namespace: ns });
      assert.deepEqual(result.ops, []);
      assert.match(result.skipped ?? '', /never injected/);
    });
  }

  it('takes the namespace from the object when the request has none, and skips when neither has one', () => {
    const pod = basePod();
    pod.metadata = { ...pod.metadata, namespace: 'kube-system' };
    assert.match(plan(pod, { namespace: undefined }).skipped ?? '', /never injected/);
    assert.match(plan(basePod(), { namespace: undefined }).skipped ?? '', /no namespace/);
  });

  for (const [what, pod] of [['null', null], ['a list', []], ['a string', 'pod'], ['no spec', { metadata: {} }], ['a spec that is a list', { spec: [] }]] as const) {
    it(`an object that is ${what}`, () => {
      const result = plan(pod);
      assert.deepEqual(result.ops, []);
      assert.ok(result.skipped);
    });
  }
});

describe('pod injection: collisions are refused with a warning, never a broken pod', () => {
  const cases: Array<[string, (p: Pod) => void, RegExp]> = [
    ['a container of the same name', (p) => (p.spec!.containers = [{ name: 'proxy', image: 'mine' }]), /container name "proxy" is already in the pod/],
    ['an init container of the same name as a template container', (p) => (p.spec!.initContainers = [{ name: 'proxy', image: 'mine' }]), /container name "proxy"/],
    ['a container of the same name as a template init container', (p) => (p.spec!.containers = [{ name: 'proxy-init', image: 'mine' }]), /container name "proxy-init"/],
    ['an ephemeral container of the same name', (p) => (p.spec!.ephemeralContainers = [{ name: 'proxy', image: 'dbg' }]), /container name "proxy"/],
    ['a volume of the same name', (p) => (p.spec!.volumes = [{ name: 'proxy-config', configMap: { name: 'mine' } }]), /volume name "proxy-config" is already in the pod/],
  ];
  for (const [what, shape, message] of cases) {
    it(what, () => {
      const pod = basePod();
      shape(pod);
      const result = plan(pod);
      assert.deepEqual(result.ops, [], 'nothing of the template is added, not even the annotation');
      assert.equal(result.refused.length, 1);
      assert.equal(result.refused[0]?.reason, 'collision');
      assert.match(result.refused[0]?.warning ?? '', message);
      assert.match(result.refused[0]?.warning ?? '', /^oversell: sidecar "proxy" not injected: /);
    });
  }

  it('one template refused does not stop the next', () => {
    const pod = basePod();
    pod.metadata = { ...pod.metadata, annotations: { [INJECT.sidecars]: 'proxy,logs' } };
    pod.spec!.containers = [{ name: 'proxy', image: 'mine' }];
    pod.spec!.volumes = [{ name: 'app-logs', emptyDir: {} }];
    const { pod: out, result } = patched(pod);
    assert.deepEqual(result.injected, ['logs']);
    assert.deepEqual(result.refused.map((r) => r.template), ['proxy']);
    assert.deepEqual(names(out.spec?.containers), ['proxy', 'log-shipper']);
    assert.equal((out.metadata?.annotations as Record<string, string>)[INJECT.injected], 'logs');
  });

  it('two templates that clash with each other: the second is refused', () => {
    const twin = parseTemplate('twin', { containers: [{ name: 'proxy', image: 'other' }] });
    const pod = basePod();
    pod.metadata = { ...pod.metadata, annotations: { [INJECT.sidecars]: 'proxy,twin' } };
    const result = plan(pod, { templates: [proxy, twin] });
    assert.deepEqual(result.injected, ['proxy']);
    assert.deepEqual(result.refused.map((r) => [r.template, r.reason]), [['twin', 'collision']]);
  });

  it('a mount of a volume neither the pod nor the template declares', () => {
    const pod = basePod();
    pod.metadata = { ...pod.metadata, annotations: { [INJECT.sidecars]: 'logs' } };
    const result = plan(pod);
    assert.deepEqual(result.ops, []);
    assert.equal(result.refused[0]?.reason, 'missing-volume');
    assert.match(result.refused[0]?.warning ?? '', /mounts volume "app-logs"/);
  });

  it('unknown and invalid templates are named in the warning; a long unknown name is cut short', () => {
    const broken = parseTemplate('broken', { default: true, containers: [{ name: 'x' }] });
    const pod = basePod();
    pod.metadata = { ...pod.metadata, annotations: { [INJECT.sidecars]: `broken,${'n'.repeat(300)}` } };
    const result = plan(pod, { templates: [broken] });
    assert.deepEqual(result.refused.map((r) => r.reason), ['invalid-template', 'unknown-template']);
    assert.match(result.refused[0]?.warning ?? '', /template is invalid \(containers\[0\] \(x\) needs an image\)/);
    assert.ok((result.refused[1]?.warning.length ?? 999) < 120, result.refused[1]?.warning);
  });

  it('a long template error is cut short in the warning, which the API server would otherwise truncate', () => {
    const broken = parseTemplate('broken', { default: true, containers: [{ name: 'x', image: 'i' }], downwardEnv: { X: 'spec.nope' } });
    assert.ok((broken.error?.length ?? 0) > 200, 'the fieldPath error lists every allowed path');
    const warning = plan(basePod(), { templates: [broken] }).refused[0]?.warning ?? '';
    assert.ok(warning.length <= 256, `${warning.length} characters`);
    assert.match(warning, /see the gateway log\)$/);
  });
});

describe('pod injection: idempotent on re-invocation', () => {
  it('a second call on our own output adds nothing', () => {
    const first = patched(basePod());
    assert.ok(first.result.ops.length > 0);
    const second = plan(first.pod);
    assert.deepEqual(second.ops, []);
    assert.deepEqual(second.present, ['proxy']);
    assert.deepEqual(second.refused, [], 'our own sidecar is no collision');
  });

  it('after another webhook changed the pod, only templates not yet injected are added, and the record grows', () => {
    const first = patched(basePod());
    const changed = structuredClone(first.pod);
    (changed.metadata!.annotations as Record<string, string>)[INJECT.sidecars] = 'proxy,extra';
    const extra = parseTemplate('extra', { containers: [{ name: 'extra', image: 'x' }] });
    const { pod: out, result } = patched(changed, { templates: [...TEMPLATES, extra] });
    assert.deepEqual(result.injected, ['extra']);
    assert.deepEqual(names(out.spec?.containers), ['app', 'proxy', 'extra']);
    assert.equal((out.metadata?.annotations as Record<string, string>)[INJECT.injected], 'proxy,extra');
  });
});

describe('pod injection: property', () => {
  const container = fc.record({ name: fc.constantFrom('app', 'proxy', 'proxy-init', 'worker', 'log-shipper'), image: fc.constant('img') });
  const volume = fc.record({ name: fc.constantFrom('data', 'proxy-config', 'app-logs', 'cache'), emptyDir: fc.constant({}) });
  const uniqueByName = <T extends { name: string }>(arb: fc.Arbitrary<T>) => fc.uniqueArray(arb, { selector: (x) => x.name, maxLength: 3 });
  const maybe = <T>(arb: fc.Arbitrary<T>) => fc.option(arb, { nil: undefined });
  const annotations = fc.dictionary(fc.constantFrom('a/b', 'x~y', 'example.com/z', INJECT.sidecars), fc.constantFrom('proxy', 'logs', 'proxy,logs', 'v'));
  // Valid input pods: container names unique across containers and init containers together, as the API server demands.
  const pod = fc
    .record({
      metadata: fc.record({ name: maybe(fc.constant('p')), annotations: maybe(fc.oneof(annotations, fc.constant(null))) }, { requiredKeys: [] }),
      all: fc.uniqueArray(container, { selector: (x) => x.name, maxLength: 4 }),
      split: fc.nat(4),
      shape: fc.record({ containers: fc.constantFrom('list', 'null', 'absent'), initContainers: fc.constantFrom('list', 'absent'), volumes: fc.constantFrom('list', 'null', 'absent') }),
      volumes: uniqueByName(volume),
    })
    .map(({ metadata, all, split, shape, volumes }) => {
      const spec: Record<string, unknown> = {};
      const put = (key: 'containers' | 'initContainers' | 'volumes', list: unknown[]) => {
        if (shape[key] === 'list') spec[key] = list;
        else if (shape[key] === 'null') spec[key] = null;
      };
      put('containers', all.slice(0, split));
      put('initContainers', all.slice(split));
      put('volumes', volumes);
      return { metadata, spec };
    });

  it('the patch always applies, every injected sidecar is there exactly once, names stay unique, and a second pass adds nothing', () => {
    fc.assert(
      fc.property(pod, (p) => {
        const podIn = JSON.parse(JSON.stringify(p)) as Pod; // drops undefined members, as JSON on the wire would
        const { pod: out, result } = patched(podIn);
        const all = [...names(out.spec?.containers), ...names(out.spec?.initContainers)];
        assert.equal(new Set(all).size, all.length, `duplicate container names: ${all}`);
        const vols = names(out.spec?.volumes);
        assert.equal(new Set(vols).size, vols.length, `duplicate volume names: ${vols}`);
        for (const t of result.injected) {
          const entry = TEMPLATES.find((e) => e.name === t)!;
          for (const c of [...entry.template!.containers, ...entry.template!.initContainers]) {
            assert.equal(all.filter((n) => n === c.name).length, 1, `${c.name} once`);
          }
        }
        if (result.injected.length > 0) {
          assert.deepEqual(nameList((out.metadata?.annotations as Record<string, string>)[INJECT.injected]), result.injected);
        } else {
          assert.deepEqual(result.ops, []);
        }
        // Every mount of an injected container resolves to a volume of the patched pod.
        for (const c of (out.spec?.containers as Array<{ volumeMounts?: Array<{ name: string }> }> | undefined) ?? []) {
          for (const m of c.volumeMounts ?? []) assert.ok(vols.includes(m.name), `mount ${m.name} has a volume`);
        }
        assert.deepEqual(plan(out).ops, [], 'idempotent');
      }),
      { numRuns: 400 },
    );
  });
});

describe('pod injection: the annotation oversell.io/injected is a report, not a decision', () => {
  it('a forged annotation naming the template does not keep its sidecar out', () => {
    const pod = basePod();
    pod.metadata = { ...pod.metadata, annotations: { [INJECT.injected]: 'proxy' } };
    const { pod: out, result } = patched(pod);
    assert.deepEqual(result.injected, ['proxy']);
    assert.deepEqual(names(out.spec?.containers), ['app', 'proxy']);
    assert.equal((out.metadata?.annotations as Record<string, string>)[INJECT.injected], 'proxy');
  });

  it('a re-invocation after the API server defaulted the pod and mounted the token into our containers adds nothing', () => {
    const first = patched(basePod()).pod;
    const defaulted = structuredClone(first) as Pod & { spec: { containers: Array<Record<string, unknown>> } };
    (defaulted.spec.volumes as unknown[]).push(TOKEN_VOLUME);
    for (const c of defaulted.spec.containers) {
      c.terminationMessagePath = '/dev/termination-log';
      c.imagePullPolicy = 'IfNotPresent';
      c.volumeMounts = [...((c.volumeMounts as unknown[]) ?? []), TOKEN_MOUNT];
      c.env = ((c.env as Array<Record<string, unknown>>) ?? []).map((e) => (e.valueFrom ? { ...e, valueFrom: { fieldRef: { apiVersion: 'v1', ...(e.valueFrom as { fieldRef: object }).fieldRef } } } : e));
    }
    const again = plan(defaulted);
    assert.deepEqual(again.ops, []);
    assert.deepEqual(again.present, ['proxy']);
    assert.deepEqual(again.refused, []);
  });

  it('a container that only has the sidecar\'s name (another image) is a collision, not the sidecar', () => {
    const pod = basePod();
    (pod.spec as Record<string, unknown>).containers = [{ name: 'app', image: 'shop:1' }, { name: 'proxy', image: 'busybox' }];
    pod.metadata = { ...pod.metadata, annotations: { [INJECT.injected]: 'proxy' } };
    const result = plan(pod);
    assert.deepEqual(result.present, []);
    assert.equal(result.refused[0]?.reason, 'collision');
  });
});

describe('pod injection: namespaces that require their sidecars (/mutate/pods/required)', () => {
  const required = (pod: unknown, over: Partial<InjectionInput> = {}) => patched(pod, { required: true, ...over });

  it('the pod cannot opt out with oversell.io/inject: disabled', () => {
    const pod = basePod();
    pod.metadata = { ...pod.metadata, annotations: { [INJECT.optIn]: 'disabled' } };
    const { pod: out, result } = required(pod);
    assert.equal(result.skipped, undefined);
    assert.deepEqual(result.injected, ['proxy']);
    assert.deepEqual(names(out.spec?.containers), ['app', 'proxy']);
  });

  it('an empty oversell.io/sidecars does not drop the defaults', () => {
    const pod = basePod();
    pod.metadata = { ...pod.metadata, annotations: { [INJECT.sidecars]: '' } };
    assert.deepEqual(required(pod).result.injected, ['proxy']);
  });

  it('oversell.io/sidecars adds templates to the defaults', () => {
    const pod = basePod();
    pod.metadata = { ...pod.metadata, annotations: { [INJECT.sidecars]: 'logs' } };
    (pod.spec as Record<string, unknown>).volumes = [{ name: 'app-logs', emptyDir: {} }];
    assert.deepEqual(required(pod).result.injected, ['proxy', 'logs']);
  });

  it('a forged oversell.io/injected does not skip injection', () => {
    const pod = basePod();
    pod.metadata = { ...pod.metadata, annotations: { [INJECT.injected]: 'proxy', [INJECT.optIn]: 'disabled' } };
    assert.deepEqual(required(pod).result.injected, ['proxy']);
  });

  it('a default template that cannot be added refuses the pod, with no patch', () => {
    const pod = basePod();
    (pod.spec as Record<string, unknown>).containers = [{ name: 'app', image: 'shop:1' }, { name: 'proxy', image: 'busybox' }];
    const result = plan(pod, { required: true });
    assert.deepEqual(result.ops, []);
    assert.match(result.denied ?? '', /namespace shop requires its sidecars and "proxy" could not be added \(sidecar "proxy" not injected: container name "proxy" is already in the pod, and it is not the template's \(image differs\)\)/);
  });

  it('an invalid default template refuses the pod too: no pod runs without it', () => {
    const broken = parseTemplate('proxy', { default: true, containers: [{ name: 'proxy' }] });
    assert.match(plan(basePod(), { required: true, templates: [broken] }).denied ?? '', /"proxy" could not be added \(.*the template is invalid/);
  });

  it('a template the pod adds itself and that cannot be added is only a warning', () => {
    const pod = basePod();
    pod.metadata = { ...pod.metadata, annotations: { [INJECT.sidecars]: 'nope' } };
    const result = plan(pod, { required: true });
    assert.equal(result.denied, undefined);
    assert.deepEqual(result.injected, ['proxy']);
    assert.deepEqual(result.refused.map((r) => r.reason), ['unknown-template']);
  });

  it('the same pods outside required namespaces still opt out as before', () => {
    const pod = basePod();
    pod.metadata = { ...pod.metadata, annotations: { [INJECT.optIn]: 'disabled' } };
    assert.match(plan(pod).skipped ?? '', /opted out/);
    pod.metadata = { ...pod.metadata, annotations: { [INJECT.sidecars]: '' } };
    assert.deepEqual(plan(pod).injected, []);
  });
});

describe('pod injection: templates limited to namespaces', () => {
  const payments = parseTemplate('vault', { default: true, namespaces: ['payments', 'billing'], containers: [{ name: 'vault-agent', image: 'vault:1.17' }] });

  it('a default template limited to other namespaces is no default here: nothing injected, no warning', () => {
    const result = plan(basePod(), { templates: [payments] });
    assert.deepEqual(result.injected, []);
    assert.deepEqual(result.refused, []);
    assert.deepEqual(plan(basePod(), { templates: [payments], namespace: 'payments' }).injected, ['vault']);
  });

  it('a pod elsewhere that names it gets a warning and no sidecar', () => {
    const pod = basePod();
    pod.metadata = { ...pod.metadata, annotations: { [INJECT.sidecars]: 'vault' } };
    const result = plan(pod, { templates: [payments] });
    assert.deepEqual(result.ops, []);
    assert.equal(result.refused[0]?.reason, 'namespace-not-allowed');
    assert.match(result.refused[0]?.warning ?? '', /limited to other namespaces than "shop"/);
  });

  it('in a required namespace it is not required elsewhere, and an invalid limited template concerns only its namespaces', () => {
    assert.equal(plan(basePod(), { templates: [payments], required: true }).denied, undefined);
    const broken = parseTemplate('vault', { default: true, namespaces: ['payments'], containers: [{ name: 'vault-agent' }] });
    assert.deepEqual(broken.namespaces, ['payments']);
    assert.equal(plan(basePod(), { templates: [broken], required: true }).denied, undefined);
    assert.ok(plan(basePod(), { templates: [broken], required: true, namespace: 'payments' }).denied);
  });
});

describe('pod injection: a container of the sidecar\'s name is the sidecar only when it is exactly the template', () => {
  // A template with what a real auth proxy carries: a Secret volume, env from a
  // Secret, resources, a locked-down securityContext, a probe, a native sidecar.
  const auth = parseTemplate('auth', {
    default: true,
    initContainers: [{ name: 'auth-init', image: 'example.com/auth-init:2', restartPolicy: 'Always', volumeMounts: [{ name: 'auth-certs', mountPath: '/etc/auth', readOnly: true }] }],
    containers: [{
      name: 'auth-proxy',
      image: 'example.com/auth-proxy:2',
      args: ['--upstream=127.0.0.1:8080'],
      tty: false,
      ports: [{ containerPort: 4180 }],
      env: [{ name: 'TOKEN', valueFrom: { secretKeyRef: { name: 'auth-proxy', key: 'token' } } }],
      resources: { requests: { cpu: '100m' }, limits: { cpu: '1000m', memory: '128Mi' } },
      securityContext: { runAsNonRoot: true, readOnlyRootFilesystem: true, allowPrivilegeEscalation: false, capabilities: { drop: ['ALL'] } },
      readinessProbe: { httpGet: { port: 4180 } },
      volumeMounts: [{ name: 'auth-certs', mountPath: '/etc/auth', readOnly: true }],
    }],
    volumes: [{ name: 'auth-certs', secret: { secretName: 'auth-certs' } }],
    downwardEnv: { POD_NAME: 'metadata.name' },
  });
  const DEFAULTED = { terminationMessagePath: '/dev/termination-log', terminationMessagePolicy: 'File', imagePullPolicy: 'IfNotPresent' };
  const POD_NAME = { name: 'POD_NAME', valueFrom: { fieldRef: { apiVersion: 'v1', fieldPath: 'metadata.name' } } };

  type C = Record<string, unknown> & { volumeMounts: Array<Record<string, unknown>>; env: Array<Record<string, unknown>> };
  type Stored = Pod & { spec: { containers: C[]; initContainers: C[]; volumes: Array<Record<string, unknown>> } };

  /**
   * A pod with "auth" injected as the API server stores it (and a copy of it
   * submitted again carries): defaults filled in, "1000m" stored as "1", the
   * memory limit copied to requests, tty: false left out, the ServiceAccount
   * token volume mounted into every container.
   */
  function stored(): Stored {
    return {
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { name: 'web-1', namespace: 'shop', annotations: { [INJECT.injected]: 'auth' } },
      spec: {
        volumes: [{ name: 'data', emptyDir: {} }, TOKEN_VOLUME, { name: 'auth-certs', secret: { secretName: 'auth-certs', defaultMode: 420 } }],
        initContainers: [{
          name: 'auth-init', image: 'example.com/auth-init:2', restartPolicy: 'Always', resources: {}, env: [POD_NAME],
          volumeMounts: [{ name: 'auth-certs', readOnly: true, mountPath: '/etc/auth' }, TOKEN_MOUNT], ...DEFAULTED,
        }],
        containers: [
          { name: 'app', image: 'shop:1', resources: {}, env: [], volumeMounts: [{ name: 'data', mountPath: '/data' }, TOKEN_MOUNT], ...DEFAULTED },
          {
            name: 'auth-proxy',
            image: 'example.com/auth-proxy:2',
            args: ['--upstream=127.0.0.1:8080'],
            ports: [{ containerPort: 4180, protocol: 'TCP' }],
            env: [{ name: 'TOKEN', valueFrom: { secretKeyRef: { name: 'auth-proxy', key: 'token' } } }, POD_NAME],
            resources: { limits: { cpu: '1', memory: '128Mi' }, requests: { cpu: '100m', memory: '128Mi' } },
            volumeMounts: [{ name: 'auth-certs', readOnly: true, mountPath: '/etc/auth' }, TOKEN_MOUNT],
            readinessProbe: { httpGet: { path: '/', port: 4180, scheme: 'HTTP' }, timeoutSeconds: 1, periodSeconds: 10, successThreshold: 1, failureThreshold: 3 },
            securityContext: { capabilities: { drop: ['ALL'] }, runAsNonRoot: true, readOnlyRootFilesystem: true, allowPrivilegeEscalation: false },
            ...DEFAULTED,
          },
        ],
        restartPolicy: 'Always',
        serviceAccountName: 'default',
      },
    };
  }
  const proxyOf = (p: Stored) => p.spec.containers[1]!;
  const volume = (p: Stored, name: string) => p.spec.volumes.findIndex((v) => v.name === name);

  it('our own patch, then the API server\'s stored form of it, are both recognised: nothing added twice', () => {
    const first = patched(basePod(), { templates: [auth], required: true });
    assert.deepEqual(first.result.injected, ['auth']);
    assert.deepEqual(plan(first.pod, { templates: [auth], required: true }).present, ['auth']);
    const again = plan(stored(), { templates: [auth], required: true });
    assert.deepEqual([again.present, again.ops, again.refused, again.denied], [['auth'], [], [], undefined]);
  });

  const same: Array<[string, (p: Stored) => void]> = [
    ['imagePullPolicy Always where the template leaves it to the default (the AlwaysPullImages admission plugin)', (p) => (proxyOf(p).imagePullPolicy = 'Always')],
    ['another spelling of the same quantity (134217728 for 128Mi, 0.1 for 100m)', (p) => (proxyOf(p).resources = { limits: { cpu: '1000m', memory: '134217728' }, requests: { cpu: '0.1', memory: '128Mi' } })],
    ['no ServiceAccount token (automountServiceAccountToken: false)', (p) => {
      p.spec.volumes.splice(volume(p, TOKEN_VOLUME.name), 1);
      for (const c of [...p.spec.containers, ...p.spec.initContainers]) c.volumeMounts = c.volumeMounts.filter((m) => m.name !== TOKEN_VOLUME.name);
    }],
    ['zero values written out that Go leaves out (readOnly: false on the app, tty: false)', (p) => {
      proxyOf(p).tty = false;
      p.spec.containers[0]!.volumeMounts[0]!.readOnly = false;
    }],
  ];
  for (const [what, change] of same) {
    it(`the same sidecar: ${what}`, () => {
      const pod = stored();
      change(pod);
      const result = plan(pod, { templates: [auth], required: true });
      assert.deepEqual([result.present, result.ops, result.denied], [['auth'], [], undefined]);
    });
  }

  // All but the readOnly flip and the command ran as the sidecar under the
  // comparison before this one (name, image, command, args, env values, mounts
  // as a subset, volumes by name).
  const lookAlikes: Array<[string, (p: Stored) => void, string]> = [
    ['a volume of the same name from an emptyDir instead of the template\'s Secret', (p) => (p.spec.volumes[volume(p, 'auth-certs')] = { name: 'auth-certs', emptyDir: {} }), 'volume name "auth-certs" is already in the pod, and it is not the template\'s (source: emptyDir, not secret)'],
    ['a volume of the same name from another Secret', (p) => (p.spec.volumes[volume(p, 'auth-certs')] = { name: 'auth-certs', secret: { secretName: 'mine', defaultMode: 420 } }), '"auth-certs" is already in the pod, and it is not the template\'s (secret differs)'],
    ['env valueFrom the pod author\'s ConfigMap instead of the template\'s Secret', (p) => (proxyOf(p).env[0]!.valueFrom = { configMapKeyRef: { name: 'mine', key: 'token' } }), '(env differs)'],
    ['envFrom added', (p) => (proxyOf(p).envFrom = [{ configMapRef: { name: 'mine' } }]), '(envFrom differs)'],
    ['an extra env variable', (p) => proxyOf(p).env.push({ name: 'HTTPS_PROXY', value: 'http://mine:3128' }), '(env differs)'],
    ['an extra mount', (p) => proxyOf(p).volumeMounts.push({ name: 'data', mountPath: '/etc/auth/extra' }), '(volumeMounts differs)'],
    ['a subPath added to the template\'s mount', (p) => (proxyOf(p).volumeMounts[0]!.subPath = 'other'), '(volumeMounts differs)'],
    ['readOnly flipped on the template\'s mount', (p) => delete proxyOf(p).volumeMounts[0]!.readOnly, '(volumeMounts differs)'],
    ['a mount at the token path from the pod author\'s own volume', (p) => (proxyOf(p).volumeMounts[1] = { name: 'data', readOnly: true, mountPath: TOKEN_MOUNT.mountPath }), '(volumeMounts differs)'],
    ['resources changed', (p) => ((proxyOf(p).resources as { limits: Record<string, string> }).limits.cpu = '4'), '(resources differs)'],
    ['securityContext loosened', (p) => ((proxyOf(p).securityContext as Record<string, unknown>).allowPrivilegeEscalation = true), '(securityContext differs)'],
    ['restartPolicy changed (the init container is no longer a native sidecar)', (p) => delete p.spec.initContainers[0]!.restartPolicy, 'container name "auth-init" is already in the pod, and it is not the template\'s (restartPolicy differs)'],
    ['terminationMessagePolicy other than the default', (p) => (proxyOf(p).terminationMessagePolicy = 'FallbackToLogsOnError'), '(terminationMessagePolicy differs)'],
    ['a command over the image\'s entrypoint', (p) => (proxyOf(p).command = ['/bin/sh', '-c', 'sleep infinity']), '(command differs)'],
  ];
  for (const [what, change, difference] of lookAlikes) {
    it(`a look-alike is refused: ${what}`, () => {
      const pod = stored();
      change(pod);
      const required = plan(pod, { templates: [auth], required: true });
      assert.deepEqual([required.present, required.ops], [[], []]);
      assert.ok(required.denied?.includes(difference), `${required.denied} should say ${difference}`);
      assert.match(required.denied ?? '', /^oversell: namespace shop requires its sidecars and "auth" could not be added/);
      assert.deepEqual(required.injected, [], 'a refused pod got nothing injected');
      // Elsewhere the pod runs, without the sidecar, and its creator is told why.
      const elsewhere = plan(pod, { templates: [auth] });
      assert.deepEqual([elsewhere.present, elsewhere.ops, elsewhere.denied], [[], [], undefined]);
      assert.equal(elsewhere.refused[0]?.reason, 'collision');
      assert.ok(elsewhere.refused[0]!.warning.includes(difference) && elsewhere.refused[0]!.warning.length <= 256, elsewhere.refused[0]!.warning);
    });
  }
});
