// Tiers (gateway/decide/tiers.ts): which pods an OversellPolicy protects, and why.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { DEFAULT_PROTECT, type PodFacts, tierOf } from '../../../gateway/decide/tiers.js';
import { podTier } from '../../../gateway/policies/namespace-labels.js';

const pod = (over: Partial<PodFacts> = {}): PodFacts => ({ qos: 'Burstable', exclusiveCpus: 0, priority: 0, namespaceLabels: {}, ...over });

describe('tierOf, default protection', () => {
  const rows: Array<[string, PodFacts, string | undefined]> = [
    ['a Burstable pod of priority 0', pod(), undefined],
    ['a BestEffort pod', pod({ qos: 'BestEffort' }), undefined],
    ['a Guaranteed pod', pod({ qos: 'Guaranteed' }), 'Guaranteed QoS'],
    ['exclusive CPUs', pod({ qos: 'Guaranteed', exclusiveCpus: 2 }), 'holds 2 exclusive CPU(s)'],
    ['system-cluster-critical', pod({ priority: 2_000_000_000 }), 'priority 2000000000 >= 2000000000'],
    ['system-node-critical', pod({ priority: 2_000_001_000 }), 'priority 2000001000 >= 2000000000'],
    ['just under system-cluster-critical', pod({ priority: 1_999_999_999 }), undefined],
    ['in a namespace labelled oversell.io/protect=true', pod({ namespaceLabels: { 'oversell.io/protect': 'true' } }), 'its namespace is protected'],
    ['in a namespace labelled otherwise', pod({ namespaceLabels: { 'oversell.io/protect': 'false' } }), undefined],
  ];
  for (const [what, p, because] of rows) {
    it(what, () => assert.deepEqual(tierOf(p, DEFAULT_PROTECT), because ? { tier: 'protected', because } : { tier: 'unprotected' }));
  }
});

describe('tierOf, protection as an operator states it', () => {
  it('Guaranteed pods may be left unprotected, their exclusive CPUs still protected', () => {
    const p = { ...DEFAULT_PROTECT, guaranteed: false };
    assert.deepEqual(tierOf(pod({ qos: 'Guaranteed' }), p), { tier: 'unprotected' });
    assert.equal(tierOf(pod({ qos: 'Guaranteed', exclusiveCpus: 1 }), p).tier, 'protected');
  });
  it('no priority rule and no namespace rule: neither protects', () => {
    const p = { ...DEFAULT_PROTECT, minPriority: undefined, namespaceSelector: undefined };
    assert.equal(tierOf(pod({ priority: 2_000_001_000, namespaceLabels: { 'oversell.io/protect': 'true' } }), p).tier, 'unprotected');
  });
});

describe('tierOf, the exclusiveCpus rule and the node\'s CPU manager', () => {
  const onlyExclusive = { ...DEFAULT_PROTECT, guaranteed: false };
  const integerCpu = pod({ qos: 'Guaranteed', exclusiveCpus: 2 });
  it('an integer-CPU Guaranteed pod on a static node holds its CPUs: protected, and the reason names the CPU manager', () => {
    assert.deepEqual(tierOf(integerCpu, onlyExclusive, 'static'), { tier: 'protected', because: 'holds 2 exclusive CPU(s) (static CPU manager)' });
  });
  it('on a node whose policy is none it holds no CPU of its own: the rule does not hold (Guaranteed QoS still protects it by default)', () => {
    assert.deepEqual(tierOf(integerCpu, onlyExclusive, 'none'), { tier: 'unprotected' });
    assert.deepEqual(tierOf(integerCpu, DEFAULT_PROTECT, 'none'), { tier: 'protected', because: 'Guaranteed QoS' });
  });
  it('unknown (no agent said): taken for static, as before the agent read the checkpoint', () => {
    assert.deepEqual(tierOf(integerCpu, onlyExclusive, 'unknown'), tierOf(integerCpu, onlyExclusive));
    assert.equal(tierOf(integerCpu, onlyExclusive).tier, 'protected');
  });
  it('a fractional-CPU pod is not protected by the rule on any node', () => {
    for (const cm of ['static', 'none', 'unknown'] as const) assert.deepEqual(tierOf(pod({ qos: 'Guaranteed' }), onlyExclusive, cm), { tier: 'unprotected' });
  });
});

describe('podTier passes the node\'s CPU manager on', () => {
  it('none drops the exclusiveCpus rule, static and the default (unknown) keep it', async () => {
    const p = { ...pod({ qos: 'Guaranteed', exclusiveCpus: 1 }), namespace: 'apps' };
    const protect = { ...DEFAULT_PROTECT, guaranteed: false, namespaceSelector: undefined };
    const labels = async () => ({});
    assert.equal((await podTier(p, protect, labels, 'none')).tier, 'unprotected');
    assert.equal((await podTier(p, protect, labels, 'static')).tier, 'protected');
    assert.equal((await podTier(p, protect, labels)).tier, 'protected');
  });
});
