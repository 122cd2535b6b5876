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
import { publicReplay, type PublicReplay } from '../sim/public-replay.js';
import { isPublicTraceFormat, readPublicTrace, type PublicTraceOptions } from '../sim/traces/read.js';
import { TraceFormatError, type PublicWorkload } from '../sim/traces/public-workload.js';
import { parseBytes } from '../lib/quantity.js';
import { checkCapsFlags, runCapsCommand } from './caps.js';
import { checkFrontierFlags, runFrontierCommand } from './frontier.js';

const TRACE_FORMATS = ['jsonl', 'bitbrains', 'alibaba-2018'] as const;

interface SimulateOptions {
  scenario?: string;
  trace?: string;
  traceFormat: (typeof TRACE_FORMATS)[number];
  machineMemory?: { text: string; bytes: number };
  traceWindow?: { text: string; from: number; to: number };
  policy?: string[];
  nodes?: number;
  hours?: number;
  warmupHours?: number;
  seed?: number;
  usageScale?: number;
  busier: number | false;
  demand: Demand;
  nodesNeeded?: boolean;
  frontier?: boolean;
  caps?: boolean;
  progress?: boolean;
  output: 'markdown' | 'json';
  out?: string;
}

const number = (min: number, integer = false) => (v: string) => {
  const n = Number(v);
  if (v.trim() === '' || !Number.isFinite(n) || n < min || (integer && !Number.isInteger(n))) throw new InvalidArgumentError(`${JSON.stringify(v)} is not ${integer ? 'an integer' : 'a number'} >= ${min}`);
  return n;
};

/** A Kubernetes quantity of bytes (64Gi), positive. */
function bytes(v: string): { text: string; bytes: number } {
  let b: bigint;
  try {
    b = parseBytes(v, 'memory');
  } catch (err) {
    throw new InvalidArgumentError((err as Error).message);
  }
  if (b <= 0n) throw new InvalidArgumentError(`${JSON.stringify(v)} is not a positive quantity of bytes (e.g. 64Gi)`);
  return { text: v, bytes: Number(b) };
}

/** FROM-TO in trace seconds; either may be negative (Alibaba's time_stamp can be before the trace's zero). */
function window(v: string): { text: string; from: number; to: number } {
  const m = /^\s*(-?\d+(?:\.\d+)?)\s*-\s*(-?\d+(?:\.\d+)?)\s*$/.exec(v);
  if (!m || !(Number(m[1]) < Number(m[2]))) throw new InvalidArgumentError(`${JSON.stringify(v)} is not FROM-TO in trace seconds with FROM before TO (e.g. 86400-172800)`);
  return { text: v, from: Number(m[1]), to: Number(m[2]) };
}

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
  return applyOverrides(s, { nodes: o.nodes, hours: o.hours, warmupHours: o.warmupHours, seed: o.seed, usageScale: o.usageScale });
}

