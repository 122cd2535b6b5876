// ghz (https://ghz.sh), the query API benchmark's load generator: a Go gRPC
// client in a process of its own, so a GetNode's time is the gateway's and
// the loopback's, not a Node client's own pauses (a grpc-js client measured
// p99 5.8 ms where ghz measured 1.1 ms against the same idle gateway).
// Built once from the Go module proxy into ~/.cache/oversell.
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { REPO } from './processes.js';
import { ensureTool, type Tool } from './tools.js';

// The newest version the module proxy serves here.
export const GHZ_VERSION = '0.93.0';

const GHZ: Tool = {
  name: 'ghz',
  version: GHZ_VERSION,
  purpose: 'query API load generator',
  envOverride: 'OVERSELL_GHZ',
  minutes: 2,
  build: (root) => ({ command: 'go', args: ['install', '-v', `github.com/bojand/ghz/cmd/ghz@v${GHZ_VERSION}`], env: { GOBIN: join(root, 'bin') } }),
  // go install -v names each package as it builds it.
  progress: /^[\w.-]+(\/[\w.@-]+)+$/,
  unit: 'packages',
};

/** Path of the ghz binary; builds it on first use (OVERSELL_GHZ names one already built). */
export const ensureGhz = () => ensureTool(GHZ);

interface GhzJson {
  details: Array<{ latency: number; status: string; error: string }>;
}

/**
 * `calls` GetNode calls back to back (one connection, one in flight) on
 * random nodes <prefix>-0 .. <prefix>-<nodes - 1>, after `warmup` untimed
 * ones; milliseconds per timed call, in call order. With `rps`, paced at that
 * rate instead of back to back (still one in flight).
 */
export function ghzGetNode(bin: string, address: string, nodes: number, calls: number, warmup: number, options: { prefix?: string; rps?: number } = {}): Promise<number[]> {
  const prefix = options.prefix ?? 'sim';
  const args = [
    '--insecure', '--proto', join(REPO, 'proto/oversell/v1/oversell.proto'), '--import-paths', join(REPO, 'proto'),
    '--call', 'oversell.v1.NodeUsage.GetNode', '-d', `{"name":"${prefix}-{{randomInt 0 ${nodes}}}"}`,
    // One Go thread: its scheduler and collector take no second core from the gateway.
    '-c', '1', '--cpus', '1', ...(options.rps ? ['--rps', String(options.rps)] : []), '-n', String(calls + warmup), '--skipFirst', String(warmup), '--format', 'json', address,
  ];
  return new Promise((resolve, reject) =>
    execFile(bin, args, { maxBuffer: 64 * 1024 * 1024 }, (err, stdout) => {
      if (err) return reject(new Error(`ghz GetNode failed: ${err.message}`));
      const { details } = JSON.parse(stdout) as GhzJson;
      const failed = details.filter((d) => d.status !== 'OK');
      if (failed.length > 0) return reject(new Error(`ghz: ${failed.length} of ${details.length} GetNode calls failed, first: ${failed[0]?.status} ${failed[0]?.error}`));
      resolve(details.map((d) => d.latency / 1e6));
    }));
}
