// Protected pods let bind and not yet seen bound (gateway/store/room-reservations.ts):
// counted on their node until the watch shows them or the time-to-live passes.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { RoomReservations } from '../../../gateway/store/room-reservations.js';

describe('RoomReservations', () => {
  it('sums a node\'s reservations, drops one once seen bound, and one past its time-to-live', () => {
    let t = 0;
    const r = new RoomReservations(30_000, () => t);
    r.reserve('a', 'n1', { cpuMillicores: 1000, memoryBytes: 10 });
    r.reserve('b', 'n1', { cpuMillicores: 500, memoryBytes: 5 });
    r.reserve('c', 'n2', { cpuMillicores: 7, memoryBytes: 7 });
    assert.deepEqual(r.pendingOn('n1', () => false), { cpuMillicores: 1500, memoryBytes: 15 });
    assert.deepEqual(r.pendingOn('n1', (uid) => uid === 'a'), { cpuMillicores: 500, memoryBytes: 5 });
    assert.equal(r.size, 2, 'a is gone for good once seen');
    t = 29_999;
    assert.deepEqual(r.pendingOn('n2', () => false), { cpuMillicores: 7, memoryBytes: 7 });
    t = 30_000;
    assert.deepEqual(r.pendingOn('n1', () => false), { cpuMillicores: 0, memoryBytes: 0 });
    assert.equal(r.size, 0);
  });
});
