import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Lifecycle, type Part } from '../../lib/lifecycle.js';

/** A part that records its start and close into `log`; `fails` makes that step throw. */
function part(name: string, log: string[], fails: { start?: boolean; close?: boolean } = {}): Part {
  return {
    name,
    async start() {
      await new Promise((r) => setImmediate(r));
      log.push(`start ${name}`);
      if (fails.start) throw new Error(`${name} cannot start`);
    },
    async close() {
      await new Promise((r) => setImmediate(r));
      log.push(`close ${name}`);
      if (fails.close) throw new Error(`${name} cannot close`);
    },
  };
}

describe('Lifecycle: parts start in the order added and close in reverse', () => {
  it('starts each part after the one before has started, and closes last started first', async () => {
    const log: string[] = [];
    const life = new Lifecycle(() => assert.fail('no close fails'));
    for (const name of ['a', 'b', 'c']) life.add(part(name, log));
    await life.start();
    await life.close();
    assert.deepEqual(log, ['start a', 'start b', 'start c', 'close c', 'close b', 'close a']);
  });

  it('a part that fails to start: everything is closed (the parts after it too, never started) and start rejects with its error', async () => {
    const log: string[] = [];
    const life = new Lifecycle(() => assert.fail('no close fails'));
    life.add(part('a', log));
    life.add(part('b', log, { start: true }));
    life.add(part('c', log));
    await assert.rejects(life.start(), /b cannot start/);
    assert.deepEqual(log, ['start a', 'start b', 'close c', 'close b', 'close a']);
  });

  it('closes once, whoever asks and how often; a part that fails to close is reported and the rest still close', async () => {
    const log: string[] = [];
    const failed: string[] = [];
    const life = new Lifecycle((name, err) => failed.push(`${name}: ${err.message}`));
    life.add(part('a', log));
    life.add(part('b', log, { close: true }));
    await life.start();
    await Promise.all([life.close(), life.close()]);
    await life.close();
    assert.deepEqual(log, ['start a', 'start b', 'close b', 'close a']);
    assert.deepEqual(failed, ['b: b cannot close']);
  });

  it('closed before start: every part closes, none starts; closed while starting: no further part starts', async () => {
    const log: string[] = [];
    const life = new Lifecycle(() => {});
    life.add(part('a', log));
    await life.close();
    assert.deepEqual(log, ['close a']);
    await assert.rejects(life.start(), /closed while starting, before a started/);

    const log2: string[] = [];
    const life2 = new Lifecycle(() => {});
    life2.add({ name: 'a', start: () => void life2.close(), close: () => void log2.push('close a') });
    life2.add(part('b', log2));
    await assert.rejects(life2.start(), /before b started/);
    assert.deepEqual(log2, ['close b', 'close a']);
  });

  it('parts are added while building: not after start', async () => {
    const life = new Lifecycle(() => {});
    await life.start();
    assert.throws(() => life.add(part('late', [])), /part late added after start/);
    await life.close();
  });
});
