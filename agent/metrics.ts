// The agent's own Prometheus series on a small plain-HTTP port: what it costs
// the node (sampling time, event-loop lag, process CPU and memory) and how its
// streams fare.
import { createServer, type Server } from 'node:http';
import { Counter, CounterFunc, Gauge, Histogram, Registry } from './prometheus-text.js';
import { registerProcessMetrics } from './process-metrics.js';
import type { GatewaySet } from './stream/gateway-set.js';

export class AgentMetrics {
  readonly registry = new Registry();
  readonly samplingDuration: Histogram;
  readonly samples: Counter<'result'>;

  constructor(gateways: () => GatewaySet | undefined) {
    const r = this.registry;
    this.samplingDuration = r.register(new Histogram({
      name: 'oversell_agent_sampling_duration_seconds',
      help: 'Time to read /proc, PSI and the pod cgroups for one sample.',
      buckets: [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1],
    }));
    this.samples = r.register(new Counter({
      name: 'oversell_agent_samples_total',
      help: 'Samples taken, by result (ok, error).',
      labelNames: ['result'],
      initial: [{ result: 'ok' }, { result: 'error' }],
    }));
    // The streams each count their own reconnects and a closed stream takes its
    // count with it, so the sum can drop: add up only its rises.
    let total = 0;
    let last = 0;
    r.register(new CounterFunc('oversell_agent_stream_reconnects_total', 'Reconnects of the gateway streams since the agent started.', () => {
      const now = gateways()?.reconnects ?? last;
      if (now > last) total += now - last;
      last = now;
      return total;
    }));
    r.register(new Gauge('oversell_agent_gateways_connected', 'Gateway replicas this agent is streaming to live.', () => {
      const set = gateways();
      return set ? set.addresses.filter((a) => set.stream(a)?.live).length : 0;
    }));
    registerProcessMetrics(r, 'oversell_agent_');
  }

  /**
   * /metrics and /healthz on host:port; host '' is every interface, IPv6 and
   * IPv4 (Node's default for no host). Resolves to the bound host and port.
   */
  listen(host: string, port: number): Promise<{ host: string; port: number; server: Server }> {
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
      const bound = () => {
        const a = server.address();
        resolve({ host: typeof a === 'object' && a ? a.address : host, port: typeof a === 'object' && a ? a.port : port, server });
      };
      if (host) server.listen(port, host, bound);
      else server.listen(port, bound);
    });
  }
}
