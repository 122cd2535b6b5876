// The binaries under test as child processes on 127.0.0.1.
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import yaml from 'js-yaml';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { onLines, startProcess, type Child } from '../scripts/harness/processes.js';

export const REPO = fileURLToPath(new URL('../', import.meta.url));

export { freePort } from '../scripts/harness/wait.js';
import { freePort, waitUntil } from '../scripts/harness/wait.js';

export type { Child } from '../scripts/harness/processes.js';

export const log = (msg: string) => console.log(`${new Date().toISOString().slice(11, 19)}  ${msg}`);

/** A child in the repository's directory whose lines are echoed when asked; an exit nobody asked for is reported. */
export function startChild(name: string, file: string, args: string[], options: { echo?: boolean } = {}): Child {
  return startProcess(name, file, args, {
    cwd: REPO,
    ...(options.echo && { onLine: (line: string) => console.log(`  [${name}] ${line}`) }),
    onUnexpectedExit: (code, signal, output) => log(`!! ${name} exited (code ${code}, signal ${signal}):\n${output}`),
  });
}

export interface GatewayProcess extends Child {
  /** agent: where agents stream (the ingest thread's --agent-port); grpc: the query API. */
  ports: { webhook: number; grpc: number; metrics: number; agent: number };
  tlsDir: string;
}

type Workload = { spec?: { template?: { spec?: { containers?: Array<{ name?: string; command?: unknown; resources?: { limits?: { memory?: string } } }> } } } };
const deployedContainer = (container: 'gateway' | 'agent') =>
  (yaml.loadAll(readFileSync(join(REPO, `deploy/base/${container}.yaml`), 'utf8')) as Workload[]).flatMap((d) => d?.spec?.template?.spec?.containers ?? []).find((c) => c.name === container);

/**
 * The Node flags a container of deploy/base runs with: its command between the
 * node binary and the script (test/deploy/check.sh holds the Helm chart to the
 * same objects), so the benchmarks measure the binaries as deployed.
 */
export function deployedNodeFlags(container: 'gateway' | 'agent'): string[] {
  const command = deployedContainer(container)?.command;
  const script = `/app/dist/${container}/main.js`;
  if (!Array.isArray(command) || command.at(-1) !== script) {
    throw new Error(`deploy/base/${container}.yaml: the ${container}'s command is not [node, flags..., ${script}]: ${JSON.stringify(command)}`);
  }
  return command.slice(1, -1).map(String);
}

/** The container's memory limit as deploy/base ships it, in MiB. */
export function deployedMemoryLimitMiB(container: 'gateway' | 'agent'): number {
  const limit = deployedContainer(container)?.resources?.limits?.memory;
  const m = /^(\d+)(Mi|Gi)$/.exec(limit ?? '');
  if (!m) throw new Error(`deploy/base/${container}.yaml: the ${container}'s memory limit is ${limit ?? 'missing'}, not <n>Mi or <n>Gi`);
  return Number(m[1]) * (m[2] === 'Gi' ? 1024 : 1);
}

/** Node flags the gateway is deployed with. */
export const GATEWAY_NODE_ARGS = deployedNodeFlags('gateway');

/**
 * The real gateway binary on 127.0.0.1 (or `host`) as deployed (Node flags, agents on
 * the ingest thread), flags policy, self-managed TLS in a temp dir; resolves
 * when /readyz is 200. `echo` prints its log lines (warn and up) as they come.
 */
export async function startGateway(options: { args?: string[]; nodeArgs?: string[]; echo?: boolean; launcher?: (argv: string[]) => string[]; readyWithinMs?: number; host?: string; tlsDir?: string } = {}): Promise<GatewayProcess> {
  const host = options.host ?? '127.0.0.1';
  const ports = { webhook: await freePort(), grpc: await freePort(), metrics: await freePort(), agent: await freePort() };
  // Replicas given one tlsDir share its certificate and grant-signing key, as replicas in a cluster share their Secrets.
  const tlsDir = options.tlsDir ?? mkdtempSync(join(tmpdir(), 'oversell-bench-tls-'));
  const [file, ...args] = (options.launcher ?? ((argv) => argv))([process.execPath, ...GATEWAY_NODE_ARGS, ...(options.nodeArgs ?? []), join(REPO, 'dist/gateway/main.js'), '--bind-address', host,
    '--webhook-port', String(ports.webhook), '--grpc-port', String(ports.grpc), '--agent-port', String(ports.agent), '--metrics-port', String(ports.metrics),
    // No drain on stop (a gateway here is stopped by the benchmark, not rolled by a Deployment); bench/replicas.ts asks for one.
    '--tls-dir', tlsDir, '--tls-hosts', `localhost,${host}`, '--policies', 'flags', '--log-level', 'warn', '--shutdown-drain', '0s', ...(options.args ?? [])]);
  const child = startChild('gateway', file!, args, { echo: options.echo ?? true });
  await waitUntil('gateway /readyz', async () => ((await fetch(`http://${host}:${ports.metrics}/readyz`)).ok ? true : undefined), options.readyWithinMs ?? 20_000, 100);
  return {
    ...child,
    ports,
    tlsDir,
    stop: async () => {
      await child.stop();
      rmSync(tlsDir, { recursive: true, force: true });
    },
  };
}

