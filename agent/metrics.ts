// The agent's own Prometheus series on a small plain-HTTP port: what it costs
// the node (sampling time, event-loop lag, process CPU and memory from the
// default collectors) and how its streams fare.
import { createServer, type Server } from 'node:http';
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import type { GatewaySet } from './stream/gateway-set.js';

export class AgentMetrics {
  readonly registry = new Registry();
  readonly samplingDuration: Histogram;
  readonly samples: Counter<'result'>;

  constructor(gateways: () => GatewaySet | undefined) {
    const registers = [this.registry];
    // Includes nodejs_eventloop_lag_seconds, process_cpu_seconds_total, process_resident_memory_bytes.
    collectDefaultMetrics({ register: this.registry, prefix: 'oversell_agent_' });
    this.samplingDuration = new Histogram({
      name: 'oversell_agent_sampling_duration_seconds',
      help: 'Time to read /proc, PSI and the pod cgroups for one sample.',
      buckets: [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1],
      registers,
    });
    this.samples = new Counter({
      name: 'oversell_agent_samples_total',
      help: 'Samples taken, by result (ok, error).',
      labelNames: ['result'],
      registers,
    });
    let counted = 0;
    new Counter({
      name: 'oversell_agent_stream_reconnects_total',
      help: 'Reconnects of the gateway streams since the agent started.',
      registers,
      collect() {
        const now = gateways()?.reconnects ?? counted;
        if (now > counted) this.inc(now - counted);
        counted = now;
      },
    });
    new Gauge({
      name: 'oversell_agent_gateways_connected',
      help: 'Gateway replicas this agent is streaming to live.',
      registers,
      collect() {
        const set = gateways();
        this.set(set ? set.addresses.filter((a) => set.stream(a)?.live).length : 0);
      },
    });
  }

  /** /metrics and /healthz on host:port; resolves to the bound port. */
  listen(host: string, port: number): Promise<{ port: number; server: Server }> {
    const server = createServer((req, res) => {
      if (req.url === '/healthz') {
        res.end('ok');
        return;
      }
      if (req.url !== '/metrics') {
        res.statusCode = 404;
        res.end('not found: try /metrics or /healthz\n');
        return;
      }
      this.registry.metrics().then(
        (text) => {
          res.setHeader('content-type', this.registry.contentType);
          res.end(text);
        },
        (err: unknown) => {
          res.statusCode = 500;
          res.end(String(err));
        },
      );
    });
    return new Promise((resolve, reject) => {
      server.once('error', reject);
      server.listen(port, host, () => {
        const a = server.address();
        resolve({ port: typeof a === 'object' && a ? a.port : port, server });
      });
    });
  }
}
