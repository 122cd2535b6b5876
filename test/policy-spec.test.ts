import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { describe, it } from 'node:test';
import { loadYaml } from '@kubernetes/client-node';
import { DEFAULT_POLICY } from '../gateway/decide/policy.js';
import { matches, nodeMaxRatio, selectPolicy } from '../gateway/decide/select-policy.js';
import { MAX_RATIO, toPolicyEntry, type OversellPolicyObject } from '../gateway/policies/policy-spec.js';
import { DEFAULT_PROTECT } from '../gateway/decide/tiers.js';

const obj = (name: string, spec: Record<string, unknown>): OversellPolicyObject => ({ metadata: { name }, spec });
const pool = (p: string) => ({ nodeSelector: { matchLabels: { pool: p } } });

describe('OversellPolicy objects into policies', () => {
  it('the shipped default policy reads as the built-in defaults', () => {
    const o = loadYaml<OversellPolicyObject>(readFileSync(new URL('../deploy/base/policy-default.yaml', import.meta.url), 'utf8'));
    const e = toPolicyEntry(o);
    assert.equal(e.error, undefined);
    assert.equal(e.priority, -100);
    assert.deepEqual({ ...e.policy, name: 'flags' }, DEFAULT_POLICY);
  });

  it('reads every field', () => {
    const e = toPolicyEntry(obj('gpu-pool', {
      ...pool('gpu'), priority: 10, mode: 'DryRun', window: '2m', staleAfter: '30s', calmPeriod: '90s', hysteresis: 0.1,
      cpu: { maxRatio: 3, targetUtilization: 0.5, minLoadFactor: 0.2, statistic: 'p99', pressureThreshold: 25, riskBudget: { enabled: false, overShare: 0.02, margin: 0.1 } },
      memory: { maxRatio: 1.1, statistic: 'p95', workingSetThreshold: 0.85, riskBudget: { overShare: 0.005, margin: 0.2 } },
      history: { minSpan: '6h' },
    }));
    assert.equal(e.error, undefined);
    assert.equal(e.policy?.mode, 'DryRun');
    assert.equal(e.policy?.windowMs, 120_000);
    assert.equal(e.policy?.staleAfterMs, 30_000);
    assert.equal(e.policy?.calmPeriodMs, 90_000);
    assert.deepEqual(e.policy?.cpu, { maxRatio: 3, targetUtilization: 0.5, minLoadFactor: 0.2, statistic: 'p99', pressureThreshold: 25, riskBudget: { enabled: false, overShare: 0.02, margin: 0.1 } });
    assert.deepEqual(e.policy?.memory.riskBudget, { enabled: true, overShare: 0.005, margin: 0.2 });
    assert.equal(e.policy?.history.minSpanMs, 6 * 3_600_000);
    assert.equal(e.policy?.memory.workingSetThreshold, 0.85);
    assert.equal(e.policy?.memory.targetUtilization, DEFAULT_POLICY.memory.targetUtilization);
  });

  it('takes 0s where the CRD allows it (calmPeriod, startupGrace), and nowhere else', () => {
    const zero = toPolicyEntry(obj('now', { ...pool('a'), calmPeriod: '0s', startupGrace: '0s' }));
    assert.equal(zero.error, undefined);
    assert.deepEqual([zero.policy?.calmPeriodMs, zero.policy?.startupGraceMs], [0, 0]);
    assert.equal(toPolicyEntry(obj('later', { ...pool('a'), startupGrace: '45s' })).policy?.startupGraceMs, 45_000);
    assert.match(toPolicyEntry(obj('never', { ...pool('a'), window: '0s' })).error ?? '', /spec\.window must be positive/);
  });

  const invalid: Array<[string, Record<string, unknown>, RegExp]> = [
    ['no selector', {}, /nodeSelector is required/],
    ['an empty selector', { nodeSelector: {} }, /select every node/],
    ['maxRatio below 1', { ...pool('a'), cpu: { maxRatio: 0.5 } }, /spec\.cpu\.maxRatio/],
    ['target above 1', { ...pool('a'), memory: { targetUtilization: 1.5 } }, /spec\.memory\.targetUtilization/],
    ['a string ratio', { ...pool('a'), cpu: { maxRatio: '2' } }, /spec\.cpu\.maxRatio must be a number/],
    ['an unknown statistic', { ...pool('a'), cpu: { statistic: 'median' } }, /statistic must be one of/],
    ['an unknown mode', { ...pool('a'), mode: 'Maybe' }, /mode must be Enforce or DryRun/],
    ['a bad duration', { ...pool('a'), window: 'forever' }, /not a duration/],
    ['a bad operator', { nodeSelector: { matchExpressions: [{ key: 'a', operator: 'Near' }] } }, /operator In, NotIn/],
  ];
  for (const [what, spec, message] of invalid) {
    it(`${what}: no policy and a message, never a throw`, () => {
      const e = toPolicyEntry(obj('bad', spec));
      assert.equal(e.policy, undefined);
      assert.match(e.error ?? '', message);
    });
  }
});

