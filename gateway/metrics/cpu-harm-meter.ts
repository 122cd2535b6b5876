// CPU harm measured, from what the agents sample: per pool, the node-seconds
// with CPU demand over the node's CPUs (the agent's contention line, which
// leaves out a pod held at its own limit), the time the node's tasks stalled
// outright (PSI full, CPU and memory), and per pool and tier the CFS throttled
// time of its pods. The first is what the policy's CPU risk budget
// (cpu.riskBudget.overShare of node-time) promises to keep small: every
// replica weighs it in its pool-harm ledger (each decides, so each must see
// the same), and past the budget's burn rate the pool's CPU grants stop at the
// floor (decide/policy.ts). The metrics are counted once, by the replica that
// acts for the node (the leader; sharded, its first owner).
import { CPU_OVER_CAPACITY_CONTENTION, type PoolHarmLedger } from '../decide/pool-harm.js';
import type { GatewayMetrics } from './metrics.js';
import { podTier, type NamespaceLabels } from '../policies/namespace-labels.js';
import type { Policy } from '../decide/policy.js';
import type { NodeRecord } from '../store/node-store.js';
import type { PodFactsStore } from '../store/pod-facts.js';

/** A gap between two samples longer than this is not counted (an agent away, a gateway restart): nothing is known of it. */
const MAX_GAP_MS = 30_000;

export interface CpuHarmMeterOptions {
  pods: Pick<PodFactsStore, 'on'>;
  namespaceLabels: NamespaceLabels;
  metrics: Pick<GatewayMetrics, 'cpuHarm' | 'cpuThrottled'>;
  /** Whether this replica acts for the node: it counts the metrics. */
  actsFor: (node: string) => boolean;
  /** Where CPU over capacity is weighed against the pool's budget; every replica keeps its own. */
  ledger?: PoolHarmLedger;
  now?: () => number;
}

interface Seen {
  atMs: number;
  podsAtMs: number;
  /** Pod uid -> its cumulative throttled microseconds at the last report. */
  throttled: Map<string, number>;
}

export class CpuHarmMeter {
  readonly #o: CpuHarmMeterOptions;
  readonly #seen = new Map<string, Seen>();

  constructor(o: CpuHarmMeterOptions) {
    this.#o = o;
  }

  /** A stored sample (act/sample-watch.ts); `pool` is undefined for a node not opted in: harm there is not oversell's to weigh. */
  onSample(record: NodeRecord, pool: Policy | undefined): void {
    void this.observe(record, pool);
  }

  /** The store forgot the node: so does the meter. */
  forget(node: string): void {
    this.#seen.delete(node);
  }

  /** Nodes the meter remembers (for tests). */
  get nodes(): number {
    return this.#seen.size;
  }

  /** One stored sample of a node: the time since the node's previous one counted, and the pods' throttling if a newer pod report came. */
  async observe(record: NodeRecord, pool: Policy | undefined): Promise<void> {
    const node = record.name;
    const atMs = record.value('timestampMs');
    const seen = this.#seen.get(node);
    if (!pool) {
      this.#seen.delete(node);
      return;
    }
    if (!seen) {
      this.#seen.set(node, { atMs, podsAtMs: record.podsAtMs, throttled: throttledOf(record) });
      return;
    }
    const gapMs = atMs - seen.atMs;
    if (!(gapMs > 0)) return;
    seen.atMs = atMs;
    if (gapMs <= MAX_GAP_MS && record.value('pressure.available') === 1) {
      const seconds = gapMs / 1000;
      const contention = record.value('pressure.cpuContention') === 1 ? record.value('pressure.cpuContention.avg10') : record.value('pressure.cpuSome.avg10');
      const overCapacitySeconds = contention >= CPU_OVER_CAPACITY_CONTENTION ? seconds : 0;
      this.#o.ledger?.recordCpu(pool.name, (this.#o.now ?? Date.now)(), seconds, overCapacitySeconds);
      if (this.#o.actsFor(node)) {
        this.#o.metrics.cpuHarm(pool.name, {
          seconds,
          overCapacitySeconds,
          cpuFullSeconds: (clampPercent(record.value('pressure.cpuFull.avg10')) / 100) * seconds,
          memoryFullSeconds: (clampPercent(record.value('pressure.memoryFull.avg10')) / 100) * seconds,
        });
      }
    }
    if (record.podsAtMs <= seen.podsAtMs) return;
    const reportGapMs = record.podsAtMs - seen.podsAtMs;
    seen.podsAtMs = record.podsAtMs;
    const before = seen.throttled;
    seen.throttled = throttledOf(record);
    if (reportGapMs > MAX_GAP_MS * 4 || !this.#o.actsFor(node)) return;
    // A pod is throttled at most for the whole gap on each of the node's CPUs: an agent's larger rise is not believed.
    const most = reportGapMs * 1000 * Math.max(1, record.value('capacity.cpuMillicores') / 1000);
    const facts = new Map(this.#o.pods.on(node).map((p) => [p.uid, p]));
    for (const [uid, micros] of seen.throttled) {
      const rise = micros - (before.get(uid) ?? micros);
      const pod = facts.get(uid);
      if (!(rise > 0) || rise > most || !pod) continue;
      const { tier } = await podTier(pod, pool.protect, this.#o.namespaceLabels);
      this.#o.metrics.cpuThrottled(pool.name, tier, rise / 1e6);
    }
  }
}

function throttledOf(record: NodeRecord): Map<string, number> {
  return new Map(record.pods.map((p) => [p.uid, Number(p.cpuThrottledMicros ?? 0)]));
}

const clampPercent = (v: number) => (v > 0 ? Math.min(100, v) : 0);
