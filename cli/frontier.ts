// `oversell simulate --frontier`: sweeps each family's knob on the scenario
// (sim/frontier.ts) and prints or writes the page. The sweep is some forty
// runs of the scenario, minutes on the default one: it says how far it is.
import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import type { Demand } from '../sim/cluster.js';
import { frontierFiles, frontierJson, frontierMarkdown } from '../sim/frontier-report.js';
import { defaultSweep, runFrontier, type FrontierProgress } from '../sim/frontier.js';
import { ScenarioError, type Scenario } from '../sim/scenario.js';

/** The flags of `simulate` that --frontier cannot honour, refused before anything runs. */
export function checkFrontierFlags(o: { frontier?: boolean | undefined; trace?: string | undefined; nodesNeeded?: boolean | undefined }): void {
  if (!o.frontier) return;
  if (o.trace) throw new ScenarioError('--frontier sweeps the scenario\'s workload; a trace is not supported with it (run --frontier without --trace)');
  if (o.nodesNeeded) throw new ScenarioError('--frontier and --nodes-needed: the sweep compares pods placed at each risk, not nodes; run --nodes-needed without --frontier');
}

export interface FrontierCommand {
  scenario: Scenario;
  demand: Demand;
  output: 'markdown' | 'json';
  out?: string | undefined;
  progress: boolean;
  /** The command line, for the page to say how it was made. */
  command: string;
}

function progressLine(started: number): (p: FrontierProgress) => void {
  return (p) => process.stderr.write(`frontier: ${p.done}/${p.total} ${p.family} ${p.label} (${Math.round((Date.now() - started) / 1000)} s)\n`);
}

export function runFrontierCommand(c: FrontierCommand): void {
  // The scenario's own OversellPolicies (its file's, --policy's) are settings of oversell's sweep as well.
  const base = defaultSweep(c.scenario);
  const sweep = { ...base, oversell: [...base.oversell, ...c.scenario.policies.oversell] };
  const scenario = { ...c.scenario, policies: { ...c.scenario.policies, oversell: [] } };
  const f = runFrontier(scenario, sweep, { demand: c.demand, ...(c.progress && { onProgress: progressLine(Date.now()) }) });
  if (c.out) {
    for (const [path, text] of Object.entries(frontierFiles(f, c.command))) {
      const file = join(c.out, path);
      mkdirSync(dirname(file), { recursive: true });
      writeFileSync(file, text);
      process.stderr.write(`wrote ${file}\n`);
    }
    return;
  }
  process.stdout.write(c.output === 'json' ? frontierJson(f) : frontierMarkdown(f, false, c.command));
}
