// gateway/inject/stored-form.ts: a pod's container or volume against a
// template's, after both are brought to what the API server stores. The
// look-alikes a pod author could write are rows in pod-injection.test.ts; here
// the defaults themselves, one row each, read from k8s.io/kubernetes
// pkg/apis/core/v1 (defaults.go, zz_generated.defaults.go) at v1.36.3.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { containerDifference, defaultPullPolicy, TOKEN_MOUNT_PATH, volumeDifference, type PodContext } from '../../../gateway/inject/stored-form.js';

const POD: PodContext = { volumes: new Map(), hostNetwork: false };

describe('defaultPullPolicy (SetDefaults_Container)', () => {
  const rows: Array<[string, string]> = [
    ['envoy', 'Always'],
    ['envoy:latest', 'Always'],
    ['envoy:1.30', 'IfNotPresent'],
    ['registry.example.com:5000/envoy', 'Always'],
    ['registry.example.com:5000/envoy:1.30', 'IfNotPresent'],
    ['envoy@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef', 'IfNotPresent'],
    ['envoy:latest@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef', 'Always'],
  ];
  for (const [image, policy] of rows) it(`${image}: ${policy}`, () => assert.equal(defaultPullPolicy(image), policy));
});

describe('containerDifference: what the API server fills in is no difference', () => {
  const template = { name: 's', image: 'envoy:1.30' };
  const rows: Array<[string, Record<string, unknown>, Record<string, unknown>, PodContext?]> = [
    ['imagePullPolicy, terminationMessagePath and -Policy, an empty resources', template, { ...template, imagePullPolicy: 'IfNotPresent', terminationMessagePath: '/dev/termination-log', terminationMessagePolicy: 'File', resources: {} }],
    ['port protocol TCP', { ...template, ports: [{ containerPort: 80 }] }, { ...template, ports: [{ containerPort: 80, protocol: 'TCP' }] }],
    ['hostPort = containerPort on the host network', { ...template, ports: [{ containerPort: 80 }] }, { ...template, ports: [{ containerPort: 80, protocol: 'TCP', hostPort: 80 }] }, { ...POD, hostNetwork: true }],
    ['a fieldRef\'s apiVersion', { ...template, env: [{ name: 'N', valueFrom: { fieldRef: { fieldPath: 'spec.nodeName' } } }] }, { ...template, env: [{ name: 'N', valueFrom: { fieldRef: { apiVersion: 'v1', fieldPath: 'spec.nodeName' } } }] }],
    ['an empty env value', { ...template, env: [{ name: 'E', value: '' }] }, { ...template, env: [{ name: 'E' }] }],
    ['requests copied from limits, quantities by value', { ...template, resources: { limits: { cpu: '500m', memory: '1Gi' } } }, { ...template, resources: { limits: { cpu: '0.5', memory: '1Gi' }, requests: { cpu: '500m', memory: '1073741824' } } }],
    ['probe and httpGet defaults', { ...template, livenessProbe: { httpGet: { port: 8080 }, timeoutSeconds: 0 } }, { ...template, livenessProbe: { httpGet: { path: '/', port: 8080, scheme: 'HTTP' }, timeoutSeconds: 1, periodSeconds: 10, successThreshold: 1, failureThreshold: 3 } }],
    ['a gRPC probe\'s service', { ...template, startupProbe: { grpc: { port: 9000 } } }, { ...template, startupProbe: { grpc: { port: 9000, service: '' }, timeoutSeconds: 1, periodSeconds: 10, successThreshold: 1, failureThreshold: 3 } }],
    ['a resize policy of NotRequired (what an absent one means)', template, { ...template, resizePolicy: [{ resourceName: 'cpu', restartPolicy: 'NotRequired' }] }],
  ];
  for (const [what, want, got, pod] of rows) it(what, () => assert.equal(containerDifference(got, want, pod ?? POD), undefined));

  it('but an explicit value other than the default is', () => {
    assert.equal(containerDifference({ ...template, imagePullPolicy: 'Never' }, template, POD), 'imagePullPolicy differs');
    assert.equal(containerDifference({ ...template, ports: [{ containerPort: 80, protocol: 'UDP' }] }, { ...template, ports: [{ containerPort: 80 }] }, POD), 'ports differs');
    assert.equal(containerDifference({ ...template, resources: { limits: { cpu: '1' }, requests: { cpu: '10m' } } }, { ...template, resources: { limits: { cpu: '1' } } }, POD), 'resources differs');
    assert.equal(containerDifference({ ...template, securityContext: {} }, { ...template, securityContext: { privileged: false } }, POD), 'securityContext differs', 'a pointer field keeps its false');
  });

  it('the token mount is tolerated only from the ServiceAccount plugin\'s own volume, and only where the template mounts nothing there', () => {
    const token = { name: 'kube-api-access-abcde', projected: { defaultMode: 420, sources: [{ serviceAccountToken: { expirationSeconds: 3607, path: 'token' } }, { configMap: { name: 'kube-root-ca.crt', items: [{ key: 'ca.crt', path: 'ca.crt' }] } }, { downwardAPI: { items: [{ path: 'namespace', fieldRef: { apiVersion: 'v1', fieldPath: 'metadata.namespace' } }] } }] } };
    const mount = { name: token.name, readOnly: true, mountPath: TOKEN_MOUNT_PATH };
    const got = { ...template, volumeMounts: [mount] };
    assert.equal(containerDifference(got, template, { ...POD, volumes: new Map([[token.name, token]]) }), undefined);
    const forged = { ...token, projected: { ...token.projected, sources: [{ configMap: { name: 'mine', items: [{ key: 'ca.crt', path: 'ca.crt' }] } }] } };
    assert.equal(containerDifference(got, template, { ...POD, volumes: new Map([[token.name, forged]]) }), 'volumeMounts differs');
    assert.equal(containerDifference({ ...got, volumeMounts: [{ ...mount, subPath: 'token' }] }, template, { ...POD, volumes: new Map([[token.name, token]]) }), 'volumeMounts differs');
  });
});

