// `npm pack` / `npm publish` before the tarball is made (prepack): dist/ from
// scratch, so that the build that follows ("prepare", which writes only what
// the sources make) ships no file of a moved or deleted source.
//
// The production dependencies travel inside the tarball (package.json
// "bundleDependencies", every one of "dependencies"; an array, not `true`,
// which dependency-cruiser cannot read), from this repository's node_modules, that is
// at package-lock.json's versions. A shrinkwrap would not pin them: npm
// ignores the npm-shrinkwrap.json of a tarball installed from a file, global
// or not (npm/cli#5325, #5349; seen with npm 11.19 on 2026-12-04), and
// resolves every range against the registry of the day.
import { rmSync } from 'node:fs';

const step = process.argv[2];
if (step === 'before') {
  rmSync('dist', { recursive: true, force: true });
} else {
  console.error(`usage: node scripts/pack.mjs before (got ${JSON.stringify(step)})`);
  process.exit(2);
}
