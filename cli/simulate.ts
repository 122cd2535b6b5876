// `oversell simulate`: the simulator's command line. Reads the scenario and
// OversellPolicy files, runs sim/, writes or prints the report. The only I/O
// of the simulation is here.
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { Command, InvalidArgumentError, Option } from 'commander';
import yaml from 'js-yaml';
import { applyOverrides, DEFAULT_SCENARIO, parseScenario, ScenarioError, type OversellPolicyInput, type Scenario } from '../sim/scenario.js';
import type { Demand } from '../sim/cluster.js';
import { simulate, type Progress } from '../sim/simulate.js';
import { parseTrace, traceSeconds, type Trace } from '../sim/trace.js';
import { buildReport, busierScenario, markdown, reportFiles, reportJson } from '../sim/report.js';

interface SimulateOptions {
  scenario?: string;
  trace?: string;
  policy?: string[];
  nodes?: number;
  hours?: number;
  seed?: number;
  usageScale?: number;
  busier: number | false;
  demand: Demand;
  nodesNeeded?: boolean;
  progress?: boolean;
  output: 'markdown' | 'json';
  out?: string;
}

const number = (min: number, integer = false) => (v: string) => {
  const n = Number(v);
  if (v.trim() === '' || !Number.isFinite(n) || n < min || (integer && !Number.isInteger(n))) throw new InvalidArgumentError(`${JSON.stringify(v)} is not ${integer ? 'an integer' : 'a number'} >= ${min}`);
  return n;
};

function readYaml(file: string): unknown[] {
  try {
    return yaml.loadAll(readFileSync(file, 'utf8'));
  } catch (err) {
    throw new ScenarioError(`${file}: ${(err as Error).message}`);
  }
}

/** OversellPolicy objects from a file (several documents allowed). */
function policiesFrom(file: string): OversellPolicyInput[] {
  return readYaml(file).filter((d) => d !== null && d !== undefined).map((d, i) => {
    const o = d as { kind?: unknown; metadata?: { name?: unknown }; spec?: unknown };
    if (o.kind !== 'OversellPolicy' || typeof o.metadata?.name !== 'string') throw new ScenarioError(`${file}: document ${i + 1} is not an OversellPolicy with a metadata.name`);
    return { name: o.metadata.name, spec: (o.spec ?? {}) as Record<string, unknown> };
  });
}

export function scenarioOf(o: SimulateOptions): Scenario {
  let s = DEFAULT_SCENARIO;
  if (o.scenario) {
    const docs = readYaml(o.scenario);
    try {
      s = parseScenario(docs[0]);
    } catch (err) {
      if (err instanceof ScenarioError) throw new ScenarioError(`${o.scenario}: ${err.message}`);
      throw err;
    }
  }
  const extra = (o.policy ?? []).flatMap(policiesFrom);
  if (extra.length > 0) s = { ...s, policies: { ...s.policies, oversell: [...s.policies.oversell, ...extra] } };
  return applyOverrides(s, { nodes: o.nodes, hours: o.hours, seed: o.seed, usageScale: o.usageScale });
}

/** The command line that gives this report, for the page to say how to regenerate it. */
function commandLine(o: SimulateOptions): string {
  const parts = ['oversell simulate'];
  if (o.scenario) parts.push(`--scenario ${o.scenario}`);
  if (o.trace) parts.push(`--trace ${o.trace}`);
  for (const p of o.policy ?? []) parts.push(`--policy ${p}`);
  if (o.nodes !== undefined) parts.push(`--nodes ${o.nodes}`);
  if (o.hours !== undefined) parts.push(`--hours ${o.hours}`);
  if (o.seed !== undefined) parts.push(`--seed ${o.seed}`);
  if (o.usageScale !== undefined) parts.push(`--usage-scale ${o.usageScale}`);
  if (o.demand !== 'scenario') parts.push(`--demand ${o.demand}`);
  if (o.nodesNeeded) parts.push('--nodes-needed');
  if (o.busier === false) parts.push('--no-busier');
  else if (o.busier !== 1.3) parts.push(`--busier ${o.busier}`);
  return parts.join(' ');
}

/** One line on stderr per whole percent, for long runs: 10,000 nodes take minutes. */
function progressLine(): (p: Progress) => void {
  let last = -1;
  return (p) => {
    const percent = Math.floor(p.done * 100);
    if (percent === last) return;
    last = percent;
    process.stderr.write(`simulating: ${percent} % (${p.policy})\n`);
  };
}

