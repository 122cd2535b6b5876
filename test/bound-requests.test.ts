// The gateway's own view of bound requests: per-node sums kept exact as pods
// come, change, finish and go.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { BoundRequests } from '../gateway/store/bound-requests.js';

describe('bound requests from the API server', () => {
  it('knows nothing until a full list is applied, then every node (zeros for a node with no pods)', () => {
    const b = new BoundRequests();
    b.set('u1', 'n1', 500, 1000);
    assert.equal(b.of('n1'), undefined);
    b.replaceAll([{ uid: 'u1', node: 'n1', cpuMillicores: 500, memoryBytes: 1000 }]);
    assert.deepEqual(b.of('n1'), { cpuMillicores: 500, memoryBytes: 1000, podCount: 1 });
    assert.deepEqual(b.of('empty'), { cpuMillicores: 0, memoryBytes: 0, podCount: 0 });
  });

  it('sums follow adds, changes (a pod resized or moved), finished pods and deletes', () => {
    const b = new BoundRequests();
    b.replaceAll([]);
    b.set('a', 'n1', 1000, 10);
    b.set('b', 'n1', 2000, 20);
    b.set('c', 'n2', 4000, 40);
    assert.deepEqual(b.of('n1'), { cpuMillicores: 3000, memoryBytes: 30, podCount: 2 });
    b.set('b', 'n1', 2500, 25); // resized in place
    assert.deepEqual(b.of('n1'), { cpuMillicores: 3500, memoryBytes: 35, podCount: 2 });
    b.set('a', 'n1', 1000, 10, false); // Succeeded: holds nothing
    assert.deepEqual(b.of('n1'), { cpuMillicores: 2500, memoryBytes: 25, podCount: 1 });
    b.delete('b');
    b.delete('b'); // a second delete of the same pod changes nothing
    assert.deepEqual(b.of('n1'), { cpuMillicores: 0, memoryBytes: 0, podCount: 0 });
    assert.deepEqual(b.of('n2'), { cpuMillicores: 4000, memoryBytes: 40, podCount: 1 });
    assert.equal(b.podCount, 1);
  });

  it('a re-list replaces the whole view', () => {
    const b = new BoundRequests();
    b.replaceAll([{ uid: 'a', node: 'n1', cpuMillicores: 1, memoryBytes: 1 }]);
    b.replaceAll([{ uid: 'z', node: 'n9', cpuMillicores: 7, memoryBytes: 7 }]);
    assert.deepEqual(b.of('n1'), { cpuMillicores: 0, memoryBytes: 0, podCount: 0 });
    assert.deepEqual(b.of('n9'), { cpuMillicores: 7, memoryBytes: 7, podCount: 1 });
  });
});
