// Between replicas a watch travels as length-prefixed NodeEvents
// (gateway/shard/peer-wire.ts): whatever pieces TCP cuts the bytes into, the
// same events come out in order, and a length no node's status could have
// stops the stream rather than buffering toward it.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { encodeEvent, EventFrames } from '../../../gateway/shard/peer-wire.js';

const events = [
  { type: 'SNAPSHOT' as const, node: { name: 'node-a', connected: true, policy: 'p' } },
  { type: 'SYNCED' as const },
  { type: 'UPDATED' as const, node: { name: 'node-b', labels: { zone: 'z1' } } },
  { type: 'REMOVED' as const, node: { name: 'node-a' } },
];

describe('watch frames between replicas', () => {
  const bytes = Buffer.concat(events.map(encodeEvent));

  it('the same events in order, whatever the pieces', () => {
    for (const size of [1, 3, 7, bytes.length]) {
      const frames = new EventFrames();
      const got = [];
      for (let at = 0; at < bytes.length; at += size) got.push(...frames.push(bytes.subarray(at, at + size)));
      assert.deepEqual(got.map((e) => [e.type, e.node?.name ?? '']), [['SNAPSHOT', 'node-a'], ['SYNCED', ''], ['UPDATED', 'node-b'], ['REMOVED', 'node-a']], `in pieces of ${size}`);
      assert.deepEqual(got[2]!.node?.labels, { zone: 'z1' });
    }
  });

  it('a length past what a status can take ends the stream', () => {
    const forged = Buffer.alloc(8);
    forged.writeUInt32BE(64 * 1024 * 1024, 0);
    assert.throws(() => new EventFrames().push(forged), /a watch event of 67108864 bytes is past the 4194304/);
  });
});
