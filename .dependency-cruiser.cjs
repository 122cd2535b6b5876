// Which way imports may point (`npm run check:deps`; `npm test` runs it first).
// The layers, bottom up:
//
//   lib/                      generic helpers; imports nothing of ours
//   proto/                    the contract (.proto, load.ts, generated gen/)
//   wire/                     hand-written codecs for the contract's messages
//   agent/ gateway/ cli/      the three binaries; none imports another
//   sim/                      the simulator (`oversell simulate`): the gateway's pure
//                             decision (gateway/decide/, the OversellPolicy parser) and
//                             lib/ only; cli/ runs it, nothing below imports it
//   scripts/                  developer tools (built into dist/: npm start)
//   bench/ test/              may import anything below
//
// Inside a folder, a subfolder never imports its parent's own files (the
// parent is the composition root: gateway/gateway.ts, agent/agent.ts), and no
// two folders import each other. A shared module goes down to a folder both
// users can import, or to lib/ if it is generic.
/** @type {import('dependency-cruiser').IConfiguration} */
module.exports = {
  forbidden: [
    {
      name: 'no-folder-cycles',
      comment:
        'Two folders import each other (directly or round a loop): neither can be read, tested or moved without the other. Move what they share down to a folder both can import.',
      severity: 'error',
      scope: 'folder',
      from: {},
      to: { circular: true },
    },
    {
      name: 'no-module-cycles',
      comment: 'Modules that import each other round a loop load in an order that depends on who is imported first.',
      severity: 'error',
      from: {},
      to: { circular: true },
    },
    {
      name: 'no-import-from-parent-folder',
      comment:
        "A file imports a file of its parent folder: the parent's own files sit above its subfolders (they compose them). Move the shared file down.",
      severity: 'error',
      from: { path: '^(.+)/[^/]+/[^/]+$' },
      to: { path: '^$1/[^/]+$' },
    },
    {
      name: 'no-import-from-grandparent-folder',
      comment: 'As no-import-from-parent-folder, two levels up.',
      severity: 'error',
      from: { path: '^(.+)/[^/]+/[^/]+/[^/]+$' },
      to: { path: '^$1/[^/]+$' },
    },
    {
      name: 'lib-imports-nothing-above',
      comment: 'lib/ is the bottom layer: generic helpers every layer may use. It imports only lib/ and packages.',
      severity: 'error',
      from: { path: '^lib/' },
      to: { path: '^(agent|gateway|cli|sim|proto|wire|scripts|bench|test)/' },
    },
    {
      name: 'sim-uses-only-the-pure-decision',
      comment: 'sim/ runs the decision the webhook runs, imported, never copied: gateway/decide/ and the OversellPolicy parser, lib/ and packages; no I/O of any binary.',
      severity: 'error',
      from: { path: '^sim/' },
      to: { path: '^(agent|gateway|cli|proto|wire|scripts|bench|test)/', pathNot: '^(gateway/decide/|gateway/policies/policy-spec\\.ts$)' },
    },
    {
      name: 'only-the-cli-runs-the-simulator',
      comment: 'The simulator is a tool on top of the product: no binary but cli/ depends on it.',
      severity: 'error',
      from: { path: '^(agent|gateway|lib|proto|wire|scripts)/' },
      to: { path: '^sim/' },
    },
    {
      name: 'proto-is-only-the-contract',
      comment: 'proto/ is the .proto, its loader and the generated types; it imports nothing else of ours.',
      severity: 'error',
      from: { path: '^proto/' },
      to: { path: '^(lib|agent|gateway|cli|wire|scripts|bench|test)/' },
    },
    {
      name: 'wire-imports-only-the-contract',
      comment: 'wire/ encodes proto/ messages for every binary; it must not depend on any of them.',
      severity: 'error',
      from: { path: '^wire/' },
      to: { path: '^(agent|gateway|cli|scripts|bench|test)/' },
    },
    {
      name: 'binaries-do-not-import-dev-code',
      comment: 'agent/, gateway/ and cli/ ship in the image; test/, bench/ and scripts/ do not belong there.',
      severity: 'error',
      from: { path: '^(agent|gateway|cli)/' },
      to: { path: '^(test|bench|scripts)/' },
    },
    {
      name: 'binaries-are-independent',
      comment: 'Each binary builds on lib/, proto/ and wire/ only; what two of them share belongs there.',
      severity: 'error',
      from: { path: '^(agent|gateway|cli)/' },
      to: { path: '^(agent|gateway|cli)/', pathNot: '^$1/' },
    },
    {
      name: 'scripts-do-not-import-tests-or-bench',
      comment: 'scripts/ is compiled into dist/ (npm start runs dist/scripts/local.js); test/ and bench/ are not.',
      severity: 'error',
      from: { path: '^scripts/' },
      to: { path: '^(test|bench)/' },
    },
    {
      name: 'tests-do-not-import-bench',
      comment: 'bench/ builds on test/helpers/, not the other way round.',
      severity: 'error',
      from: { path: '^test/' },
      to: { path: '^bench/' },
    },
    {
      name: 'decide-is-pure',
      comment: 'gateway/decide/ is the pure decision (no I/O, no clock) and the bottom of the gateway: it imports no other gateway folder.',
      severity: 'error',
      from: { path: '^gateway/decide/' },
      to: { path: '^gateway/', pathNot: '^gateway/decide/' },
    },
  ],
  options: {
    includeOnly: '^(agent|gateway|cli|sim|lib|proto|wire|scripts|bench|test)/',
    exclude: { path: '^test/deploy/tools/' },
    doNotFollow: { path: 'node_modules' },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.test.json' },
    enhancedResolveOptions: {
      exportsFields: ['exports'],
      conditionNames: ['import', 'require', 'node', 'default', 'types'],
      extensions: ['.ts', '.mts', '.mjs', '.js', '.d.ts'],
    },
    reporterOptions: { text: { highlightFocused: true } },
  },
};
