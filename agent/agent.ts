// The agent as a library: sample -> stream. main.ts only parses flags and calls startAgent,
// so tests run the same code against fixture roots and a real gateway.
import { randomUUID } from 'node:crypto';
import type { HostFacts__Output } from '../proto/gen/oversell/v1/HostFacts.js';
import type { Logger } from '../lib/log.js';
import type { PodSource } from './requests/pod-source.js';
import { PodReportSchedule } from './sample/pod-report-schedule.js';
import { NodeSampler } from './sample/sampler.js';
import { GatewaySet } from './stream/gateway-set.js';
import type { GatewayConnection } from './stream/gateway-connection.js';
import { AgentMetrics } from './metrics.js';
import { Lifecycle } from '../lib/lifecycle.js';
import { boundedHostFacts, boundedPods, POD_BOUNDS } from '../wire/agent-bounds.js';

export const AGENT_VERSION = '0.1.0';

export interface AgentOptions {
  nodeName: string;
  /** Gateway replicas to stream to; replace later with gateways.set() (discovery). */
  gatewayAddresses: string[];
  procRoot: string;
  cgroupRoot: string;
  /** The kubelet's root directory, for its CPU manager checkpoint; undefined: not read (the CPU manager is reported unknown). */
  kubeletRootDir?: string | undefined;
  intervalMs: number;
  /** Per-pod usage rides on every Nth sample. */
  podReportEvery: number;
  pods: PodSource;
  log: Logger;
  /** Host facts; tests pass fixed ones, main reads them through systeminformation. */
  host?: HostFacts__Output;
  backoffInitialMs?: number;
  backoffMaxMs?: number;
  /** TLS and token for the gateway streams; plain gRPC without it (local mode). */
  connection?: GatewayConnection;
}

export interface RunningAgent {
  readonly instanceId: string;
  readonly gateways: GatewaySet;
  readonly metrics: AgentMetrics;
  readonly sampler: NodeSampler;
  /** Takes one sample now (also what the timer does). */
  tick(): void;
  stop(): Promise<void>;
}

