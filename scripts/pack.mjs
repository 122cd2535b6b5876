// `npm pack` / `npm publish` around the tarball (prepack: `before`, postpack: `after`).
// before: dist/ from scratch (the build that follows, "prepare", writes only what
// the sources make, so no file of a moved or deleted source is shipped), and the
// lockfile as npm-shrinkwrap.json, so `npm install -g oversell` installs the
// production dependencies this repository was tested with, not whatever their
// ranges resolve to that day. after: the shrinkwrap copy goes again.
import { copyFileSync, rmSync } from 'node:fs';

const step = process.argv[2];
if (step === 'before') {
  rmSync('dist', { recursive: true, force: true });
  copyFileSync('package-lock.json', 'npm-shrinkwrap.json');
} else if (step === 'after') {
  rmSync('npm-shrinkwrap.json', { force: true });
} else {
  console.error(`usage: node scripts/pack.mjs before|after (got ${JSON.stringify(step)})`);
  process.exit(2);
}
