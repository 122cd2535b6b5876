import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { MAX_SHARDS, packShards, readShards, SHARD_LIMIT_BYTES, shardIndex, shardName, shardOf } from '../../../gateway/act/history-shards.js';
import { MAX_ENCODED_BYTES } from '../../../gateway/decide/load-history-codec.js';

const entries = (n: number, bytes: number, nameLength = 12) =>
  new Map(Array.from({ length: n }, (_, i) => [`node-${String(i).padStart(nameLength - 5, '0')}`, new Uint8Array(bytes)] as const));

const sizeOf = (shard: Map<string, Uint8Array>) => [...shard].reduce((s, [k, v]) => s + k.length + v.length, 0);

describe('load history shards', () => {
  it('names shards oversell-load-history-<k> and reads back only those names', () => {
    assert.equal(shardName(3), 'oversell-load-history-3');
    assert.equal(shardIndex('oversell-load-history-3'), 3);
    for (const name of ['oversell-load-history-', 'oversell-load-history-03', 'oversell-load-history-x', 'oversell-gateway-ca', 'my-oversell-load-history-1']) {
      assert.equal(shardIndex(name), undefined, name);
    }
  });

  it('a node stays in its shard whatever else changes (FNV-1a of the name)', () => {
    assert.equal(shardOf('node-1', 7), shardOf('node-1', 7));
    const spread = new Array<number>(8).fill(0);
    for (let i = 0; i < 8000; i++) spread[shardOf(`ip-10-0-${i >> 8}-${i & 255}.ec2.internal`, 8)]! += 1;
    for (const n of spread) assert.ok(n > 800 && n < 1200, `uneven: ${spread}`);
  });

  it('packs as many shards as the bytes need, every one under the limit, even at the largest entries', () => {
    assert.equal(packShards(entries(500, 1000), 0).shards.length, 1, '500 typical nodes: one shard');
    // Every bucket of every node set, the longest node names: the worst case.
    const { shards, dropped } = packShards(entries(5000, MAX_ENCODED_BYTES, 253), 0);
    assert.ok(shards.length >= 5000 / 170 && shards.length <= MAX_SHARDS, `${shards.length} shards`);
    for (const s of shards) assert.ok(sizeOf(s) <= SHARD_LIMIT_BYTES, `${sizeOf(s)} bytes`);
    assert.equal(shards.reduce((n, s) => n + s.size, 0), 5000);
    assert.deepEqual(dropped, []);
  });

  it('past MAX_SHARDS the entries that do not fit are left out, later ones first', () => {
    const many = entries(20_000, MAX_ENCODED_BYTES, 253);
    const { shards, dropped } = packShards(many, 0);
    assert.equal(shards.length, MAX_SHARDS);
    for (const s of shards) assert.ok(sizeOf(s) <= SHARD_LIMIT_BYTES);
    const kept = shards.reduce((n, s) => n + s.size, 0);
    assert.equal(kept + dropped.length, 20_000);
    assert.ok(kept >= 10_000, `${kept} kept`);
    assert.ok(!dropped.includes([...many.keys()][0]!), 'the first entry is kept');
  });

  it('never fewer shards than there are: a shard once written is rewritten, not left behind with old entries', () => {
    assert.equal(packShards(entries(3, 100), 4).shards.length, 4);
    assert.equal(packShards(new Map(), 0).shards.length, 1);
    assert.equal(readShards([{ metadata: { name: 'oversell-load-history-64' }, binaryData: { a: 'AQ==' } }]).count, 0, 'a shard RBAC does not let it update is not one');
  });

  it('reads every shard\'s entries and the count there is; other ConfigMaps are skipped', () => {
    const read = readShards([
      { metadata: { name: 'oversell-load-history-0' }, binaryData: { a: 'AQI=' } },
      { metadata: { name: 'oversell-load-history-4' }, binaryData: { b: 'Aw==' } },
      { metadata: { name: 'something-else' }, binaryData: { c: 'BA==' } },
    ]);
    assert.equal(read.count, 5);
    assert.deepEqual(read.entries.map((e) => [e.node, [...e.bytes], e.configMap]), [['a', [1, 2], 'oversell-load-history-0'], ['b', [3], 'oversell-load-history-4']]);
  });
});
