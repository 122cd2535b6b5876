// README's "The binaries" tables list every flag the binaries define, with its
// environment variable, and no flag they do not (issue 20, item 8). The flags
// come from the commander definitions --help prints, not from a list here.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import type { Command } from 'commander';
import { defineAgentFlags } from '../agent/flags.js';
import { defineGatewayFlags } from '../gateway/config/flags.js';

const readme = readFileSync(fileURLToPath(new URL('../README.md', import.meta.url)), 'utf8');

interface Row { flags: string[]; envs: string[]; line: string }

/** The table rows under "### <heading>", up to the next heading. */
function tableRows(markdown: string, heading: string): Row[] {
  const start = markdown.indexOf(`\n### ${heading}\n`);
  assert.ok(start >= 0, `README has a "### ${heading}" section`);
  const rest = markdown.slice(start + heading.length + 6);
  const section = rest.slice(0, rest.search(/\n#{2,3} /) >>> 0);
  return section.split('\n').filter((l) => l.startsWith('| `')).map((line) => {
    const [flagCell = '', envCell = ''] = line.split('|').slice(1);
    const ticks = (cell: string) => [...cell.matchAll(/`([^`]+)`/g)].map((m) => String(m[1]));
    return { flags: ticks(flagCell), envs: ticks(envCell), line };
  });
}

/** Where the README and the definition differ, one line each; empty when they agree. */
function tableDrift(program: Command, rows: Row[]): string[] {
  const drift: string[] = [];
  const defined = new Set<string>();
  for (const option of program.options) {
    if (!option.long || option.long === '--help') continue;
    defined.add(option.long);
    const row = rows.find((r) => r.flags.includes(String(option.long)));
    if (!row) drift.push(`${option.long} (${option.envVar}) has no row`);
    else if (option.envVar && !row.envs.includes(option.envVar)) drift.push(`${option.long}: the row says ${JSON.stringify(row.envs)}, the flag reads ${option.envVar}`);
  }
  for (const row of rows) for (const f of row.flags) if (!defined.has(f)) drift.push(`${f} is in the table but not a flag of ${program.name()}`);
  return drift;
}

describe('README flag tables', () => {
  for (const [name, define] of [['oversell-gateway', defineGatewayFlags], ['oversell-agent', defineAgentFlags]] as const) {
    it(`${name}: every flag has a row naming its environment variable, every row a flag`, () => {
      const program = define();
      assert.ok(program.options.length > 10, `read ${name}'s flags`);
      assert.deepEqual(tableDrift(program, tableRows(readme, name)), []);
    });
  }

  it('the check finds a missing row, a wrong variable and a stale row', () => {
    const rows = tableRows(readme, 'oversell-gateway');
    const withoutTlsSecret = rows.filter((r) => !r.flags.includes('--tls-secret'));
    assert.deepEqual(tableDrift(defineGatewayFlags(), withoutTlsSecret), ['--tls-secret (OVERSELL_TLS_SECRET) has no row']);
    const wrongEnv = rows.map((r) => (r.flags.includes('--warmup') ? { ...r, envs: ['OVERSELL_WARM_UP'] } : r));
    assert.deepEqual(tableDrift(defineGatewayFlags(), wrongEnv), ['--warmup: the row says ["OVERSELL_WARM_UP"], the flag reads OVERSELL_WARMUP']);
    const stale = [...rows, { flags: ['--gone'], envs: [], line: '' }];
    assert.deepEqual(tableDrift(defineGatewayFlags(), stale), ['--gone is in the table but not a flag of oversell-gateway']);
  });
});
