// The kubelet's CPU manager checkpoint (agent/sample/cpu-manager.ts): parsed
// strictly and within bounds, anything else unknown (the gateway then
// inflates CPU as before); read again only when the kubelet replaced it.
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, describe, it } from 'node:test';
import { countCpus, CPU_MANAGER_BOUNDS, CpuManagerReader, parseCpuList, parseCpuManagerState } from '../../../agent/sample/cpu-manager.js';
import { NodeSampler } from '../../../agent/sample/sampler.js';
import { oversellV1 } from '../../../proto/load.js';
import { contractBeforeBatches } from '../../helpers/contract-before-batches.js';

const fixtures = fileURLToPath(new URL('../../fixtures/', import.meta.url));
const kubelet = (name: string) => join(fixtures, 'kubelet', name);
const state = (name: string) => readFileSync(join(kubelet(name), 'cpu_manager_state'), 'utf8');
const dir = mkdtempSync(join(tmpdir(), 'oversell-kubelet-'));
after(() => rmSync(dir, { recursive: true, force: true }));

describe('parseCpuList', () => {
  const good: Array<[string, Array<[number, number]>]> = [
    ['', []],
    ['0', [[0, 0]]],
    ['0-3,8,10-11', [[0, 3], [8, 8], [10, 11]]],
    ['8,0-3', [[8, 8], [0, 3]]],
    [`0-${CPU_MANAGER_BOUNDS.maxCpuId}`, [[0, CPU_MANAGER_BOUNDS.maxCpuId]]],
  ];
  for (const [text, ranges] of good) it(`reads ${JSON.stringify(text)}`, () => assert.deepEqual(parseCpuList(text), ranges));
  for (const text of ['0-', '-1', '3-1', ' 1', '1 ', '1,,2', ',1', '1,', '0-3:2', 'a', '0x1', '1.0', `${CPU_MANAGER_BOUNDS.maxCpuId + 1}`, '0-1000000', '9999999']) {
    it(`refuses ${JSON.stringify(text)}`, () => assert.equal(parseCpuList(text), undefined));
  }
});

describe('countCpus', () => {
  it('counts each CPU once, however the ranges overlap or are ordered', () => {
    assert.equal(countCpus([]), 0);
    assert.equal(countCpus([[2, 3], [4, 5], [4, 5]]), 4);
    assert.equal(countCpus([[8, 8], [0, 10], [3, 4]]), 11);
    assert.equal(countCpus([[0, 3], [3, 6]]), 7);
  });
});

describe('parseCpuManagerState', () => {
  it('static: the CPUs its entries hold, an init container\'s shared with its app container counted once', () => {
    assert.deepEqual(parseCpuManagerState(state('static')), { policy: 'static', exclusiveCpus: 4 });
  });
  it('none', () => assert.deepEqual(parseCpuManagerState(state('none')), { policy: 'none' }));
  it('static with no entries (no integer-CPU pod yet): none held', () => {
    assert.deepEqual(parseCpuManagerState('{"policyName":"static","defaultCpuSet":"0-7","checksum":1}'), { policy: 'static', exclusiveCpus: 0 });
    assert.deepEqual(parseCpuManagerState('{"policyName":"static","defaultCpuSet":"0-7","entries":{},"checksum":1}'), { policy: 'static', exclusiveCpus: 0 });
  });
  const unknown: Array<[string, string, RegExp]> = [
    ['a checkpoint cut short', state('corrupt'), /not JSON/],
    ['the v1 format (entries keyed by container id)', state('v1'), /checkpoint v1/],
    ['an empty file', '', /not JSON/],
    ['an array', '[]', /not a JSON object/],
    ['another policy', '{"policyName":"dynamic","defaultCpuSet":"","checksum":1}', /policy "dynamic"/],
    ['no checksum', '{"policyName":"none","defaultCpuSet":""}', /checksum/],
    ['a checksum that is a string', '{"policyName":"none","defaultCpuSet":"","checksum":"1"}', /checksum/],
    ['a policy name that is a number', '{"policyName":1,"defaultCpuSet":"","checksum":1}', /policyName/],
    ['a default set outside the syntax', '{"policyName":"static","defaultCpuSet":"0-3:2","checksum":1}', /defaultCpuSet/],
    ['an entry outside the syntax', '{"policyName":"static","defaultCpuSet":"0","entries":{"p":{"c":"1-"}},"checksum":1}', /not a CPU list/],
    ['an entry that is a number', '{"policyName":"static","defaultCpuSet":"0","entries":{"p":{"c":2}},"checksum":1}', /not a CPU list/],
    ['entries that are an array', '{"policyName":"static","defaultCpuSet":"0","entries":[],"checksum":1}', /not an object/],
    ['entries under policy none', '{"policyName":"none","defaultCpuSet":"","entries":{"p":{"c":"1"}},"checksum":1}', /entries under policy none/],
    [`more than ${CPU_MANAGER_BOUNDS.maxPods} pods`, JSON.stringify({ policyName: 'static', defaultCpuSet: '0', checksum: 1, entries: Object.fromEntries(Array.from({ length: CPU_MANAGER_BOUNDS.maxPods + 1 }, (_, i) => [`p${i}`, { c: '1' }])) }), /pods/],
    [`more than ${CPU_MANAGER_BOUNDS.maxContainersPerPod} containers in a pod`, JSON.stringify({ policyName: 'static', defaultCpuSet: '0', checksum: 1, entries: { p: Object.fromEntries(Array.from({ length: CPU_MANAGER_BOUNDS.maxContainersPerPod + 1 }, (_, i) => [`c${i}`, '1'])) } }), /containers/],
  ];
  for (const [what, text, why] of unknown) {
    it(`unknown: ${what}`, () => {
      const r = parseCpuManagerState(text);
      assert.equal(r.policy, 'unknown');
      assert.match(r.policy === 'unknown' ? r.why : '', why);
    });
  }
  it('keys a newer kubelet may add are let be', () => {
    assert.deepEqual(parseCpuManagerState('{"policyName":"none","defaultCpuSet":"","checksum":1,"future":{"x":1}}'), { policy: 'none' });
  });
});

