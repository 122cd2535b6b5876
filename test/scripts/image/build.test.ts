// The image is built from the folders tsconfig.json compiles: each must be in
// the Dockerfile's build stage (COPY) and in what scripts/image/build.sh hashes
// to decide the image is up to date. A folder added to one and not the others
// breaks the image build (tsc cannot find its modules) or leaves a stale image.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';

const REPO = fileURLToPath(new URL('../../../', import.meta.url));
const read = (f: string) => readFileSync(join(REPO, f), 'utf8');
const compiled: string[] = (JSON.parse(read('tsconfig.json')) as { include: string[] }).include;

describe('the image build reads every compiled folder', () => {
  it('tsconfig.json compiles a known set (a check that cannot pass on an empty list)', () => {
    assert.ok(compiled.includes('gateway') && compiled.includes('agent') && compiled.includes('cli'), compiled.join(', '));
  });

  it('the Dockerfile copies each into the build stage', () => {
    const copied = [...read('Dockerfile').matchAll(/^COPY (\S+) \.\/\1$/gm)].map((m) => m[1]);
    for (const dir of compiled) assert.ok(copied.includes(dir), `Dockerfile: no "COPY ${dir} ./${dir}" (copied: ${copied.join(', ')})`);
  });

  it('scripts/image/build.sh hashes each as an input', () => {
    const find = /^\s*find Dockerfile (.*) \\$/m.exec(read('scripts/image/build.sh'))?.[1]?.split(/\s+/) ?? [];
    for (const dir of compiled) assert.ok(find.includes(dir), `build.sh inputs_hash: ${dir} missing from "${find.join(' ')}"`);
  });
});
