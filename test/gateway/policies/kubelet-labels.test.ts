// Which node labels a kubelet may set itself under NodeRestriction, and the
// warning a policy gets for selecting on them.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { kubeletMaySet, kubeletSettableKeys } from '../../../gateway/policies/kubelet-labels.js';
import { toPolicyEntry } from '../../../gateway/policies/policy-spec.js';

describe('kubeletMaySet (NodeRestriction, k8s v1.36)', () => {
  const rows: Array<[string, boolean]> = [
    ['node-restriction.kubernetes.io/oversell-pool', false],
    ['example.node-restriction.kubernetes.io/pool', false],
    ['oversell.io/enabled', true],
    ['pool', true],
    ['example.com/tier', true],
    ['kubernetes.io/hostname', true],
    ['topology.kubernetes.io/zone', true],
    ['node.kubernetes.io/instance-type', true],
    ['node.kubernetes.io/anything', true],
    ['kubelet.kubernetes.io/anything', true],
    ['x.kubelet.kubernetes.io/anything', true],
    ['node-role.kubernetes.io/worker', false],
    ['kubernetes.io/role', false],
    ['k8s.io/pool', false],
    ['team.k8s.io/pool', false],
  ];
  for (const [key, may] of rows) it(`${key}: ${may ? 'a kubelet may set it' : 'forbidden to kubelets'}`, () => assert.equal(kubeletMaySet(key), may));

  it('kubeletSettableKeys names each settable key of labels and expressions once', () => {
    assert.deepEqual(
      kubeletSettableKeys({ matchLabels: { pool: 'a', 'node-restriction.kubernetes.io/pool': 'gold' }, matchExpressions: [{ key: 'pool', operator: 'Exists' }, { key: 'zone', operator: 'In', values: ['a'] }] }),
      ['pool', 'zone'],
    );
  });
});

describe('an OversellPolicy selecting on labels a kubelet may set', () => {
  it('is valid and carries a warning naming the labels and the prefix to use instead', () => {
    const e = toPolicyEntry({ metadata: { name: 'gold' }, spec: { nodeSelector: { matchLabels: { 'oversell.io/pool': 'gold' } }, cpu: { maxRatio: 4 } } });
    assert.ok(e.policy, e.error);
    assert.equal(e.warnings?.length, 1);
    assert.match(e.warnings?.[0] ?? '', /"oversell\.io\/pool", which a node's own kubelet may set on its Node.*node-restriction\.kubernetes\.io\//);
  });

  it('on node-restriction.kubernetes.io/ labels only: no warning', () => {
    const e = toPolicyEntry({ metadata: { name: 'gold' }, spec: { nodeSelector: { matchLabels: { 'node-restriction.kubernetes.io/oversell-pool': 'gold' } } } });
    assert.ok(e.policy, e.error);
    assert.equal(e.warnings, undefined);
  });
});