describe('CpuManagerReader', () => {
  it('reads each fixture tree; a kubelet root without the checkpoint is unknown', () => {
    assert.deepEqual(new CpuManagerReader(kubelet('static')).read(), { policy: 'static', exclusiveCpus: 4 });
    assert.deepEqual(new CpuManagerReader(kubelet('none')).read(), { policy: 'none' });
    assert.equal(new CpuManagerReader(kubelet('corrupt')).read().policy, 'unknown');
    const missing = new CpuManagerReader(join(dir, 'no-such-root')).read();
    assert.equal(missing.policy, 'unknown');
    assert.match(missing.policy === 'unknown' ? missing.why : '', /no checkpoint/);
  });

  it('parses again only when the kubelet replaced the file (a rename), and sees the new one', () => {
    const root = mkdtempSync(join(dir, 'root-'));
    const path = join(root, 'cpu_manager_state');
    writeFileSync(path, state('none'));
    const reader = new CpuManagerReader(root);
    const first = reader.read();
    assert.equal(reader.read(), first, 'unchanged: the same reading, not parsed again');
    // As the kubelet's checkpoint store writes: a temporary file in the same directory, renamed over the old one.
    writeFileSync(join(root, '.tmp'), state('static'));
    renameSync(join(root, '.tmp'), path);
    assert.deepEqual(reader.read(), { policy: 'static', exclusiveCpus: 4 });
  });

  it(`a file past ${CPU_MANAGER_BOUNDS.maxBytes} bytes is not read: unknown`, () => {
    const root = mkdtempSync(join(dir, 'big-'));
    writeFileSync(join(root, 'cpu_manager_state'), `{"policyName":"none","defaultCpuSet":"","checksum":1,"pad":"${'x'.repeat(CPU_MANAGER_BOUNDS.maxBytes)}"}`);
    const r = new CpuManagerReader(root).read();
    assert.equal(r.policy, 'unknown');
    assert.match(r.policy === 'unknown' ? r.why : '', /larger than/);
  });

  it('a directory where the file should be is unknown, never an error', () => {
    const root = mkdtempSync(join(dir, 'dir-'));
    mkdirSync(join(root, 'cpu_manager_state'));
    const r = new CpuManagerReader(root).read();
    assert.equal(r.policy, 'unknown');
    assert.match(r.policy === 'unknown' ? r.why : '', /not a regular file/);
  });
});

describe('the sample carries it', () => {
  const sampler = (kubeletRoot: string | undefined) => new NodeSampler({ procRoot: join(fixtures, 'proc', 'vm-2cpu'), cgroupRoot: join(fixtures, 'cgroup', 'v2-systemd'), kubeletRoot });
  it('static: its exclusive CPUs, at most the node\'s (the fixture holds 4 on a 2-CPU /proc: 2, which the gateway takes)', () => {
    assert.deepEqual(sampler(kubelet('static')).read(Date.now(), false).cpuManager, { staticPolicy: true, exclusiveCpus: 2 });
  });
  it('none', () => assert.deepEqual(sampler(kubelet('none')).read(Date.now(), false).cpuManager, { staticPolicy: false, exclusiveCpus: 0 }));
  it('unknown (corrupt, missing, or no kubelet root given): no field, and the sampler says why', () => {
    const s = sampler(kubelet('corrupt'));
    assert.equal(s.read(Date.now(), false).cpuManager, null);
    assert.equal(s.cpuManager.reading.policy, 'unknown');
    assert.equal(sampler(undefined).read(Date.now(), false).cpuManager, null);
    assert.equal(sampler(undefined).cpuManager.path, undefined);
  });
});

describe('the field in a rollout: agents and gateways of either age', () => {
  type Codec = { requestSerialize: (m: unknown) => Buffer; requestDeserialize: (b: Buffer) => { sample?: Record<string, unknown> } };
  const report = (v1: unknown) => (v1 as { AgentStream: { service: { Report: Codec } } }).AgentStream.service.Report;
  const now = report(oversellV1());
  const before = report(contractBeforeBatches());
  const sample = { seq: 7, timestampMs: 1, cpuUsageMillicores: 500, memoryWorkingSetBytes: 1, capacity: { cpuMillicores: 2000, memoryBytes: 8 } };

  it('a gateway older than the field reads the rest of a new agent\'s sample', () => {
    const got = before.requestDeserialize(now.requestSerialize({ sample: { ...sample, cpuManager: { staticPolicy: true, exclusiveCpus: 2 } } })).sample;
    assert.equal(got?.seq, 7);
    assert.equal(got?.cpuUsageMillicores, 500);
    assert.equal('cpuManager' in (got ?? {}), false);
  });

  it('an agent older than the field: no CPU manager (unknown), the rest as sent', () => {
    const got = now.requestDeserialize(before.requestSerialize({ sample })).sample;
    assert.equal(got?.seq, 7);
    assert.equal(got?.cpuManager, null);
  });
});
