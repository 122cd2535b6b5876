// Tiers (gateway/decide/tiers.ts): which pods an OversellPolicy protects, and why.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { DEFAULT_PROTECT, type PodFacts, tierOf } from '../../../gateway/decide/tiers.js';

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
