// lib/backoff.ts: exponential growth to a cap, full jitter, reset.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Backoff } from '../../lib/backoff.js';

describe('Backoff', () => {
  it('backoff grows exponentially to the cap with full jitter, and resets', () => {
    const b = new Backoff({ initialMs: 100, maxMs: 1000 }, () => 1);
    assert.deepEqual([b.next(), b.next(), b.next(), b.next(), b.next()], [100, 200, 400, 800, 1000]);
    b.reset();
    assert.equal(b.next(), 100);
    const jittered = new Backoff({ initialMs: 100, maxMs: 1000 }, () => 0.5);
    assert.equal(jittered.next(), 50);
  });
});
