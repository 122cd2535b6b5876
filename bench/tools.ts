// The load generators the benchmarks run in processes of their own, built
// once from the package registries into ~/.cache/oversell and reused: oha
// (Rust, crates.io) for the webhook, ghz (Go, the module proxy) for the query
// API. Neither is on npm. An environment variable can name a binary already
// built instead.
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { onLines } from '../scripts/harness/processes.js';

export interface Tool {
  name: string;
  version: string;
  /** What the benchmarks use it for, for the progress lines. */
  purpose: string;
  /** Names a binary to use instead of building one. */
  envOverride: string;
  /** Minutes the build takes on this 2-core machine, for the progress line. */
  minutes: number;
  /** The build: installs the binary as <root>/bin/<name>. */
  build(root: string): { command: string; args: string[]; env?: Record<string, string> };
  /** A line of the build's stderr that is one unit of progress (a crate, a package). */
  progress: RegExp;
  unit: string;
}

const building = new Map<string, Promise<string>>();

const toolRoot = (tool: Pick<Tool, 'name' | 'version'>) => join(homedir(), '.cache', 'oversell', `${tool.name}-${tool.version}`);

/** Path of the tool's binary; builds it on first use, once per process however many ask. */
export function ensureTool(tool: Tool): Promise<string> {
  const given = process.env[tool.envOverride];
  if (given) return Promise.resolve(given);
  const root = toolRoot(tool);
  const bin = join(root, 'bin', tool.name);
  if (existsSync(bin)) return Promise.resolve(bin);
  let pending = building.get(tool.name);
  if (!pending) {
    pending = build(tool, root).then(() => bin);
    building.set(tool.name, pending);
  }
  return pending;
}

function build(tool: Tool, root: string): Promise<void> {
  const { command, args, env } = tool.build(root);
  console.log(`  ${tool.name} ${tool.version} (${tool.purpose}) is not built yet: ${command} ${args[0]} into ${root}; once, about ${tool.minutes} minutes on 2 cores`);
  const started = Date.now();
  return new Promise<void>((resolve, reject) => {
    const child = spawn(command, args, { stdio: ['ignore', 'ignore', 'pipe'], env: { ...process.env, ...env } });
    let done = 0;
    let last = '';
    onLines(child.stderr, (line) => {
      last = line;
      if (tool.progress.test(line)) done += 1;
    });
    const progress = setInterval(() => console.log(`    building ${tool.name}: ${done} ${tool.unit} compiled, ${Math.round((Date.now() - started) / 1000)} s`), 30_000);
    child.once('error', (err) => {
      clearInterval(progress);
      reject(new Error(`cannot run ${command} (${err.message}) to build ${tool.name}: install it, or set ${tool.envOverride} to a ${tool.name} ${tool.version} binary`));
    });
    child.once('exit', (code) => {
      clearInterval(progress);
      if (code !== 0) return reject(new Error(`building ${tool.name} ${tool.version} failed (exit ${code}): ${last}; set ${tool.envOverride} to a ${tool.name} binary to skip the build`));
      console.log(`    ${tool.name} built in ${Math.round((Date.now() - started) / 1000)} s`);
      resolve();
    });
  });
}
