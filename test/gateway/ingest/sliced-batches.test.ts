// The ingest threads' batches on the main thread: applied in order, rows and
// ops interleaved as the thread saw them, a slice per turn of the event loop.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { setImmediate as nextTurn } from 'node:timers/promises';
import { SlicedBatches, type Batch } from '../../../gateway/ingest/sliced-batches.js';

interface TestBatch extends Batch {
  name: string;
}

const batch = (name: string, rowCount: number, opsAfter: number[]): TestBatch => ({ name, rowCount, ops: opsAfter.map((after) => ({ after })) });

function recorder(rowsPerTurn: number) {
  const seen: string[] = [];
  const queue = new SlicedBatches<TestBatch>({
    row: (b, i) => seen.push(`${b.name}.r${i}`),
    op: (b, i) => seen.push(`${b.name}.op${i}`),
    done: (b) => seen.push(`${b.name} done`),
  }, rowsPerTurn);
  return { seen, queue };
}

async function settle(queue: SlicedBatches<TestBatch>): Promise<number> {
  let turns = 0;
  while (queue.pending > 0) {
    turns += 1;
    await nextTurn();
  }
  return turns;
}

describe('SlicedBatches', () => {
  it('applies rows and ops in the thread\'s order, batch after batch, each batch done once after its last step', async () => {
    const { seen, queue } = recorder(2);
    queue.push(batch('a', 3, [0, 2, 3]));
    queue.push(batch('b', 2, []));
    queue.push(batch('c', 0, [0]));
    await settle(queue);
    assert.deepEqual(seen, ['a.op0', 'a.r0', 'a.r1', 'a.op1', 'a.r2', 'a.op2', 'a done', 'b.r0', 'b.r1', 'b done', 'c.op0', 'c done']);
  });

  it('applies at most rowsPerTurn steps at once: the event loop runs between slices of a large batch', async () => {
    const { seen, queue } = recorder(100);
    queue.push(batch('big', 1000, [500]));
    assert.equal(seen.length, 100, 'the first slice at once, no more');
    let between = 0;
    const tick = () => {
      if (queue.pending === 0) return;
      between += 1;
      setImmediate(tick);
    };
    setImmediate(tick);
    const turns = await settle(queue);
    assert.equal(seen.length, 1002);
    assert.ok(turns >= 9, `${turns} turns for 1,001 steps at 100 a turn`);
    assert.ok(between >= 5, `other callbacks ran ${between} times while the batch was applied`);
  });

  it('a batch pushed while others wait is applied after them, and clear() drops what is queued', async () => {
    const { seen, queue } = recorder(5);
    queue.push(batch('a', 12, []));
    queue.push(batch('b', 1, []));
    assert.deepEqual(seen, ['a.r0', 'a.r1', 'a.r2', 'a.r3', 'a.r4']);
    queue.clear();
    await nextTurn();
    await nextTurn();
    assert.equal(seen.length, 5, 'nothing applied after clear()');
    queue.push(batch('c', 1, []));
    await settle(queue);
    assert.deepEqual(seen.slice(5), ['c.r0', 'c done']);
  });
});
