// The summarizing agents' send interval against what 1,000 of them cost a
// replica: message-cost's settings S (the default), S40 and S60 alone, alternated,
// ROUNDS each (default 2). Prints one line per run and the means per 1,000
// agents; for the performance log, not published.
//
//   node --import tsx bench/send-interval-sweep.ts
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ensureLoadgen } from './loadgen.js';
import { measure, SETTINGS, writeAgentTokens } from './message-cost.js';
import { log } from './processes.js';
import { mean, round } from './result.js';

const rounds = Number(process.env.ROUNDS ?? 2);
const loadgen = await ensureLoadgen();
const work = mkdtempSync(join(tmpdir(), 'oversell-send-sweep-'));
const tokens = writeAgentTokens(work);
const sweep = SETTINGS.filter((s) => s.summaries);
const runs = new Map<string, number[]>(sweep.map((s) => [s.name, []]));
try {
  for (let r = 0; r < rounds; r++) {
    for (const s of sweep) {
      const m = await measure(loadgen, tokens, s, 10, 60);
      runs.get(s.name)?.push(m.millicores - m.idleMillicores);
      log(`round ${r + 1}/${rounds}: ${s.name} (every ${s.intervalS} s) ${round(m.millicores)} millicores, ${round(m.idleMillicores)} idle`);
    }
  }
} finally {
  rmSync(work, { recursive: true, force: true });
}
for (const [name, xs] of runs) log(`${name}: ${round(mean(xs), 1)} millicores per 1,000 agents (runs ${xs.map((x) => round(x)).join(' ')})`);
