// `oversell simulate --caps`: the default policy under every pair of hard caps
// on the scenario and its over-provisioned variant (sim/caps.ts), printed or
// written as docs/caps.md. Four runs of the scenario, each with every pair.
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { capsFiles, capsJson, capsMarkdown } from '../sim/caps-report.js';
import { runCaps } from '../sim/caps.js';
import type { Demand } from '../sim/cluster.js';
import { ScenarioError, type Scenario } from '../sim/scenario.js';

/** The flags of `simulate` that --caps cannot honour, refused before anything runs. */
export function checkCapsFlags(o: { caps?: boolean | undefined; frontier?: boolean | undefined; trace?: string | undefined; nodesNeeded?: boolean | undefined; policy?: string[] | undefined }): void {
  if (!o.caps) return;
  if (o.frontier) throw new ScenarioError('--caps and --frontier are two sweeps; run one at a time');
  if (o.trace) throw new ScenarioError('--caps sweeps the scenario and its over-provisioned variant; a trace is not supported with it');
  if (o.nodesNeeded) throw new ScenarioError('--caps compares pods placed and harm under each pair of caps, not nodes; run --nodes-needed without --caps');
  if (o.policy?.length) throw new ScenarioError('--caps sweeps the default policy\'s caps; --policy files are not swept (run them without --caps)');
}

export interface CapsCommand {
  scenario: Scenario;
  demand: Demand;
  output: 'markdown' | 'json';
  out?: string | undefined;
  /** The command line, for the page to say how it was made. */
  command: string;
}

export function runCapsCommand(c: CapsCommand): void {
  const started = Date.now();
  const sweep = runCaps(c.scenario, c.demand, (p) =>
    process.stderr.write(`caps: ${p.done}/${p.total} ${p.scenario} ${p.run} (${Math.round((Date.now() - started) / 1000)} s)\n`),
  );
  if (c.out) {
    mkdirSync(c.out, { recursive: true });
    for (const [path, text] of Object.entries(capsFiles(sweep, c.command))) {
      writeFileSync(join(c.out, path), text);
      process.stderr.write(`wrote ${join(c.out, path)}\n`);
    }
    return;
  }
  process.stdout.write(c.output === 'json' ? capsJson(sweep) : capsMarkdown(sweep, c.command));
}
