// The agent's reader of kernel files (agent/sample/files.ts): one shared buffer,
// so what it returns must be the file's whole text whatever its size, and a file
// that is gone or that the kernel refuses is undefined, not an error.
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { readOptional } from '../../../agent/sample/files.js';

const dir = mkdtempSync(join(tmpdir(), 'oversell-files-'));
after(() => rmSync(dir, { recursive: true, force: true }));

describe('readOptional', () => {
  it('returns each file whole: a short one after a long one, and one past the 64 KiB buffer', () => {
    const long = join(dir, 'stat');
    const text = Array.from({ length: 4000 }, (_, i) => `cpu${i} ${i} 0 ${i * 7} 99\n`).join('');
    assert.ok(text.length > 64 * 1024);
    writeFileSync(long, text);
    const exact = join(dir, 'exact');
    writeFileSync(exact, 'x'.repeat(64 * 1024));
    const short = join(dir, 'memory.current');
    writeFileSync(short, '4096\n');
    assert.equal(readOptional(long), text);
    assert.equal(readOptional(short), '4096\n', 'nothing left over from the longer read');
    assert.equal(readOptional(exact), 'x'.repeat(64 * 1024));
    assert.equal(readOptional(join(dir, 'empty')), undefined, 'missing');
    writeFileSync(join(dir, 'empty'), '');
    assert.equal(readOptional(join(dir, 'empty')), '');
  });

  it('a file that is gone, or a path through a file, is undefined; a directory is an error', () => {
    assert.equal(readOptional(join(dir, 'gone', 'cpu.stat')), undefined);
    writeFileSync(join(dir, 'plain'), 'x');
    assert.equal(readOptional(join(dir, 'plain', 'cpu.stat')), undefined);
    mkdirSync(join(dir, 'sub'));
    assert.throws(() => readOptional(join(dir, 'sub')), /EISDIR/);
  });
});
