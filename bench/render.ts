// docs/benchmarks.md from the saved results in bench/results/*.json, without
// measuring anything: `npm run bench` calls it after a run, and
// `node --import tsx bench/render.ts` rewrites the page from the files alone
// (--check: exit 1 if the committed page is not what they give; --print: to
// stdout; --repo DIR: another tree's results and page).
// The page holds the tables and what they measure; how the figures came to be
// goes to docs/performance-log.md, which nothing here writes.
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { capacityMarkdown } from './capacity.js';
import type { BenchResult } from './result.js';

export const REPO = fileURLToPath(new URL('../', import.meta.url));

/** The order of docs/benchmarks.md. */
export const ALL = ['cluster', 'replicas', 'replicas-sharded', 'peer-inputs', 'webhook', 'ingest', 'message-cost', 'scaling', 'metrics-api', 'agent-real-node', 'agent-overhead', 'freshness', 'pressure-to-node'] as const;

type Saved = BenchResult & { date: string; machine: Record<string, string | number> };

const HEADER = `# Benchmarks

Written by \`npm run bench\` from \`bench/results/*.json\`; every figure below was
measured by that command on the machine named in its section. Targets come
from issue 7; a missed target is reported as missed, not hidden. This machine
is shared (2 cores: the load generator, the system under test and anything
else running compete), so absolute latencies are pessimistic; the JSON files
keep every figure.

Run: \`npm run bench\` (about 40 minutes; the first run on a machine also builds
the load generators ghz and bench/loadgen (Go module proxy) and oha
(crates.io) while agent-overhead runs, and caches them in ~/.cache/oversell;
pressure-to-node and cluster bring the local control plane up when it is not
running, and cluster needs root for the gateway's cgroup; agent-real-node
brings it up with the real node, installs its Debian packages and builds the
image, and needs root),
\`BENCH_ONLY=webhook npm run bench\`, or one file alone:
\`node --import tsx bench/webhook.ts\`. Only a full \`npm run bench\` replaces
these results, or a subset with \`BENCH_PUBLISH=1\` its own sections (each
section says when it was measured): a subset without it, a single file or
\`BENCH_QUICK=1\` saves to \`.oversell/bench/\` (or \`OVERSELL_BENCH_SCRATCH\`)
and leaves this page alone.
\`node --import tsx bench/render.ts\` rewrites this page from the saved results
without measuring. The 10-minute
soak (5,000 agents plus 500 webhook requests/s: errors, latency, memory
growth) is not part of this run: \`npm run soak\`, results in
docs/reliability.md.

What was changed to reach these figures, measured before and after, and what
was tried and not kept: [performance-log.md](performance-log.md).
`;

function section(name: string, r: Saved | undefined): string {
  if (!r) return `## ${name}\n\nNot run yet.\n`;
  const lines = [`## ${name}`, '', r.summary, '', `Measured ${r.date.slice(0, 16).replace('T', ' ')} UTC on ${r.machine.cores} × ${r.machine.cpu}, ${r.machine.memoryGiB} GiB, kernel ${r.machine.kernel}, Node.js ${r.machine.node}.`, ''];
  lines.push('| target | measured | |', '|---|---|---|', ...r.targets.map((t) => `| ${t.name} | ${t.measured} | ${t.met ? 'met' : '**missed**'} |`), '');
  lines.push('| figure | value |', '|---|---|', ...Object.entries(r.figures).map(([k, v]) => `| ${k} | ${v} |`), '');
  if (r.reference) lines.push('Reference measured in the same run:', '', '| figure | value |', '|---|---|', ...Object.entries(r.reference).map(([k, v]) => `| ${k} | ${v} |`), '');
  if (r.notes?.length) lines.push(...r.notes.map((n) => `- ${n}`), '');
  return lines.join('\n');
}

/** The page for the results saved under repo/bench/results (each benchmark's newest run). */
export function renderBenchmarks(repo = REPO): string {
  const saved = ALL.map((name) => {
    const file = join(repo, 'bench/results', `${name}.json`);
    return existsSync(file) ? (JSON.parse(readFileSync(file, 'utf8')) as Saved) : undefined;
  });
  // The machine of the newest result: after a full run, the machine of that run.
  const present = saved.filter((r) => r !== undefined);
  const m = [...present].sort((a, b) => b.date.localeCompare(a.date))[0]?.machine;
  const cpus = new Set(present.map((r) => `${r.machine.cores} × ${r.machine.cpu}`));
  // A section published alone may come from another machine than the rest: each section names its own then.
  const machineLine = !m ? 'No benchmark has been run yet.\n'
    : cpus.size > 1 ? `Machines of these runs: ${[...cpus].join('; ')} (each section names its own; the newest: ${m.cores} × ${m.cpu}, ${m.memoryGiB} GiB, kernel ${m.kernel}, Node.js ${m.node}).\n`
    : `Machine of this run: ${m.cores} × ${m.cpu}, ${m.memoryGiB} GiB, kernel ${m.kernel}, Node.js ${m.node}.\n`;
  const of = (name: (typeof ALL)[number]) => saved[ALL.indexOf(name)];
  return [HEADER + '\n' + machineLine, ...ALL.map((name, i) => section(name, saved[i])), capacityMarkdown(of('ingest'), of('webhook'), of('cluster'), of('replicas'), of('replicas-sharded'), of('peer-inputs'))].join('\n') + '\n';
}

export function writeBenchmarks(repo = REPO): string {
  const file = join(repo, 'docs/benchmarks.md');
  writeFileSync(file, renderBenchmarks(repo));
  return file;
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const args = process.argv.slice(2);
  const at = args.indexOf('--repo');
  const repo = at >= 0 ? args[at + 1] : REPO;
  if (!repo) throw new Error('--repo needs a directory');
  if (args.includes('--print')) {
    process.stdout.write(renderBenchmarks(repo));
  } else if (args.includes('--check')) {
    const file = join(repo, 'docs/benchmarks.md');
    if (!existsSync(file) || readFileSync(file, 'utf8') !== renderBenchmarks(repo)) {
      console.error(`${file} is not what bench/results/*.json give: node --import tsx bench/render.ts`);
      process.exit(1);
    }
  } else {
    console.log(`wrote ${writeBenchmarks(repo)}`);
  }
}
