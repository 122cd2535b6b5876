// What the agent process itself costs the node, read only when scraped. These
// replace prom-client's default collectors, whose event-loop-delay monitor
// wakes the loop every 10 ms: an agent must not wake for its own metrics.
import { readdirSync } from 'node:fs';
import { CounterFunc, Gauge, type Registry } from './prometheus-text.js';

const startTimeSeconds = Math.round(Date.now() / 1000 - process.uptime());

/** Registers the process_* and nodejs_* series under prefix (e.g. oversell_agent_). */
export function registerProcessMetrics(registry: Registry, prefix: string): void {
  const cpu = (pick: (u: NodeJS.CpuUsage) => number) => () => pick(process.cpuUsage()) / 1e6;
  registry.register(new CounterFunc(`${prefix}process_cpu_user_seconds_total`, 'Total user CPU time spent in seconds.', cpu((u) => u.user)));
  registry.register(new CounterFunc(`${prefix}process_cpu_system_seconds_total`, 'Total system CPU time spent in seconds.', cpu((u) => u.system)));
  registry.register(new CounterFunc(`${prefix}process_cpu_seconds_total`, 'Total user and system CPU time spent in seconds.', cpu((u) => u.user + u.system)));
  registry.register(new Gauge(`${prefix}process_start_time_seconds`, 'Start time of the process since unix epoch in seconds.', () => startTimeSeconds));
  registry.register(new Gauge(`${prefix}process_resident_memory_bytes`, 'Resident memory size in bytes.', () => process.memoryUsage.rss()));
  registry.register(new Gauge(`${prefix}process_open_fds`, 'Number of open file descriptors.', openFds));
  registry.register(new Gauge(`${prefix}nodejs_heap_size_total_bytes`, 'Process heap size from Node.js in bytes.', () => process.memoryUsage().heapTotal));
  registry.register(new Gauge(`${prefix}nodejs_heap_size_used_bytes`, 'Process heap size used from Node.js in bytes.', () => process.memoryUsage().heapUsed));
  registry.register(new Gauge(`${prefix}nodejs_external_memory_bytes`, 'Node.js external memory size in bytes.', () => process.memoryUsage().external));

  let lagSeconds = 0;
  registry.register(new Gauge(`${prefix}nodejs_eventloop_lag_seconds`, 'Lag of event loop in seconds, measured at this scrape.', () => lagSeconds));
  // How long a callback queued now waits for the loop: measured once per scrape
  // instead of sampling the loop all the time.
  registry.beforeScrape(
    () =>
      new Promise<void>((resolve) => {
        const start = process.hrtime.bigint();
        setImmediate(() => {
          lagSeconds = Number(process.hrtime.bigint() - start) / 1e9;
          resolve();
        });
      }),
  );
}

function openFds(): number {
  try {
    return readdirSync('/proc/self/fd').length;
  } catch {
    return NaN; // not Linux
  }
}
