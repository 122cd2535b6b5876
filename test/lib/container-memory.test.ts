// The gateway's default connection limit comes from its memory limit: the
// smallest limit on the process's cgroup path, read through /proc/self/cgroup
// (a container's "/" and a cgroup made around a process on a host alike).
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { memoryLimitBytes } from '../../lib/container-memory.js';
import { defaultMaxConnections } from '../../gateway/config/config.js';

const MIB = 2 ** 20;
const root = mkdtempSync(join(tmpdir(), 'oversell-memory-limit-'));
after(() => rmSync(root, { recursive: true, force: true }));
const write = (path: string, text: string) => {
  mkdirSync(join(root, path, '..'), { recursive: true });
  writeFileSync(join(root, path), text);
};

describe('container memory limit', () => {
  it('cgroup v1: the memory controller\'s line, the smallest limit on the path; v1\'s "no limit" is none', () => {
    write('v1/memory/memory.limit_in_bytes', '9223372036854771712\n');
    write('v1/memory/kubepods/memory.limit_in_bytes', `${8192 * MIB}\n`);
    write('v1/memory/kubepods/pod1/memory.limit_in_bytes', `${1536 * MIB}\n`);
    write('v1/memory/kubepods/pod1/c1/memory.limit_in_bytes', '9223372036854771712\n');
    const self = '12:cpu,cpuacct:/kubepods/pod1/c1\n11:memory:/kubepods/pod1/c1\n0::/\n';
    assert.equal(memoryLimitBytes(self, join(root, 'v1')), 1536 * MIB);
    assert.equal(memoryLimitBytes('11:memory:/\n', join(root, 'v1')), undefined, 'the root: no limit');
  });

  it('cgroup v2: memory.max on the unified line\'s path; "max" is none', () => {
    write('v2/memory.max', 'max\n');
    write('v2/pod2/memory.max', `${2048 * MIB}\n`);
    write('v2/pod2/c2/memory.max', 'max\n');
    assert.equal(memoryLimitBytes('0::/pod2/c2\n', join(root, 'v2')), 2048 * MIB);
    assert.equal(memoryLimitBytes('0::/\n', join(root, 'v2')), undefined);
  });

  it('--max-connections by default: what the limit holds at 128 KiB a connection after 256 MiB, within 100 and 20,000', () => {
    assert.equal(defaultMaxConnections(1536 * MIB), 10_240, 'the shipped limit: past the 10,000 agents it was measured with, short of the 20,000 that OOM-killed it');
    assert.equal(defaultMaxConnections(undefined), 20_000, 'no limit: the built-in default');
    assert.equal(defaultMaxConnections(64 * 1024 * MIB), 20_000);
    assert.equal(defaultMaxConnections(128 * MIB), 100);
  });
});
