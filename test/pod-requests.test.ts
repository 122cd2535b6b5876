import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import type { V1Pod } from '@kubernetes/client-node';
import { admittedByKubelet, podRequests, sumRequests } from '../lib/pod-requests.js';
import { filePodSource, noPodSource } from '../agent/requests/pod-source.js';
import { createLogger } from '../lib/log.js';

const c = (name: string, cpu?: string, memory?: string, restartPolicy?: string) => ({
  name,
  image: 'x',
  ...(restartPolicy && { restartPolicy }),
  resources: { requests: { ...(cpu && { cpu }), ...(memory && { memory }) } },
});
const pod = (spec: object, phase = 'Running'): V1Pod => ({ metadata: { name: 'p', namespace: 'n' }, spec, status: { phase } }) as V1Pod;
const MI = 1024n * 1024n;

describe('podRequests (as the scheduler computes them)', () => {
  it('adds up regular containers', () => {
    assert.deepEqual(podRequests(pod({ containers: [c('a', '250m', '64Mi'), c('b', '1', '1Gi')] })), {
      cpuMillicores: 1250n,
      memoryBytes: 1088n * MI,
    });
  });

  it('init containers count at their peak, not added', () => {
    const r = podRequests(pod({ initContainers: [c('i1', '2', '128Mi'), c('i2', '500m', '2Gi')], containers: [c('a', '1', '1Gi')] }));
    assert.deepEqual(r, { cpuMillicores: 2000n, memoryBytes: 2048n * MI });
  });

  it('restartable (sidecar) init containers stay for the life of the pod', () => {
    // sidecar 100m runs alongside: total = 1000 + 100; during init i2: 100 + 1500 = 1600 -> peak 1600
    const r = podRequests(pod({
      initContainers: [c('sidecar', '100m', '10Mi', 'Always'), c('i2', '1500m', '10Mi')],
      containers: [c('a', '1', '100Mi')],
    }));
    assert.equal(r.cpuMillicores, 1600n);
    assert.equal(r.memoryBytes, 110n * MI);
  });

  it('adds pod overhead (RuntimeClass)', () => {
    const r = podRequests(pod({ containers: [c('a', '1', '1Gi')], overhead: { cpu: '250m', memory: '120Mi' } }));
    assert.deepEqual(r, { cpuMillicores: 1250n, memoryBytes: 1144n * MI });
  });

  it('pod-level resources replace the container sum when set', () => {
    const r = podRequests(pod({ resources: { requests: { cpu: '3', memory: '3Gi' } }, containers: [c('a', '1', '1Gi')] }));
    assert.deepEqual(r, { cpuMillicores: 3000n, memoryBytes: 3072n * MI });
  });

  it('containers without requests add nothing', () => {
    assert.deepEqual(podRequests(pod({ containers: [{ name: 'a', image: 'x' }] })), { cpuMillicores: 0n, memoryBytes: 0n });
  });
});

describe('sumRequests', () => {
  it('skips finished pods, counts pending and running ones', () => {
    const s = sumRequests([
      pod({ containers: [c('a', '1', '1Gi')] }, 'Running'),
      pod({ containers: [c('a', '2', '1Gi')] }, 'Pending'),
      pod({ containers: [c('a', '4', '1Gi')] }, 'Succeeded'),
      pod({ containers: [c('a', '8', '1Gi')] }, 'Failed'),
    ]);
    assert.equal(s.cpuMillicores, 3000);
    assert.equal(s.memoryBytes, 2 * 1024 ** 3);
    assert.equal(s.podCount, 2);
  });

  it('names a pod with an invalid quantity and leaves it out', () => {
    const s = sumRequests([pod({ containers: [c('a', 'lots', '1Gi')] }), pod({ containers: [c('a', '1', '1Gi')] })]);
    assert.equal(s.cpuMillicores, 1000);
    assert.equal(s.invalid.length, 1);
    assert.match(s.invalid[0] ?? '', /n\/p: container a requests\.cpu: quantity "lots"/);
  });
});

describe('admittedByKubelet: the kubelet has accepted the pod', () => {
  const withStatus = (status: object): V1Pod => ({ metadata: { name: 'p', namespace: 'n' }, spec: { nodeName: 'n1', containers: [c('a', '64')] }, status }) as V1Pod;
  const cases: Array<[string, object, boolean]> = [
    ['created with spec.nodeName, nothing from the kubelet yet', {}, false],
    ['Pending with no container status (only the scheduler has spoken)', { phase: 'Pending', conditions: [{ type: 'PodScheduled', status: 'True' }] }, false],
    ['Pending with a waiting container status (admitted, pulling)', { phase: 'Pending', containerStatuses: [{ name: 'a', ready: false, restartCount: 0, image: 'x', imageID: '', state: { waiting: { reason: 'ContainerCreating' } } }] }, true],
    ['an init container running', { phase: 'Pending', initContainerStatuses: [{ name: 'i', ready: false, restartCount: 0, image: 'x', imageID: '' }] }, true],
    ['Running', { phase: 'Running' }, true],
  ];
  for (const [what, status, want] of cases) it(`${what}: ${want}`, () => assert.equal(admittedByKubelet(withStatus(status)), want));
});

describe('pod sources', () => {
  const log = createLogger('test', 'silent');
  const dir = mkdtempSync(join(tmpdir(), 'oversell-pods-'));
  after(() => rmSync(dir, { recursive: true, force: true }));

  it('the example pods file gives the documented sums (finished pods excluded)', () => {
    const source = filePodSource(new URL('../examples/local-pods.yaml', import.meta.url).pathname, log);
    assert.deepEqual(source.requests(), { cpuMillicores: 1850, memoryBytes: Math.round(12.25 * 1024 ** 3), podCount: 3, known: true });
  });

  it('reads a v1 List', () => {
    const f = join(dir, 'list.json');
    writeFileSync(f, JSON.stringify({ kind: 'List', items: [{ kind: 'Pod', spec: { containers: [c('a', '1', '1Gi')] } }] }));
    assert.equal(filePodSource(f, log).requests().cpuMillicores, 1000);
  });

  it('a broken file is a clear startup error naming the file', () => {
    const f = join(dir, 'bad.yaml');
    writeFileSync(f, 'kind: Pod\n  bad: [indent');
    assert.throws(() => filePodSource(f, log), new RegExp(`cannot load pods from ${f}`));
  });

  it('without a cluster, requests are unknown rather than zero', () => {
    assert.equal(noPodSource().requests().known, false);
  });
});
