// The process harness npm start, the benchmarks and the e2e tests share
// (scripts/harness/processes.ts): lines are seen whether they came before or
// after the wait, a wait gives up, and only an exit nobody asked for is reported.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { startProcess } from '../scripts/harness/processes.js';

const node = (script: string) => [process.execPath, ['-e', script]] as const;

describe('startProcess', () => {
  it('finds a line written before the wait and one written after it, on either stream', async () => {
    const [file, args] = node("console.log('early'); setTimeout(() => console.error('late 42'), 200); setTimeout(() => {}, 10000);");
    const child = startProcess('t', file, args);
    try {
      await new Promise((r) => setTimeout(r, 100));
      assert.equal(await child.waitForLine(/^early$/, 2000), 'early');
      assert.equal(await child.waitForLine((l) => l.startsWith('late '), 2000), 'late 42');
      assert.match(child.output(), /early\nlate 42/);
    } finally {
      await child.stop();
    }
  });

  it('gives up on a line that never comes', async () => {
    const [file, args] = node('setTimeout(() => {}, 10000);');
    const child = startProcess('quiet', file, args);
    try {
      await assert.rejects(child.waitForLine(/ready/, 150), /quiet: no output line matching \/ready\/ within 150 ms/);
    } finally {
      await child.stop();
    }
  });

  it('reports an exit nobody asked for, with the last lines, and not one that stop() asked for', async () => {
    const exits: string[] = [];
    const [file, args] = node("console.log('bye'); setTimeout(() => process.exit(3), 100);");
    const dies = startProcess('dies', file, args, { onUnexpectedExit: (code, _signal, output) => exits.push(`${code} ${output}`) });
    await dies.exited;
    assert.deepEqual(exits, ['3 bye']);

    const [file2, args2] = node('setTimeout(() => {}, 10000);');
    const stopped = startProcess('stopped', file2, args2, { onUnexpectedExit: () => exits.push('stopped') });
    await stopped.stop();
    assert.equal(stopped.proc.signalCode, 'SIGTERM');
    assert.deepEqual(exits, ['3 bye']);
  });

  it('keeps only the last keepLines lines', async () => {
    const [file, args] = node('for (let i = 0; i < 10; i++) console.log(i);');
    const child = startProcess('count', file, args, { keepLines: 3 });
    await child.waitForLine(/^9$/, 2000);
    assert.equal(child.output(), '7\n8\n9');
  });
});