/**
 * bench/sim-agents.ts as a child process: `count` agents named <prefix>-<i>
 * streaming one sample a second to address. `ready` resolves once every
 * stream is welcomed. stderr 'pipe' lets the caller read the stream errors.
 * nice: run at this scheduling niceness (see bench/ingest.ts for why).
 */
export function startSimAgents(address: string, count: number, prefix = 'sim', stderr: 'inherit' | 'pipe' = 'inherit', nice = 0): { child: ChildProcess; ready: Promise<void> } {
  const args = ['--max-old-space-size=4096', '--import', 'tsx', join(REPO, 'bench/sim-agents.ts'), address, String(count), prefix];
  const [command, argv] = nice ? ['nice', ['-n', String(nice), process.execPath, ...args]] : [process.execPath, args];
  const child = spawn(command, argv, { stdio: ['ignore', 'pipe', stderr] });
  const ready = new Promise<void>((resolve, reject) => {
    const t = setTimeout(() => reject(new Error(`${count} simulated agents not all welcomed within 120 s`)), 120_000);
    child.stdout?.on('data', (d: Buffer) => {
      if (/ready/.test(d.toString())) {
        clearTimeout(t);
        resolve();
      }
    });
  });
  return { child, ready };
}

/**
 * bench/grpc-floor.ts as a child process, with the gateway's Node flags:
 * GetNode answered with `status` (a few KB of JSON on its command line);
 * resolves with its port.
 */
export function startGrpcFloor(status: object): Promise<Child & { port: number }> {
  return startReference('grpc-floor', [JSON.stringify(status)]);
}

/**
 * bench/agent-stream-floor.ts as a child process, with the gateway's Node
 * flags: a bare AgentStream server on TLS (its certificate and ca.crt in
 * tlsDir); resolves with its port.
 */
export function startAgentStreamFloor(tlsDir: string): Promise<Child & { port: number }> {
  return startReference('agent-stream-floor', [tlsDir]);
}

/** A reference server bench/<name>.ts that prints `listening <port>` once it listens. */
async function startReference(name: string, args: string[]): Promise<Child & { port: number }> {
  const child = startChild(name, process.execPath, [...GATEWAY_NODE_ARGS, '--import', 'tsx', join(REPO, `bench/${name}.ts`), ...args]);
  const port = Number((await child.waitForLine(/^listening \d+$/, 30_000)).slice(10));
  return { ...child, port };
}

export interface CannonResult {
  latency: { p50: number; p90: number; p99: number; p99_9: number; max: number };
  /** Responses slower than 1 s, and the slowest ones with their time from the start (s). */
  over1s: number;
  /** The same, counting only responses after the first 30 s (connections set up, JIT warm). */
  over1sAfter30s: number;
  maxAfter30sMs: number;
  slowest: Array<{ atS: number; ms: number }>;
  requests: number;
  non2xx: number;
  errors: number;
  timeouts: number;
  /** The load generator's own CPU over its life. */
  millicores: number;
}

export interface RateCannon {
  child: ChildProcess;
  /** Resolves when the first requests go out. */
  started: Promise<void>;
  /** Cumulative counts, updated every 10 s. */
  seen(): { responses: number; non2xx: number; errors: number };
  result: Promise<CannonResult>;
}

/**
 * bench/rate-cannon.ts in its own process: `rate` reviews/s spread evenly over
 * each second for `seconds`, naming <prefix>-0 .. <prefix>-<nodes - 1> in turn.
 */
export function startRateCannon(url: string, rate: number, seconds: number, nodes: number, prefix: string): RateCannon {
  const child = spawn(process.execPath, ['--import', 'tsx', join(REPO, 'bench/rate-cannon.ts'), url, String(rate), String(seconds), String(nodes), prefix], {
    // The load generator trusts the gateway's self-signed certificate; nothing else does.
    env: { ...process.env, NODE_TLS_REJECT_UNAUTHORIZED: '0' },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  let seen = { responses: 0, non2xx: 0, errors: 0 };
  let markStarted = () => {};
  const started = new Promise<void>((resolve) => (markStarted = resolve));
  const result = new Promise<CannonResult>((resolve, reject) => {
    onLines(child.stdout, (line) => {
      if (line === 'started') markStarted();
      if (line.startsWith('progress ')) seen = JSON.parse(line.slice(9)) as typeof seen;
      if (line.startsWith('result ')) resolve(JSON.parse(line.slice(7)) as CannonResult);
    });
    child.once('exit', (code) => reject(new Error(`webhook load generator exited ${code} without a result`)));
  });
  return { child, started, seen: () => seen, result };
}
