// The gateway's own view of bound requests: per-node sums kept exact as pods
// come, change, finish and go.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { BoundRequests } from '../gateway/store/bound-requests.js';

const NOW = 1_700_000_000_000;

describe('bound requests from the API server', () => {
  it('knows nothing until a full list is applied, then every node (zeros for a node with no pods)', () => {
    const b = new BoundRequests();
    b.set('u1', 'n1', 500, 1000);
    assert.equal(b.of('n1', NOW), undefined);
    b.replaceAll([{ uid: 'u1', node: 'n1', cpuMillicores: 500, memoryBytes: 1000 }]);
    assert.deepEqual(b.of('n1', NOW), { cpuMillicores: 500, memoryBytes: 1000, admitted: { cpuMillicores: 500, memoryBytes: 1000 }, podCount: 1, newestPodAgeMs: Infinity, leaving: { cpuMillicores: 0, memoryBytes: 0 } });
    assert.deepEqual(b.of('empty', NOW), { cpuMillicores: 0, memoryBytes: 0, admitted: { cpuMillicores: 0, memoryBytes: 0 }, podCount: 0, newestPodAgeMs: Infinity, leaving: { cpuMillicores: 0, memoryBytes: 0 } });
  });

  it('sums follow adds, changes (a pod resized or moved), finished pods and deletes', () => {
    const b = new BoundRequests();
    b.replaceAll([]);
    b.set('a', 'n1', 1000, 10);
    b.set('b', 'n1', 2000, 20);
    b.set('c', 'n2', 4000, 40);
    assert.deepEqual(b.of('n1', NOW), { cpuMillicores: 3000, memoryBytes: 30, admitted: { cpuMillicores: 3000, memoryBytes: 30 }, podCount: 2, newestPodAgeMs: Infinity, leaving: { cpuMillicores: 0, memoryBytes: 0 } });
    b.set('b', 'n1', 2500, 25); // resized in place
    assert.deepEqual(b.of('n1', NOW), { cpuMillicores: 3500, memoryBytes: 35, admitted: { cpuMillicores: 3500, memoryBytes: 35 }, podCount: 2, newestPodAgeMs: Infinity, leaving: { cpuMillicores: 0, memoryBytes: 0 } });
    b.set('a', 'n1', 1000, 10, false); // Succeeded: holds nothing
    assert.deepEqual(b.of('n1', NOW), { cpuMillicores: 2500, memoryBytes: 25, admitted: { cpuMillicores: 2500, memoryBytes: 25 }, podCount: 1, newestPodAgeMs: Infinity, leaving: { cpuMillicores: 0, memoryBytes: 0 } });
    b.delete('b');
    b.delete('b'); // a second delete of the same pod changes nothing
    assert.deepEqual(b.of('n1', NOW), { cpuMillicores: 0, memoryBytes: 0, admitted: { cpuMillicores: 0, memoryBytes: 0 }, podCount: 0, newestPodAgeMs: Infinity, leaving: { cpuMillicores: 0, memoryBytes: 0 } });
    assert.deepEqual(b.of('n2', NOW), { cpuMillicores: 4000, memoryBytes: 40, admitted: { cpuMillicores: 4000, memoryBytes: 40 }, podCount: 1, newestPodAgeMs: Infinity, leaving: { cpuMillicores: 0, memoryBytes: 0 } });
    assert.equal(b.podCount, 1);
  });

  it('keeps apart what the kubelet has admitted: a pod counts there from its first container status, and leaves both sums when it goes', () => {
    const b = new BoundRequests();
    b.replaceAll([{ uid: 'running', node: 'n1', cpuMillicores: 1000, memoryBytes: 10 }, { uid: 'claim', node: 'n1', cpuMillicores: 64000, memoryBytes: 640, admitted: false }]);
    assert.deepEqual(b.of('n1', NOW), { cpuMillicores: 65000, memoryBytes: 650, admitted: { cpuMillicores: 1000, memoryBytes: 10 }, podCount: 2, newestPodAgeMs: Infinity, leaving: { cpuMillicores: 0, memoryBytes: 0 } });
    b.set('claim', 'n1', 64000, 640, true, 0, true); // the kubelet admitted it
    assert.deepEqual(b.of('n1', NOW)?.admitted, { cpuMillicores: 65000, memoryBytes: 650 });
    b.set('late', 'n1', 500, 5, true, 0, false);
    b.delete('late'); // deleted before the kubelet admitted it
    b.set('claim', 'n1', 64000, 640, false); // the kubelet refused it (OutOfcpu): Failed, holds nothing
    assert.deepEqual(b.of('n1', NOW), { cpuMillicores: 1000, memoryBytes: 10, admitted: { cpuMillicores: 1000, memoryBytes: 10 }, podCount: 1, newestPodAgeMs: Infinity, leaving: { cpuMillicores: 0, memoryBytes: 0 } });
  });

  it('knows how long ago the newest pod on each node was bound, through changes, finished pods and re-lists', () => {
    const b = new BoundRequests();
    b.replaceAll([{ uid: 'old', node: 'n1', cpuMillicores: 1, memoryBytes: 1, boundAtMs: NOW - 600_000 }]);
    assert.equal(b.of('n1', NOW)?.newestPodAgeMs, 600_000);
    b.set('new', 'n1', 1, 1, true, NOW - 5_000);
    assert.equal(b.of('n1', NOW)?.newestPodAgeMs, 5_000);
    b.set('old', 'n1', 2, 2, true, NOW - 600_000); // an update of an older pod does not make the node's newest older
    assert.equal(b.of('n1', NOW)?.newestPodAgeMs, 5_000);
    assert.equal(b.of('n1', NOW - 10_000)?.newestPodAgeMs, 0, 'a binding "in the future" (clock skew) counts as just now');
    b.delete('new');
    b.delete('old');
    assert.equal(b.of('n1', NOW)?.newestPodAgeMs, Infinity, 'a node with no pods has none starting');
    b.set('unknown', 'n2', 1, 1, true);
    assert.equal(b.of('n2', NOW)?.newestPodAgeMs, Infinity, 'a pod whose binding time is unknown is not counted as starting');
  });

  it('a re-list replaces the whole view', () => {
    const b = new BoundRequests();
    b.replaceAll([{ uid: 'a', node: 'n1', cpuMillicores: 1, memoryBytes: 1 }]);
    b.replaceAll([{ uid: 'z', node: 'n9', cpuMillicores: 7, memoryBytes: 7 }]);
    assert.deepEqual(b.of('n1', NOW), { cpuMillicores: 0, memoryBytes: 0, admitted: { cpuMillicores: 0, memoryBytes: 0 }, podCount: 0, newestPodAgeMs: Infinity, leaving: { cpuMillicores: 0, memoryBytes: 0 } });
    assert.deepEqual(b.of('n9', NOW), { cpuMillicores: 7, memoryBytes: 7, admitted: { cpuMillicores: 7, memoryBytes: 7 }, podCount: 1, newestPodAgeMs: Infinity, leaving: { cpuMillicores: 0, memoryBytes: 0 } });
  });

  it('keeps apart the pods being deleted, and says when one starts on a node (once a list has been applied)', () => {
    const b = new BoundRequests();
    const heard: string[] = [];
    b.onLeaving((node) => heard.push(node));
    b.set('early', 'n0', 100, 1, true, 0, true, true);
    assert.deepEqual(heard, [], 'nothing before the first list');
    b.replaceAll([{ uid: 'a', node: 'n1', cpuMillicores: 1000, memoryBytes: 10 }, { uid: 'b', node: 'n1', cpuMillicores: 2000, memoryBytes: 20, leaving: true }]);
    assert.deepEqual(b.of('n1', NOW)?.leaving, { cpuMillicores: 2000, memoryBytes: 20 });
    b.set('a', 'n1', 1000, 10, true, 0, true, true); // evicted: deletionTimestamp set
    assert.deepEqual(heard, ['n1']);
    b.set('a', 'n1', 1000, 10, true, 0, true, true); // the same pod again (a status change): said once
    assert.deepEqual(heard, ['n1']);
    assert.deepEqual(b.of('n1', NOW)?.leaving, { cpuMillicores: 3000, memoryBytes: 30 });
    b.delete('b');
    assert.deepEqual(b.of('n1', NOW), { cpuMillicores: 1000, memoryBytes: 10, admitted: { cpuMillicores: 1000, memoryBytes: 10 }, podCount: 1, newestPodAgeMs: Infinity, leaving: { cpuMillicores: 1000, memoryBytes: 10 } });
  });
});
