// The protected-room invariant as a pure check (gateway/decide/protected-room.ts):
// a protected pod fits only where the node's protected requests, with its own,
// stay within raw allocatable; an unprotected pod always passes.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { protectedRoom, type ProtectedRoomInput } from '../../../gateway/decide/protected-room.js';

const GiB = 2 ** 30;
const input = (over: Partial<ProtectedRoomInput> = {}): ProtectedRoomInput => ({
  node: 'n1',
  raw: { cpuMillicores: 4000, memoryBytes: 16 * GiB },
  protectedBound: { cpuMillicores: 3000, memoryBytes: 12 * GiB },
  pod: { cpuMillicores: 1000, memoryBytes: 4 * GiB },
  tier: { tier: 'protected', because: 'Guaranteed QoS' },
  ...over,
});

describe('protectedRoom', () => {
  it('a protected pod that fills raw exactly fits', () => assert.deepEqual(protectedRoom(input()), { allowed: true, why: 'fits' }));

  it('a protected pod one millicore over raw CPU is refused, and the message says which resource and why', () => {
    const v = protectedRoom(input({ pod: { cpuMillicores: 1001, memoryBytes: GiB } }));
    assert.equal(v.allowed, false);
    assert.ok(!v.allowed && v.message.includes('CPU 4001m > 4000m') && !v.message.includes('memory'), !v.allowed ? v.message : '');
    assert.ok(!v.allowed && v.message.includes('Guaranteed QoS'));
  });

  it('a protected pod one byte over raw memory is refused', () => {
    const v = protectedRoom(input({ pod: { cpuMillicores: 0, memoryBytes: 4 * GiB + 1 } }));
    assert.equal(v.allowed, false);
    assert.ok(!v.allowed && v.message.includes('memory 16385Mi > 16384Mi'), !v.allowed ? v.message : '');
  });

  it('an unprotected pod passes however little raw room is left: oversold room is for it', () =>
    assert.deepEqual(protectedRoom(input({ tier: { tier: 'unprotected' }, protectedBound: { cpuMillicores: 4000, memoryBytes: 16 * GiB } })), { allowed: true, why: 'unprotected' }));
});
