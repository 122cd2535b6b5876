// QoS class and exclusive CPUs from a pod's spec (lib/pod-qos.ts), as the
// kubelet computes them: a table, one row per rule.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { V1Pod } from '@kubernetes/client-node';
import { exclusiveCpus, qosClass } from '../../lib/pod-qos.js';

const pod = (containers: Array<{ requests?: Record<string, string>; limits?: Record<string, string> }>, init: typeof containers = []): V1Pod => ({
  spec: {
    containers: containers.map((resources, i) => ({ name: `c${i}`, resources })),
    initContainers: init.map((resources, i) => ({ name: `i${i}`, resources })),
  },
});

describe('qosClass', () => {
  const rows: Array<[string, V1Pod, string]> = [
    ['nothing requested or limited', pod([{}]), 'BestEffort'],
    ['limits only: requests default to them', pod([{ limits: { cpu: '1', memory: '1Gi' } }]), 'Guaranteed'],
    ['requests equal to limits', pod([{ requests: { cpu: '500m', memory: '1Gi' }, limits: { cpu: '0.5', memory: '1024Mi' } }]), 'Guaranteed'],
    ['a request below its limit', pod([{ requests: { cpu: '250m', memory: '1Gi' }, limits: { cpu: '500m', memory: '1Gi' } }]), 'Burstable'],
    ['memory not limited', pod([{ requests: { cpu: '1' }, limits: { cpu: '1' } }]), 'Burstable'],
    ['one container of two not guaranteed', pod([{ limits: { cpu: '1', memory: '1Gi' } }, { requests: { cpu: '1' } }]), 'Burstable'],
    ['an init container counts', pod([{ limits: { cpu: '1', memory: '1Gi' } }], [{ requests: { memory: '1Mi' } }]), 'Burstable'],
  ];
  for (const [what, p, want] of rows) it(what, () => assert.equal(qosClass(p), want));
  it('pod-level resources decide when set', () => {
    assert.equal(qosClass({ spec: { containers: [{ name: 'c' }], resources: { limits: { cpu: '2', memory: '2Gi' } } } }), 'Guaranteed');
  });
});

describe('exclusiveCpus', () => {
  it('whole cores of a Guaranteed pod\'s containers, summed', () => assert.equal(exclusiveCpus(pod([{ limits: { cpu: '2', memory: '1Gi' } }, { limits: { cpu: '1000m', memory: '1Gi' } }])), 3));
  it('a fractional container shares the pool', () => assert.equal(exclusiveCpus(pod([{ limits: { cpu: '1500m', memory: '1Gi' } }, { limits: { cpu: '1', memory: '1Gi' } }])), 1));
  it('none for a Burstable pod, whole cores or not', () => assert.equal(exclusiveCpus(pod([{ requests: { cpu: '2' }, limits: { cpu: '2' } }])), 0));
});