/** The command line that gives this report, for the page to say how to regenerate it. */
function commandLine(o: SimulateOptions): string {
  const parts = ['oversell simulate'];
  if (o.scenario) parts.push(`--scenario ${o.scenario}`);
  if (o.trace) parts.push(`--trace ${o.trace}`);
  if (o.traceFormat !== 'jsonl') parts.push(`--trace-format ${o.traceFormat}`);
  if (o.machineMemory) parts.push(`--machine-memory ${o.machineMemory.text}`);
  if (o.traceWindow) parts.push(`--trace-window ${o.traceWindow.text}`);
  for (const p of o.policy ?? []) parts.push(`--policy ${p}`);
  if (o.nodes !== undefined) parts.push(`--nodes ${o.nodes}`);
  if (o.hours !== undefined) parts.push(`--hours ${o.hours}`);
  if (o.warmupHours !== undefined) parts.push(`--warmup-hours ${o.warmupHours}`);
  if (o.seed !== undefined) parts.push(`--seed ${o.seed}`);
  if (o.usageScale !== undefined) parts.push(`--usage-scale ${o.usageScale}`);
  if (o.demand !== 'scenario') parts.push(`--demand ${o.demand}`);
  if (o.nodesNeeded) parts.push('--nodes-needed');
  if (o.frontier) parts.push('--frontier');
  if (o.frontier) return parts.join(' ');
  if (o.caps) return [...parts, '--caps'].join(' ');
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

/** The flags a public trace needs and the ones it refuses, before any file is read. */
function checkTraceFlags(o: SimulateOptions): void {
  const alibaba = o.traceFormat === 'alibaba-2018';
  if (!o.trace && (o.traceFormat !== 'jsonl' || o.machineMemory || o.traceWindow)) throw new ScenarioError('--trace-format, --machine-memory and --trace-window describe a trace: give it with --trace PATH');
  if (alibaba && !o.machineMemory) {
    throw new ScenarioError('--trace-format alibaba-2018 needs --machine-memory: the trace gives memory normalized to 0-100, so give the bytes of a machine whose mem_size is 100 (e.g. --machine-memory 96Gi)');
  }
  if (!alibaba && o.machineMemory) throw new ScenarioError(`--machine-memory applies to --trace-format alibaba-2018 only: ${o.traceFormat === 'bitbrains' ? 'Bitbrains gives memory in KB' : 'a recording by oversell record gives memory in bytes'}`);
  if (!alibaba && o.traceWindow) throw new ScenarioError('--trace-window applies to --trace-format alibaba-2018 only (its usage files are too large to read whole)');
  if (o.traceFormat === 'jsonl') {
    if (o.trace && o.nodes !== undefined) throw new ScenarioError('--nodes and --trace: the recorded nodes are the cluster');
    if (o.trace && o.nodesNeeded) throw new ScenarioError('--nodes-needed and --trace: the recorded nodes are the cluster; run --nodes-needed on a scenario');
  }
  if (alibaba && o.nodes !== undefined) throw new ScenarioError('--nodes and --trace-format alibaba-2018: the trace\'s machines are the cluster');
}

async function publicWorkloadOf(o: SimulateOptions): Promise<PublicWorkload | undefined> {
  if (!o.trace || !isPublicTraceFormat(o.traceFormat)) return undefined;
  const options: PublicTraceOptions = {
    ...(o.machineMemory && { machineMemoryBytes: o.machineMemory.bytes }),
    ...(o.traceWindow && { window: { from: o.traceWindow.from, to: o.traceWindow.to } }),
  };
  return readPublicTrace(o.traceFormat, o.trace, options);
}

export async function runSimulate(o: SimulateOptions): Promise<void> {
  let scenario: Scenario;
  let trace: Trace | undefined;
  let pw: PublicWorkload | undefined;
  let replayed: PublicReplay | undefined;
  try {
    checkTraceFlags(o);
    checkFrontierFlags(o);
    checkCapsFlags(o);
    pw = await publicWorkloadOf(o);
    trace = o.trace && !pw ? traceOf(o.trace) : undefined;
    // A replay lasts as long as the recording unless --hours says otherwise.
    const recordedSeconds = pw ? pw.durationSeconds : trace ? traceSeconds(trace) : undefined;
    scenario = scenarioOf({ ...o, ...(recordedSeconds !== undefined && o.hours === undefined && { hours: Math.max(0.01, recordedSeconds / 3600) }) });
    replayed = pw && publicReplay(pw, scenario);
  } catch (err) {
    if (!(err instanceof ScenarioError) && !(err instanceof TraceFormatError)) throw err;
    process.stderr.write(`error: ${err.message}\n`);
    process.exit(2);
  }
  if (o.caps) {
    runCapsCommand({ scenario, demand: o.demand, output: o.output, out: o.out, command: commandLine(o) });
    return;
  }
  if (o.frontier) {
    runFrontierCommand({ scenario, demand: o.demand, output: o.output, out: o.out, progress: o.progress ?? true, command: commandLine(o) });
    return;
  }
  // Long runs say how far they are; a day of 100 nodes takes seconds and stays quiet.
  const long = o.progress ?? (trace?.polls[0]?.nodes.length ?? replayed?.shapes.length ?? scenario.nodes) >= 1000;
  const withBusier = o.busier !== false && scenario.usage.step === undefined;
  const onProgress = long ? progressLine() : undefined;
  const options = { demand: o.demand, nodesNeeded: o.nodesNeeded, publicTrace: replayed };
  const main = simulate(scenario, onProgress && ((p) => onProgress({ ...p, done: withBusier ? p.done / 2 : p.done })), trace, options);
  // The busier run asks only about harm: nodes needed are the main run's.
  const busierOf = (s: Scenario) => ({ scenario: s, publicTrace: pw && publicReplay(pw, s) });
  const b = withBusier ? busierOf(busierScenario(scenario, o.busier as number)) : undefined;
  const busier = b
    ? simulate(b.scenario, onProgress && ((p) => onProgress({ ...p, done: 0.5 + p.done / 2 })), trace, { demand: o.demand, publicTrace: b.publicTrace })
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
    .option('--trace <path>', 'replay a trace: by default a cluster recorded by `oversell record` (its nodes and their load, the scenario\'s pods on top); with --trace-format a public trace whose VMs or containers are the workload')
    .addOption(new Option('--trace-format <format>', 'jsonl: `oversell record`; bitbrains: a directory of GWA-T-12 VM files (or one file), onto --nodes nodes of the scenario\'s shape; alibaba-2018: a directory of cluster-trace-v2018 CSV files, onto its machines').choices([...TRACE_FORMATS]).default('jsonl'))
    .addOption(new Option('--machine-memory <quantity>', 'alibaba-2018 (required there): the memory of a machine whose normalized mem_size is 100, e.g. 96Gi').argParser(bytes))
    .addOption(new Option('--trace-window <from-to>', 'alibaba-2018: read only usage rows with FROM <= time_stamp < TO (trace seconds)').argParser(window))
    .option('--policy <file...>', 'OversellPolicy YAML to run as well (several, or several documents in one file)')
    .addOption(new Option('--nodes <n>', 'nodes in the cluster (default 100)').argParser(number(1, true)))
    .addOption(new Option('--hours <h>', 'simulated hours (default 24)').argParser(number(0.01)))
    .addOption(new Option('--warmup-hours <h>', 'hours run before them on the same daily curve and not measured, so policies that learn have a history (default 24; none with a trace)').argParser(number(0)))
    .addOption(new Option('--seed <s>', 'seed of the workload (default 1)').argParser(number(0, true)))
    .addOption(new Option('--usage-scale <f>', "multiply every pod's usage: a cluster busier than its requests suggest (default 1)").argParser(number(0)))
    .addOption(new Option('--busier <factor>', 'also run the scenario with usage times this from half-way through').argParser(number(0)).default(1.3))
    .option('--no-busier', 'skip that second run')
    .addOption(new Option('--demand <kind>', 'scenario: the daily curve and job arrivals; saturating: pods keep coming until nothing more fits').choices(['scenario', 'saturating']).default('scenario'))
    .option('--nodes-needed', 'also find, per policy, the fewest nodes for the scenario\'s demand with no pod waiting (a binary search: about 8 more runs per policy)')
    .option('--frontier', "sweep each family's knob instead (static ratio, Katalyst's targets, Koordinator's thresholds, Crane's reserve, the peak predictor's n and percentile, oversell's targets and caps; --policy files add oversell settings): who places most at each level of risk (docs/frontier.md)")
    .option('--caps', 'sweep the default policy\'s hard caps instead, on the scenario and on its over-provisioned variant (pods using 15 % of their requests), a day and a busier day each: what each cap costs and saves (docs/caps.md)')
    .option('--progress', 'report progress on stderr (the default from 1000 nodes on, and with --frontier)')
    .addOption(new Option('-o, --output <format>', 'markdown or json, on stdout').choices(['markdown', 'json']).default('markdown'))
    .option('--out <dir>', 'write outcome.md, outcome.json and the charts (outcome/*.svg) to this directory instead')
    .action(async (o: SimulateOptions) => runSimulate(o));
}
