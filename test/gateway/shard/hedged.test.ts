// Asking a node's owners best first within one deadline (gateway/shard/hedged.ts):
// an owner that does not answer costs its share, one that fails costs nothing,
// and the requests not needed any more are ended.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { firstAnswer, shareOf } from '../../../gateway/shard/hedged.js';

/** An owner's behaviour: answer after ms, fail after ms, answer without the node, or never answer. */
type Owner = { name: string; answer?: number; fail?: number; without?: number };

function asker(asked: string[], aborted: string[]) {
  return (owner: Owner, o: { timeoutMs: number; signal: AbortSignal }) => {
    asked.push(owner.name);
    return new Promise<string | undefined>((resolve, reject) => {
      o.signal.addEventListener('abort', () => aborted.push(owner.name));
      if (owner.answer !== undefined) setTimeout(() => resolve(`from ${owner.name}`), owner.answer);
      if (owner.fail !== undefined) setTimeout(() => reject(new Error('refused')), owner.fail);
      if (owner.without !== undefined) setTimeout(() => resolve(undefined), owner.without);
    });
  };
}

describe('firstAnswer', () => {
  it('a first owner that answers in its share is the only one asked', async () => {
    const asked: string[] = [];
    const got = await firstAnswer([{ name: 'a', answer: 5 }, { name: 'b', answer: 5 }], asker(asked, []), 400);
    assert.equal(got.answer?.value, 'from a');
    assert.deepEqual(asked, ['a']);
    assert.deepEqual(got.failed, []);
  });

  it('one that does not answer costs its share: the next is asked, its answer taken, the first ended and named', async () => {
    const asked: string[] = [];
    const aborted: string[] = [];
    const started = Date.now();
    const got = await firstAnswer([{ name: 'hung' }, { name: 'b', answer: 5 }], asker(asked, aborted), 400);
    const ms = Date.now() - started;
    assert.equal(got.answer?.value, 'from b');
    assert.ok(ms >= shareOf(400, 2) - 5 && ms < 300, `answered after the 100 ms share: ${ms} ms`);
    assert.deepEqual(aborted, ['hung']);
    assert.equal(got.failed.length, 1);
    assert.equal(got.failed[0]!.target.name, 'hung');
    assert.match(got.failed[0]!.why, /no answer within \d+ ms, when another owner answered/);
  });

  it('one that fails, or answers without the node, costs nothing: the next is asked at once', async () => {
    const asked: string[] = [];
    const started = Date.now();
    const got = await firstAnswer([{ name: 'down', fail: 1 }, { name: 'empty', without: 1 }, { name: 'c', answer: 1 }], asker(asked, []), 3000);
    assert.ok(Date.now() - started < 200, 'no share waited for');
    assert.equal(got.answer?.value, 'from c');
    assert.deepEqual(asked, ['down', 'empty', 'c']);
    assert.deepEqual(got.failed.map((f) => `${f.target.name}: ${f.why}`), ['down: refused'], 'an owner without the node did not fail');
  });

  it('when none answers within the deadline, each is named, and none is left asking', async () => {
    const aborted: string[] = [];
    const started = Date.now();
    const got = await firstAnswer([{ name: 'x' }, { name: 'y' }], asker([], aborted), 200);
    assert.ok(Date.now() - started >= 195);
    assert.equal(got.answer, undefined);
    assert.deepEqual(got.failed.map((f) => `${f.target.name}: ${f.why}`).sort(), ['x: no answer within 200 ms', 'y: no answer within 200 ms']);
    assert.deepEqual(aborted.sort(), ['x', 'y']);
    assert.deepEqual(await firstAnswer([], asker([], []), 200), { failed: [] }, 'no owner: nothing to ask');
  });
});