describe('spec.protect and the bounds the CRD states', () => {
  it('left out: the defaults (Guaranteed, exclusive CPUs, system-cluster-critical and up, namespaces labelled oversell.io/protect=true)', () => {
    assert.deepEqual(toPolicyEntry(obj('p', pool('a'))).policy?.protect, DEFAULT_PROTECT);
  });
  it('reads every field; null turns a rule off', () => {
    const e = toPolicyEntry(obj('p', { ...pool('a'), protect: { guaranteed: false, exclusiveCpus: true, minPriority: null, namespaceSelector: { matchExpressions: [{ key: 'tier', operator: 'In', values: ['db'] }] } } }));
    assert.equal(e.error, undefined);
    assert.deepEqual(e.policy?.protect, { guaranteed: false, exclusiveCpus: true, minPriority: undefined, namespaceSelector: { matchLabels: {}, matchExpressions: [{ key: 'tier', operator: 'In', values: ['db'] }] } });
    assert.equal(toPolicyEntry(obj('p', { ...pool('a'), protect: { minPriority: 1000, namespaceSelector: null } })).policy?.protect.namespaceSelector, undefined);
  });
  for (const [what, protect, message] of [
    ['an empty namespace selector (it would protect every pod)', { namespaceSelector: {} }, /spec.protect.namespaceSelector is empty; it would select everything/],
    ['a priority that is not an int32', { minPriority: 2 ** 31 }, /spec.protect.minPriority must be an int32 or null/],
    ['a flag that is not a boolean', { guaranteed: 'yes' }, /spec.protect.guaranteed must be true or false/],
  ] as const) {
    it(`refuses ${what}`, () => assert.match(toPolicyEntry(obj('p', { ...pool('a'), protect })).error ?? '', message));
  }
  it('spec.relief: the defaults, every field, and a calm line at or above the relief line refused', () => {
    assert.deepEqual(toPolicyEntry(obj('p', pool('a'))).policy?.relief, { enabled: true, memoryLine: 0.95, calmLine: 0.9, perNodePerMinute: 2 });
    assert.deepEqual(toPolicyEntry(obj('p', { ...pool('a'), relief: { enabled: false, memoryLine: 0.9, calmLine: 0.8, perNodePerMinute: 5 } })).policy?.relief, { enabled: false, memoryLine: 0.9, calmLine: 0.8, perNodePerMinute: 5 });
    assert.match(toPolicyEntry(obj('p', { ...pool('a'), relief: { memoryLine: 0.9, calmLine: 0.9 } })).error ?? '', /spec.relief.calmLine \(0.9\) must be below memoryLine \(0.9\)/);
    assert.match(toPolicyEntry(obj('p', { ...pool('a'), relief: { perNodePerMinute: 1.5 } })).error ?? '', /perNodePerMinute must be a whole number/);
  });
  it('maxRatio at most 10, as the CRD says (it said 10 and the parser took 100)', () => {
    assert.equal(toPolicyEntry(obj('p', { ...pool('a'), cpu: { maxRatio: 10 } })).error, undefined);
    assert.match(toPolicyEntry(obj('p', { ...pool('a'), cpu: { maxRatio: 10.5 } })).error ?? '', /spec.cpu.maxRatio must be a number in \[1, 10\]/);
    const crd = readFileSync(new URL('../deploy/base/crd.yaml', import.meta.url), 'utf8');
    for (const line of crd.split('\n').filter((l) => /maxRatio: \{/.test(l))) assert.match(line, new RegExp(`maximum: ${MAX_RATIO}( }|,)`), line);
  });
});

describe('policy selection', () => {
  const entries = [
    toPolicyEntry(obj('default', { nodeSelector: { matchLabels: { 'oversell.io/enabled': 'true' } }, priority: -100 })),
    toPolicyEntry(obj('batch', { ...pool('batch'), priority: 10 })),
    toPolicyEntry(obj('a-batch-twin', { ...pool('batch'), priority: 10 })),
    toPolicyEntry(obj('broken', { ...pool('web'), priority: 50, cpu: { maxRatio: 0 } })),
  ];
  const on = { 'oversell.io/enabled': 'true' };

  it('highest priority wins; a tie goes to the alphabetically first name; order of listing does not matter', () => {
    assert.equal(selectPolicy(entries, { ...on, pool: 'batch' })?.name, 'a-batch-twin');
    assert.equal(selectPolicy([...entries].reverse(), { ...on, pool: 'batch' })?.name, 'a-batch-twin');
    assert.equal(selectPolicy(entries, { ...on, pool: 'other' })?.name, 'default');
    assert.equal(selectPolicy(entries, { pool: 'none' }), undefined);
  });

  it('an invalid policy that matches is not skipped: its nodes get no policy, and the error travels', () => {
    const e = selectPolicy(entries, { ...on, pool: 'web' });
    assert.equal(e?.name, 'broken');
    assert.equal(e?.policy, undefined);
    assert.match(e?.error ?? '', /maxRatio/);
  });

  it('matchExpressions: In, NotIn, Exists, DoesNotExist', () => {
    const labels = { zone: 'a', tier: 'x' };
    assert.equal(matches({ matchExpressions: [{ key: 'zone', operator: 'In', values: ['a', 'b'] }] }, labels), true);
    assert.equal(matches({ matchExpressions: [{ key: 'zone', operator: 'NotIn', values: ['a'] }] }, labels), false);
    assert.equal(matches({ matchExpressions: [{ key: 'gpu', operator: 'NotIn', values: ['a'] }] }, labels), true);
    assert.equal(matches({ matchExpressions: [{ key: 'tier', operator: 'Exists' }] }, labels), true);
    assert.equal(matches({ matchExpressions: [{ key: 'tier', operator: 'DoesNotExist' }] }, labels), false);
    assert.equal(matches({}, labels), false, 'an empty selector selects nothing');
  });

  it('per-node ratio annotations: numbers >= 1 only', () => {
    assert.deepEqual(nodeMaxRatio({ 'oversell.io/max-ratio-cpu': '1.5', 'oversell.io/max-ratio-memory': '0.5' }), { cpu: 1.5 });
    assert.deepEqual(nodeMaxRatio({ 'oversell.io/max-ratio-cpu': 'lots' }), {});
    assert.deepEqual(nodeMaxRatio(undefined), {});
  });
});
