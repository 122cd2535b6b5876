import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { NodeSlots } from '../../sim/node-slots.js';

const fields = (k: number) => ({ requestCpu: k, requestMemory: 10 * k, cpuBase: k / 2, memoryBase: 5 * k, key: 100 + k, memoryPhase: k, runSteps: 0 });

describe('node slots', () => {
  it('keeps a node\'s pods contiguous: removing one moves the node\'s last pod into its slot', () => {
    const s = new NodeSlots<string>(2, 3);
    assert.deepEqual([s.add(1, 'a', fields(1), 0), s.add(1, 'b', fields(2), 0), s.add(1, 'c', fields(3), 5)], [3, 4, 5]);
    assert.equal(s.full(1), true);
    assert.equal(s.full(0), false);
    assert.equal(s.remove(1, 3), 'c', 'c moved into a\'s slot');
    assert.deepEqual([s.owner[3], s.requestCpu[3], s.key[3], s.start[3], s.count[1]], ['c', 3, 103, 5, 2]);
    assert.equal(s.remove(1, 4), undefined, 'the last slot moves nothing');
    assert.deepEqual([s.count[1], s.owner[4], s.owner[5]], [1, undefined, undefined]);
    assert.equal(s.add(0, 'd', fields(4), 0), 0, 'node 0 untouched by node 1');
  });
});
