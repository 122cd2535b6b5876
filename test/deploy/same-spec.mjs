// Compares two renders of the same objects (kustomize's and Helm's) by kind
// and name: the same objects, each with the same spec, the Helm one's
// paramRef in the release namespace. For check.sh.
//
// Usage: node test/deploy/same-spec.mjs [--tools DIR] KUSTOMIZE HELM NAMESPACE
import { deepStrictEqual } from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';

const args = process.argv.slice(2);
const t = args.indexOf('--tools');
const tools = t < 0 ? join(import.meta.dirname, 'tools') : args.splice(t, 2)[1];
const [kustomize, helm, namespace] = args;
if (!kustomize || !helm || !namespace) {
  console.error('usage: same-spec.mjs [--tools DIR] KUSTOMIZE HELM NAMESPACE');
  process.exit(2);
}
const { parseAllDocuments } = createRequire(join(tools, 'node_modules', 'x.js'))('yaml');
const specs = (file) => new Map(parseAllDocuments(readFileSync(file, 'utf8')).map((d) => d.toJS()).filter(Boolean).map((o) => [`${o.kind}/${o.metadata.name}`, o.spec]));
const k = specs(kustomize);
const h = specs(helm);
if (k.size === 0) {
  console.error(`${kustomize}: no objects`);
  process.exit(1);
}
deepStrictEqual([...h.keys()].sort(), [...k.keys()].sort(), 'the same objects');
for (const [key, spec] of k) {
  const expected = spec.paramRef ? { ...spec, paramRef: { ...spec.paramRef, namespace } } : spec;
  deepStrictEqual(h.get(key), expected, `${key}: Helm's spec is kustomize's, in namespace ${namespace}`);
}
console.log(`${[...k.keys()].join(', ')}: the same spec (paramRef in ${namespace})`);