function traceOf(file: string): Trace {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    throw new ScenarioError(`${file}: ${(err as Error).message}`);
  }
  try {
    return parseTrace(text);
  } catch (err) {
    if (err instanceof ScenarioError) throw new ScenarioError(`${file}: ${err.message}`);
    throw err;
  }
}

export function runSimulate(o: SimulateOptions): void {
  let scenario: Scenario;
  let trace: Trace | undefined;
  try {
    if (o.trace && o.nodes !== undefined) throw new ScenarioError('--nodes and --trace: the recorded nodes are the cluster');
    if (o.trace && o.nodesNeeded) throw new ScenarioError('--nodes-needed and --trace: the recorded nodes are the cluster; run --nodes-needed on a scenario');
    trace = o.trace ? traceOf(o.trace) : undefined;
    // A replay lasts as long as the recording unless --hours says otherwise.
    scenario = scenarioOf({ ...o, ...(trace && o.hours === undefined && { hours: Math.max(0.01, traceSeconds(trace) / 3600) }) });
  } catch (err) {
    if (!(err instanceof ScenarioError)) throw err;
    process.stderr.write(`error: ${err.message}\n`);
    process.exit(2);
  }
  // Long runs say how far they are; a day of 100 nodes takes seconds and stays quiet.
  const long = o.progress ?? (trace?.polls[0]?.nodes.length ?? scenario.nodes) >= 1000;
  const withBusier = o.busier !== false && scenario.usage.step === undefined;
  const onProgress = long ? progressLine() : undefined;
  const options = { demand: o.demand, nodesNeeded: o.nodesNeeded };
  const main = simulate(scenario, onProgress && ((p) => onProgress({ ...p, done: withBusier ? p.done / 2 : p.done })), trace, options);
  // The busier run asks only about harm: nodes needed are the main run's.
  const busier = withBusier
    ? simulate(busierScenario(scenario, o.busier as number), onProgress && ((p) => onProgress({ ...p, done: 0.5 + p.done / 2 })), trace, { demand: o.demand })
    : undefined;
  const report = buildReport(main, busier);
  if (o.out) {
    for (const [path, text] of Object.entries(reportFiles(report, commandLine(o)))) {
      const file = join(o.out, path);
      mkdirSync(dirname(file), { recursive: true });
      writeFileSync(file, text);
      process.stderr.write(`wrote ${file}\n`);
    }
    return;
  }
  process.stdout.write(o.output === 'json' ? reportJson(report) : markdown(report, false, commandLine(o)));
}

export function simulateCommand(): Command {
  return new Command('simulate')
    .description('simulate a cluster under each policy, side by side: pods placed, and what it risks (no cluster needed)')
    .option('--scenario <file>', 'scenario YAML (fields not given keep their defaults: examples/simulate.yaml)')
    .option('--trace <file>', 'replay a cluster recorded by `oversell record`: its nodes and their load, the scenario\'s pods on top')
    .option('--policy <file...>', 'OversellPolicy YAML to run as well (several, or several documents in one file)')
    .addOption(new Option('--nodes <n>', 'nodes in the cluster (default 100)').argParser(number(1, true)))
    .addOption(new Option('--hours <h>', 'simulated hours (default 24)').argParser(number(0.01)))
    .addOption(new Option('--seed <s>', 'seed of the workload (default 1)').argParser(number(0, true)))
    .addOption(new Option('--usage-scale <f>', "multiply every pod's usage: a cluster busier than its requests suggest (default 1)").argParser(number(0)))
    .addOption(new Option('--busier <factor>', 'also run the scenario with usage times this from half-way through').argParser(number(0)).default(1.3))
    .option('--no-busier', 'skip that second run')
    .addOption(new Option('--demand <kind>', 'scenario: the daily curve and job arrivals; saturating: pods keep coming until nothing more fits').choices(['scenario', 'saturating']).default('scenario'))
    .option('--nodes-needed', 'also find, per policy, the fewest nodes for the scenario\'s demand with no pod waiting (a binary search: about 8 more runs per policy)')
    .option('--progress', 'report progress on stderr (the default from 1000 nodes on)')
    .addOption(new Option('-o, --output <format>', 'markdown or json, on stdout').choices(['markdown', 'json']).default('markdown'))
    .option('--out <dir>', 'write outcome.md, outcome.json and the charts (outcome/*.svg) to this directory instead')
    .action((o: SimulateOptions) => runSimulate(o));
}
