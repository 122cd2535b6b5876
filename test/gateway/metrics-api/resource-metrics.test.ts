// The objects of metrics.k8s.io/v1beta1 (gateway/metrics-api/resource-metrics.ts)
// as metrics-server writes them: quantities, times, windows, what is left
// out (stale data, the sandbox container, a pod with no named container), and
// the field selectors the API server accepts.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  BadRequest, cpuQuantity, fieldsMatch, forbidden, goDuration, memoryQuantity, metaTime, nodeMetrics, notFound, parseFieldSelector, podMetrics, podsStamp,
  type NodeReading, type PodsReading,
} from '../../../gateway/metrics-api/resource-metrics.js';
import type { DirectoryPod } from '../../../gateway/store/pod-directory.js';

const APP = 'a'.repeat(64);
const SIDECAR = 'b'.repeat(64);
const PAUSE = 'c'.repeat(64);
const NOW = Date.parse('2026-11-30T12:00:10.500Z');

describe('quantities as apimachinery prints metrics-server\'s', () => {
  const cpu: Array<[number, string]> = [[0, '0'], [1, '1m'], [250, '250m'], [1000, '1'], [1500, '1500m'], [16_000, '16'], [999_999, '999999m'], [1_000_000, '1k'], [1_500_000, '1500']];
  for (const [m, s] of cpu) it(`cpu ${m} millicores: ${s}`, () => assert.equal(cpuQuantity(m), s));
  // BinarySI, as metrics-server's uint64Quantity(..., resource.BinarySI, 0): a binary suffix only where exact; under 1024 apimachinery prints it as DecimalSI (1000 is "1k").
  const memory: Array<[number, string]> = [
    [0, '0'], [1000, '1k'], [1023, '1023'], [4096, '4Ki'], [123 * 1024, '123Ki'], [1024 ** 2, '1Mi'], [1536 * 1024 ** 2, '1536Mi'], [2 * 1024 ** 3, '2Gi'], [1_500_000_000, '1500000000'], [2 ** 60, '1Ei'], [3 * 2 ** 60, '3Ei'],
  ];
  for (const [b, s] of memory) it(`memory ${b} bytes: ${s}`, () => assert.equal(memoryQuantity(b), s));
});

describe('times and windows', () => {
  it('metav1.Time is RFC 3339 in whole seconds, UTC', () => assert.equal(metaTime(NOW), '2026-11-30T12:00:10Z'));
  const windows: Array<[number, string]> = [[0, '0s'], [500, '500ms'], [1000, '1s'], [1002, '1.002s'], [10_500, '10.5s'], [60_000, '1m0s'], [90_000, '1m30s'], [3_600_000, '1h0m0s']];
  for (const [ms, s] of windows) it(`a window of ${ms} ms is Go's ${s}`, () => assert.equal(goDuration(ms), s));
});

const node = (over: Partial<NodeReading> = {}): NodeReading => ({
  name: 'node-a', labels: { zone: 'z1' }, timestampMs: NOW - 1500, windowMs: 1000, cpuMillicores: 1234, memoryWorkingSetBytes: 2 * 1024 ** 3, ageMs: 2000, ...over,
});

describe('NodeMetrics', () => {
  it('carries the node\'s usage, labels, the sample\'s time and the rate\'s window', () => {
    assert.deepEqual(nodeMetrics(node(), 40_000, NOW), {
      kind: 'NodeMetrics',
      apiVersion: 'metrics.k8s.io/v1beta1',
      metadata: { name: 'node-a', labels: { zone: 'z1' }, creationTimestamp: '2026-11-30T12:00:10Z' },
      timestamp: '2026-11-30T12:00:09Z',
      window: '1s',
      usage: { cpu: '1234m', memory: '2Gi' },
    });
  });
  it('a node with no labels has no labels field', () => assert.equal(nodeMetrics(node({ labels: {} }), 40_000, NOW)?.metadata.labels, undefined));
  const stale: Array<[string, Partial<NodeReading>, boolean]> = [
    ['fresh', { ageMs: 39_999 }, true],
    ['exactly at the limit', { ageMs: 40_000 }, true],
    ['older than the policy\'s staleAfter', { ageMs: 40_001 }, false],
    ['never sampled', { timestampMs: 0 }, false],
  ];
  for (const [what, over, served] of stale) it(`${what}: ${served ? 'served' : 'left out'}`, () => assert.equal(nodeMetrics(node(over), 40_000, NOW) !== undefined, served));
});

