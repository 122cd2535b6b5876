// oha (https://github.com/hatoo/oha), the webhook benchmark's load generator:
// an open model. With -q it sends at evenly spaced times whether or not
// earlier answers came back, and with --latency-correction it measures each
// request from when it was due, so a stalled gateway shows in the tail
// instead of slowing the generator down (coordinated omission). autocannon's
// rate is a per-connection quota each second, which sends bursts; and oha,
// in Rust, costs this 2-core machine a fraction of what a Node generator does.
// Not on npm: built once from crates.io with cargo into ~/.cache/oversell.
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { ensureTool, type Tool } from './tools.js';

export const OHA_VERSION = '1.16.0';

const OHA: Tool = {
  name: 'oha',
  version: OHA_VERSION,
  purpose: 'webhook load generator',
  envOverride: 'OVERSELL_OHA',
  minutes: 6,
  build: (root) => {
    const cargo = [join(homedir(), '.cargo', 'bin', 'cargo')].find((c) => existsSync(c)) ?? 'cargo';
    return { command: cargo, args: ['install', 'oha', '--version', OHA_VERSION, '--locked', '--root', root] };
  },
  progress: /^\s*Compiling /,
  unit: 'crates',
};

/** Path of the oha binary; builds it on first use (OVERSELL_OHA names one already built). */
export const ensureOha = () => ensureTool(OHA);

export interface OhaResult {
  /** Milliseconds. */
  p50: number;
  p99: number;
  p99_9: number;
  reqPerS: number;
  total: number;
  /** Non-2xx answers plus transport errors (refused, reset, timed out). */
  failed: number;
  /** What the failures were: status codes and oha's error messages, with counts. */
  failures: Record<string, number>;
  /** oha's own CPU over the run, millicores. */
  generatorMillicores: number;
}

interface OhaJson {
  summary: { requestsPerSec: number; total: number };
  latencyPercentiles: Record<string, number | null>;
  statusCodeDistribution: Record<string, number>;
  errorDistribution: Record<string, number>;
}

/**
 * POSTs bodyFile to url over HTTPS keep-alive (self-signed certificate
 * accepted) with oha's own arguments (-c, -q, -z ...); JSON result.
 */
export function oha(bin: string, url: string, bodyFile: string, args: string[]): Promise<OhaResult> {
  // -w: requests in flight at the deadline finish and count; without it oha reports each as an error.
  const ohaArgs = ['--no-tui', '-w', '--insecure', '--output-format', 'json', '-m', 'POST', '-H', 'content-type: application/json', '-D', bodyFile, ...args, url];
  // bash's `times` prints its children's user and system CPU: oha's own cost, exactly.
  return new Promise((resolve, reject) =>
    execFile('bash', ['-c', '"$@"; rc=$?; times >&2; exit $rc', 'oha', bin, ...ohaArgs], { maxBuffer: 64 * 1024 * 1024 }, (err, stdout, stderr) => {
      if (err) return reject(new Error(`oha ${args.join(' ')} failed: ${err.message}`));
      const r = JSON.parse(stdout) as OhaJson;
      const ms = (k: string) => Math.round((r.latencyPercentiles[k] ?? NaN) * 1e5) / 100;
      const statuses = Object.entries(r.statusCodeDistribution);
      const ok = statuses.filter(([code]) => code.startsWith('2')).reduce((n, [, c]) => n + c, 0);
      const answered = statuses.reduce((n, [, c]) => n + c, 0);
      const errors = Object.values(r.errorDistribution).reduce((n, c) => n + c, 0);
      resolve({
        p50: ms('p50'), p99: ms('p99'), p99_9: ms('p99.9'),
        reqPerS: r.summary.requestsPerSec, total: answered, failed: answered - ok + errors,
        failures: { ...Object.fromEntries(statuses.filter(([code]) => !code.startsWith('2'))), ...r.errorDistribution },
        generatorMillicores: Math.round((childCpuSeconds(stderr) * 1000) / r.summary.total),
      });
    }));
}

/** The children line of bash's `times` ("0m1.230s 0m0.410s"): user + system seconds. */
function childCpuSeconds(timesOutput: string): number {
  const line = timesOutput.trim().split('\n').at(-1) ?? '';
  return [...line.matchAll(/(\d+)m([\d.]+)s/g)].reduce((s, m) => s + Number(m[1]) * 60 + Number(m[2]), 0);
}
