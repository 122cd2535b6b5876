// Prints the documents of a rendered YAML stream that pass a filter, for the
// server-side dry run in check.sh: the prerequisites first (Namespace, CRD),
// then the rest, optionally without the objects of API groups the cluster
// does not serve (e.g. cert-manager.io without cert-manager).
//
// Usage: node test/deploy/select.mjs [--tools DIR] (--kinds K1,K2 | --not-kinds K1,K2)
//          [--not-groups G1,G2] FILE
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';

const args = process.argv.slice(2);
const opt = (name) => {
  const i = args.indexOf(`--${name}`);
  return i < 0 ? undefined : args.splice(i, 2)[1];
};
const list = (v) => (v ? v.split(',').filter(Boolean) : undefined);
const tools = opt('tools') ?? join(import.meta.dirname, 'tools');
const kinds = list(opt('kinds'));
const notKinds = list(opt('not-kinds')) ?? [];
const notGroups = list(opt('not-groups')) ?? [];
const [file] = args;
if (!file) {
  console.error('usage: select.mjs [--tools DIR] (--kinds K,.. | --not-kinds K,..) [--not-groups G,..] FILE');
  process.exit(2);
}
const { parseAllDocuments, stringify } = createRequire(join(tools, 'node_modules', 'x.js'))('yaml');
const group = (o) => (o.apiVersion.includes('/') ? o.apiVersion.split('/')[0] : '');
const out = parseAllDocuments(readFileSync(file, 'utf8'))
  .map((d) => d.toJS())
  .filter((o) => o && (!kinds || kinds.includes(o.kind)) && !notKinds.includes(o.kind) && !notGroups.includes(group(o)));
// YAML 1.1 output: kubectl reads 1.1, where an unquoted on/off/yes/no is a boolean (OVERSELL_GRPC_TLS: "on").
process.stdout.write(out.map((o) => stringify(o, { version: '1.1' })).join('---\n'));