export function startAgent(options: AgentOptions): RunningAgent {
  const { log } = options;
  // What stop() closes, registered as each is built, closed last-built first.
  const life = new Lifecycle((part, err) => log.warn({ part, err: err.message }, 'an agent part did not close cleanly; closing the rest'));
  life.add({ name: 'pod source', close: () => options.pods.stop() });
  const sampler = new NodeSampler({ procRoot: options.procRoot, cgroupRoot: options.cgroupRoot, kubeletRoot: options.kubeletRootDir }).start();
  const instanceId = randomUUID();
  const layout = sampler.layout;
  const host: HostFacts__Output = options.host ?? {
    cpuModel: '',
    logicalCpus: 0,
    memoryTotalBytes: 0,
    os: '',
    kernel: '',
    cgroupMode: layout.mode,
    cgroupDriver: layout.driver ?? '',
  };
  life.add({ name: 'sampler', close: () => sampler.stop() });
  let intervalMs = options.intervalMs;
  // A gateway shedding load may ask for fewer samples (Settings.min_sample_interval_ms): the timer runs at the longer of the two.
  let minIntervalMs = 0;
  const effectiveIntervalMs = () => Math.max(intervalMs, minIntervalMs);
  const podReports = new PodReportSchedule(options.podReportEvery);
  let timer: NodeJS.Timeout | undefined;
  let seq = 0;
  let lastError = '';
  let saidTrimmed = false;
  let saidCpuManager = '';

  const gateways = GatewaySet.withOptions({
    // Within what the gateway takes of a hello (wire/agent-bounds.ts): a longer CPU model or OS name is cut.
    hello: { nodeName: options.nodeName, instanceId, agentVersion: AGENT_VERSION, host: boundedHostFacts(host), readsSummaryAckEvery: true },
    log,
    ...(options.backoffInitialMs !== undefined && { backoffInitialMs: options.backoffInitialMs }),
    ...(options.backoffMaxMs !== undefined && { backoffMaxMs: options.backoffMaxMs }),
    ...(options.connection && { connection: options.connection }),
    silenceTimeoutMs: Math.max(30_000, intervalMs * 10),
    onSettings: (s) => {
      const before = effectiveIntervalMs();
      if (s.sampleIntervalMs > 0 && s.sampleIntervalMs !== intervalMs) {
        log.info({ from: intervalMs, to: s.sampleIntervalMs }, 'gateway changed the sampling interval');
        intervalMs = s.sampleIntervalMs;
      }
      if (s.minSampleIntervalMs !== minIntervalMs) {
        log.info({ minIntervalMs: s.minSampleIntervalMs, intervalMs }, s.minSampleIntervalMs > 0 ? 'gateway is shedding load: sampling less often until it says otherwise' : 'gateway no longer sheds samples: sampling at the agent\'s own interval');
        minIntervalMs = s.minSampleIntervalMs;
      }
      // A pod report goes at once: with summaries, one no more often than the agent sends, or the reports alone would set its pace.
      const everyOwn = s.podReportEvery > 0 ? s.podReportEvery : options.podReportEvery;
      podReports.every = Math.max(1, everyOwn, s.summaryPlans.length > 0 ? Math.ceil(s.sendEveryMs / effectiveIntervalMs()) : 1);
      if (effectiveIntervalMs() !== before) schedule();
      gateways.shardCopies(s.shardCopies);
    },
  }, log);
  life.add({ name: 'gateway streams', close: () => gateways.stop() });

  const metrics = new AgentMetrics(() => gateways);
  const tick = () => {
    const end = metrics.samplingDuration.startTimer();
    try {
      const next = seq + 1;
      const reading = sampler.read(Date.now(), (memory) => podReports.due(next, memory));
      if (reading.podsIncluded) podReports.reported(reading.memoryWorkingSetBytes);
      end();
      seq = next;
      // The gateway refuses a sample with more pods or containers than any node has (wire/agent-bounds.ts): past them, some are left out.
      const { pods, dropped } = boundedPods(reading.pods);
      if ((dropped.pods > 0 || dropped.containers > 0) && !saidTrimmed) {
        saidTrimmed = true;
        log.warn({ pods: reading.pods.length, droppedPods: dropped.pods, droppedContainers: dropped.containers, bounds: POD_BOUNDS }, 'more pod or container cgroups than a sample may carry: the pod report leaves some out (said once)');
      }
      gateways.push({ ...reading, pods, seq, requests: options.pods.requests() });
      sayCpuManager();
      metrics.samples.inc({ result: 'ok' });
      lastError = '';
    } catch (err) {
      metrics.samples.inc({ result: 'error' });
      // Said once per distinct failure, not once a second.
      const message = (err as Error).message;
      if (message !== lastError) log.error({ err: message }, 'sampling failed; will retry on the next tick');
      lastError = message;
    }
  };

  /** Said when what the agent makes of the CPU manager checkpoint changes, not every second. */
  function sayCpuManager() {
    const { reading, path } = sampler.cpuManager;
    if (path === undefined) return;
    const said = JSON.stringify(reading);
    if (said === saidCpuManager) return;
    saidCpuManager = said;
    if (reading.policy === 'unknown') log.info({ path, why: reading.why }, 'CPU manager unknown: CPU is inflated as on any node (docs/who-pays.md, "Static CPU manager")');
    else log.info({ path, ...reading }, reading.policy === 'static' ? 'static CPU manager: exclusive CPUs are reported and not inflated' : 'CPU manager policy none');
  }

  function schedule() {
    clearInterval(timer);
    timer = setInterval(tick, effectiveIntervalMs());
  }

  log.info(
    { node: options.nodeName, gateways: options.gatewayAddresses, cgroup: layout.mode, driver: layout.driver ?? 'none', intervalMs, instanceId },
    'agent started',
  );
  gateways.set(options.gatewayAddresses);
  schedule();
  life.add({ name: 'sampling timer', close: () => clearInterval(timer) });

  return {
    instanceId,
    gateways,
    metrics,
    sampler,
    tick,
    stop: () => life.close(),
  };
}
