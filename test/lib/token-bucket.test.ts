// lib/token-bucket.ts: a burst, then the steady rate.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { TokenBucket } from '../../lib/token-bucket.js';

describe('TokenBucket', () => {
  it('token bucket: burst, then the steady rate', () => {
    let t = 0;
    const b = new TokenBucket(2, 3, () => t);
    assert.deepEqual([b.take(), b.take(), b.take(), b.take()], [true, true, true, false]);
    t = 499;
    assert.equal(b.take(), false);
    t = 500;
    assert.equal(b.take(), true);
    t = 10_000;
    assert.deepEqual([b.take(), b.take(), b.take(), b.take()], [true, true, true, false]);
  });

  it('a reserve: a caller that keeps it takes only while that much would be left for the others', () => {
    let t = 0;
    const b = new TokenBucket(2, 4, () => t);
    assert.deepEqual([b.take(1, 2), b.take(1, 2), b.take(1, 2)], [true, true, false], 'two of four, two kept');
    assert.deepEqual([b.take(), b.take(), b.take()], [true, true, false], 'the kept two for the others');
    t = 1500;
    assert.deepEqual([b.take(1, 2), b.take(), b.take(), b.take()], [true, true, true, false], 'refilled to three: one with two kept, then the two');
  });
});
