// Rendezvous hashing: same owners whatever the member order, an even share,
// and membership changes that move only what they must.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ownedCounts, owners } from '../../lib/rendezvous.js';

const replicas = (n: number) => Array.from({ length: n }, (_, i) => `oversell-gateway-7d9f8-${i.toString(36).padStart(5, 'x')}`);
const nodes = (n: number) => Array.from({ length: n }, (_, i) => `ip-10-0-${i >> 8}-${i & 255}.eu-west-1.compute.internal`);

describe('rendezvous owners', () => {
  it('copies distinct owners, the same whatever the order of the members or repeats in it', () => {
    const members = replicas(7);
    for (const node of nodes(500)) {
      const o = owners(node, members, 2);
      assert.equal(o.length, 2);
      assert.notEqual(o[0], o[1]);
      assert.deepEqual(owners(node, [...members].reverse(), 2), o);
      assert.deepEqual(owners(node, [...members, members[3]!, members[0]!], 2), o);
      // The first of k+1 owners are the k owners: asking for more copies only adds.
      assert.deepEqual(owners(node, members, 3).slice(0, 2), o);
    }
    assert.deepEqual(owners('n', ['only'], 2), ['only'], 'fewer members than copies: every member');
    assert.deepEqual(owners('n', [], 2), []);
    assert.throws(() => owners('n', members, 0), /copies must be a whole number of 1 or more, got 0/);
    assert.throws(() => owners('n', members, 1.5), RangeError);
  });

  it('an even share: 100,000 nodes, 2 copies over 7 replicas, each replica within 2 % of 2/7', () => {
    const members = replicas(7);
    const counts = ownedCounts(nodes(100_000), members, 2);
    const fair = (100_000 * 2) / 7;
    for (const [m, n] of counts) assert.ok(Math.abs(n - fair) / fair < 0.02, `${m}: ${n} against ${Math.round(fair)}`);
    assert.equal([...counts.values()].reduce((a, b) => a + b, 0), 200_000);
  });

  it('a replica leaving hands each of its nodes to one other replica and moves nothing else', () => {
    const members = replicas(5);
    const gone = members[2]!;
    const left = members.filter((m) => m !== gone);
    let moved = 0;
    for (const node of nodes(20_000)) {
      const before = owners(node, members, 2);
      const after = owners(node, left, 2);
      if (!before.includes(gone)) {
        assert.deepEqual(after, before, `${node} did not belong to ${gone} and must not move`);
      } else {
        moved += 1;
        const kept = before.filter((m) => m !== gone);
        assert.ok(after.includes(kept[0]!), `${node} keeps its other owner`);
        assert.equal(after.filter((m) => !before.includes(m)).length, 1, `${node} gains exactly one owner`);
      }
    }
    // 2 of 5 owners per node: about 40 % of the nodes had the one that left.
    assert.ok(moved > 20_000 * 0.37 && moved < 20_000 * 0.43, `${moved} nodes had the replica that left`);
  });

  it('a replica joining takes about copies/R of the nodes, one owner each, and moves nothing else', () => {
    const members = replicas(4);
    const joined = 'oversell-gateway-7d9f8-new01';
    let taken = 0;
    for (const node of nodes(20_000)) {
      const before = owners(node, members, 2);
      const after = owners(node, [...members, joined], 2);
      const added = after.filter((m) => !before.includes(m));
      if (added.length === 0) continue;
      taken += 1;
      assert.deepEqual(added, [joined], `${node}: only the new replica comes in`);
      assert.ok(before.some((m) => after.includes(m)), `${node} keeps one of its owners`);
    }
    assert.ok(taken > 20_000 * 0.37 && taken < 20_000 * 0.43, `${taken} nodes went to the new replica (2/5 expected)`);
  });
});
