// lib/duration.ts: the durations flags and policies are written in.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { parseDuration } from '../../lib/duration.js';

describe('parseDuration', () => {
  it('durations', () => {
    assert.equal(parseDuration('40s'), 40_000);
    assert.equal(parseDuration('1m30s'), 90_000);
    assert.equal(parseDuration('500ms'), 500);
    assert.equal(parseDuration('250'), 250);
    assert.throws(() => parseDuration('40 s'), /not a duration/);
    assert.throws(() => parseDuration('s'), /not a duration/);
  });
});
