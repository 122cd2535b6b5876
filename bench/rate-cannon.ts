// Kubelet-shaped webhook load at a fixed rate for the soak (the benchmark
// uses oha, bench/oha.ts, for latency), in its own process so its CPU is not
// the gateway's: autocannon at a fixed overall rate over HTTPS keep-alive,
// each request a nodes/status review for the next of <nodes> nodes named
// <prefix>-<i> (the simulated agents' names, so every review is a real
// decision): 5,000 nodes at 500 requests/s is each node's status every 10 s,
// the kubelet's default nodeStatusUpdateFrequency.
//   node --import tsx bench/rate-cannon.ts <url> <rate> <seconds> <nodes> [prefix]
// Prints "started", "progress <json>" every 10 s (cumulative responses,
// non-2xx, errors) and "result <json>" at the end (latency percentiles in ms,
// autocannon's failure counts, this process's own CPU).
import { createRequire } from 'node:module';
import { percentile, round } from './result.js';
import { reviewBody } from './webhook.js';

interface Result {
  non2xx: number;
  errors: number;
  timeouts: number;
}
interface Instance {
  on(event: 'response', fn: (client: unknown, statusCode: number, resBytes: number, responseTime: number) => void): void;
  on(event: 'reqError', fn: (err: Error) => void): void;
  on(event: 'done', fn: (r: Result) => void): void;
}
type Autocannon = (opts: Record<string, unknown>) => Instance;
const autocannon = createRequire(import.meta.url)('autocannon') as Autocannon;

const [url = '', rateText = '500', secondsText = '60', nodesText = '5000', prefix = 'sim'] = process.argv.slice(2);
const rate = Number(rateText);
const nodes = Number(nodesText);
// One 36 KB template, the node name spliced in per request: 5,000 distinct bodies without holding 180 MB.
const PLACEHOLDER = 'soak-node-name-placeholder';
const parts = reviewBody(PLACEHOLDER).split(PLACEHOLDER);
let next = 0;
const cpuMillicores = () => {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1000 / process.uptime();
};

// autocannon's rate limit lets each connection send its quota back to back at
// the start of every second, all connections on the same tick: one instance
// at 500/s is a burst of 500 reviews each second, not kubelets spread over
// their period. Ten instances started 100 ms apart spread the quota over the
// second. Latency is recorded here from every response (autocannon's own
// histogram, with a rate, adds coordinated-omission fill at a 1 ms interval).
const INSTANCES = 10;
const CONNECTIONS = 12;
const latencies: number[] = [];
const began = Date.now();
const slow: Array<{ atS: number; ms: number }> = [];
const seen = { responses: 0, non2xx: 0, errors: 0 };
const results: Result[] = [];
const done = () => {
  clearInterval(progress);
  const sorted = latencies.sort((a, b) => a - b);
  const sum = (k: keyof Result) => results.reduce((n, r) => n + r[k], 0);
  const latency = Object.fromEntries(Object.entries({ p50: 50, p90: 90, p99: 99, p99_9: 99.9, max: 100 }).map(([k, p]) => [k, round(percentile(sorted, p), 2)]));
  const steady = slow.filter((x) => x.atS > 30);
  process.stdout.write(`result ${JSON.stringify({ latency, over1s: slow.length, over1sAfter30s: steady.length, maxAfter30sMs: Math.max(0, ...steady.map((x) => x.ms)), slowest: slow.sort((a, b) => b.ms - a.ms).slice(0, 5), requests: seen.responses, non2xx: sum('non2xx'), errors: sum('errors'), timeouts: sum('timeouts'), millicores: Math.round(cpuMillicores()) })}\n`);
  process.exit(0);
};
for (let i = 0; i < INSTANCES; i++) {
  setTimeout(() => {
    const instance = autocannon({
      url,
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      // Kubelets do not wait for each other: enough connections that a slow
      // answer does not hold the rate back (a closed loop would hide latency).
      connections: CONNECTIONS,
      overallRate: rate / INSTANCES,
      duration: Number(secondsText),
      requests: [{ setupRequest: (req: Record<string, unknown>) => ({ ...req, body: parts.join(`${prefix}-${next++ % nodes}`) }) }],
    });
    instance.on('response', (_client, statusCode, _bytes, responseTime) => {
      seen.responses += 1;
      latencies.push(responseTime);
      // When the slow ones happened says more than how many: start-up, GC, or steady.
      if (responseTime > 1000) slow.push({ atS: Math.round((Date.now() - began) / 100) / 10, ms: Math.round(responseTime) });
      if (statusCode < 200 || statusCode > 299) seen.non2xx += 1;
    });
    instance.on('reqError', (err) => {
      seen.errors += 1;
      if (seen.errors <= 5) process.stderr.write(`webhook request error: ${err.message}\n`);
    });
    instance.on('done', (r) => {
      results.push(r);
      if (results.length === INSTANCES) done();
    });
  }, (i * 1000) / INSTANCES);
}
process.stdout.write('started\n');
const progress = setInterval(() => process.stdout.write(`progress ${JSON.stringify(seen)}\n`), 10_000);