const pod: DirectoryPod = { uid: 'u1', namespace: 'shop', name: 'web-1', node: 'node-a', labels: { app: 'web' }, containers: [APP, 'app', SIDECAR, 'proxy'] };
const reading = (over: Partial<PodsReading> = {}): PodsReading => ({ timestampMs: NOW - 4000, windowMs: 10_000, ageMs: 3000, pods: [], ...over });
const usage = (containers: Array<[string, number, number]>) => ({
  uid: 'u1', qosClass: 'burstable', cpuUsageMillicores: 0, memoryWorkingSetBytes: 0, cpuThrottledMicros: 0,
  containers: containers.map(([containerId, cpuUsageMillicores, memoryWorkingSetBytes]) => ({ containerId, cpuUsageMillicores, memoryWorkingSetBytes })),
});

describe('PodMetrics', () => {
  it('one entry per container by name; the sandbox (pause), whose id no status lists, is dropped', () => {
    const m = podMetrics(pod, usage([[PAUSE, 1, 40_960], [APP, 120, 64 * 1024 ** 2], [SIDECAR, 5, 12 * 1024 ** 2]]), reading(), 40_000, podsStamp(reading(), NOW));
    assert.deepEqual(m, {
      kind: 'PodMetrics',
      apiVersion: 'metrics.k8s.io/v1beta1',
      metadata: { name: 'web-1', namespace: 'shop', labels: { app: 'web' }, creationTimestamp: '2026-11-30T12:00:10Z' },
      timestamp: '2026-11-30T12:00:06Z',
      window: '10s',
      containers: [{ name: 'app', usage: { cpu: '120m', memory: '64Mi' } }, { name: 'proxy', usage: { cpu: '5m', memory: '12Mi' } }],
    });
  });
  const omitted: Array<[string, ReturnType<typeof usage>, Partial<PodsReading>]> = [
    ['no container named yet (only the sandbox reported)', usage([[PAUSE, 1, 40_960]]), {}],
    ['no containers at all (an agent from before issue 33)', usage([]), {}],
    ['the report is older than staleAfter', usage([[APP, 1, 4096]]), { ageMs: 40_001 }],
    ['the window is unknown (the first report this gateway saw)', usage([[APP, 1, 4096]]), { windowMs: 0 }],
  ];
  for (const [what, u, over] of omitted) it(`left out: ${what}`, () => assert.equal(podMetrics(pod, u, reading(over), 40_000, podsStamp(reading(over), NOW)), undefined));
});

describe('field selectors, as the API server takes them for a kind without field label conversions', () => {
  it('metadata.name and metadata.namespace, with =, == and !=', () => {
    const s = parseFieldSelector('metadata.name=web-1,metadata.namespace!=kube-system');
    assert.equal(fieldsMatch(s, 'web-1', 'shop'), true);
    assert.equal(fieldsMatch(s, 'web-2', 'shop'), false);
    assert.equal(fieldsMatch(s, 'web-1', 'kube-system'), false);
    assert.equal(fieldsMatch(parseFieldSelector('metadata.name==n1'), 'n1', ''), true);
  });
  it('nodes have the empty namespace', () => {
    assert.equal(fieldsMatch(parseFieldSelector('metadata.namespace='), 'n1', ''), true);
    assert.equal(fieldsMatch(parseFieldSelector('metadata.namespace=x'), 'n1', ''), false);
  });
  it('empty selects everything', () => assert.equal(parseFieldSelector(' '), undefined));
  it('any other field is a 400 with the API server\'s words', () => {
    assert.throws(() => parseFieldSelector('spec.nodeName=n1'), (e: Error) => e instanceof BadRequest && e.message === '"spec.nodeName" is not a known field selector: only "metadata.name", "metadata.namespace"');
  });
  it('a term without an operator is a 400', () => assert.throws(() => parseFieldSelector('metadata.name'), BadRequest));
});

describe('refusals as metav1.Status', () => {
  it('404 names the resource as metrics-server does', () => {
    assert.deepEqual(notFound('pods', 'shop/web-9'), {
      kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Failure', message: 'pods.metrics.k8s.io "shop/web-9" not found', reason: 'NotFound',
      details: { name: 'shop/web-9', group: 'metrics.k8s.io', kind: 'pods' }, code: 404,
    });
  });
  it('403 names the user, the verb and the scope', () => {
    assert.equal(forbidden('bob', 'list', 'pods', 'shop', undefined, '').message, 'pods.metrics.k8s.io is forbidden: User "bob" cannot list resource "pods" in API group "metrics.k8s.io" in the namespace "shop"');
    assert.equal(forbidden('bob', 'get', 'nodes', undefined, 'n1', 'no RBAC policy matched').message, 'nodes.metrics.k8s.io "n1" is forbidden: User "bob" cannot get resource "nodes" in API group "metrics.k8s.io" at the cluster scope: no RBAC policy matched');
  });
});