describe('volumeDifference: by source and content', () => {
  const rows: Array<[string, Record<string, unknown>, Record<string, unknown>, string | undefined]> = [
    ['no source is an emptyDir', { name: 'v' }, { name: 'v', emptyDir: {} }, undefined],
    ['a Secret\'s defaultMode', { name: 'v', secret: { secretName: 's' } }, { name: 'v', secret: { secretName: 's', defaultMode: 420 } }, undefined],
    ['a ConfigMap\'s defaultMode and a downwardAPI item\'s apiVersion', { name: 'v', downwardAPI: { items: [{ path: 'n', fieldRef: { fieldPath: 'metadata.name' } }] } }, { name: 'v', downwardAPI: { defaultMode: 420, items: [{ path: 'n', fieldRef: { apiVersion: 'v1', fieldPath: 'metadata.name' } }] } }, undefined],
    ['a hostPath\'s type', { name: 'v', hostPath: { path: '/x' } }, { name: 'v', hostPath: { path: '/x', type: '' } }, undefined],
    ['an emptyDir sizeLimit by value', { name: 'v', emptyDir: { sizeLimit: '1Gi' } }, { name: 'v', emptyDir: { sizeLimit: '1073741824' } }, undefined],
    ['another source', { name: 'v', secret: { secretName: 's' } }, { name: 'v', emptyDir: {} }, 'source: emptyDir, not secret'],
    ['another defaultMode', { name: 'v', secret: { secretName: 's' } }, { name: 'v', secret: { secretName: 's', defaultMode: 511 } }, 'secret differs'],
    ['a Memory emptyDir', { name: 'v', emptyDir: {} }, { name: 'v', emptyDir: { medium: 'Memory' } }, 'emptyDir differs'],
  ];
  for (const [what, want, got, difference] of rows) it(what, () => assert.equal(volumeDifference(got, want), difference));
});
