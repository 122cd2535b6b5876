// Relief before harm, acted on: when a node's memory working set crosses the
// relief line, the replica that lowers the node (the leader; sharded, the
// node's first owner) evicts just enough unprotected pods through the Eviction
// API, in the order decide/relief.ts gives, before the kubelet's own eviction
// or the kernel's OOM killer choose. PodDisruptionBudgets are honoured: a pod
// whose eviction is refused (429) is skipped for a while and the next one is
// taken, never retried in a loop. A policy in DryRun only says what it would
// evict. The decision holds the node at its floor until calm (the pressure
// line is below the relief line), so an evicted pod's replacement finds no
// room there while the node is oversold.
//
// Why the gateway and not the agent: the gateway already holds the node's
// usage, its pods' tiers (from its own pod watch) and the policy; an agent
// allowed to evict would hold a credential that can evict any pod in the
// cluster (RBAC cannot limit pods/eviction to one node's pods).
import { CoreV1Api, type KubeConfig } from '@kubernetes/client-node';
import type { Logger } from '../../lib/log.js';
import { TokenBucket } from '../../lib/token-bucket.js';
import { POD_REPORT_ON_MEMORY_MOVE } from '../../wire/pod-report.js';
import { planRelief, reliefLimits, type ReliefCandidate } from '../decide/relief.js';
import type { Policy } from '../decide/policy.js';
import type { GatewayMetrics } from '../metrics/metrics.js';
import type { PolicySource } from '../policies/policy-source.js';
import { namespaceLabelsFrom, podTier, type NamespaceLabels } from '../policies/namespace-labels.js';
import type { NodeRecord, NodeStore } from '../store/node-store.js';
import type { PodFacts, PodFactsStore } from '../store/pod-facts.js';

export type ReliefResult = 'evicted' | 'blocked' | 'dry-run' | 'failed' | 'rate-limited';

/** How long relief waits for a pod report newer than an eviction it made on older pod usage (3 reports at the agent's default). */
const REPORT_WAIT_MS = 30_000;

export interface ReliefActorOptions {
  kubeConfig: KubeConfig;
  store: Pick<NodeStore, 'get'>;
  pods: PodFactsStore;
  policies: PolicySource;
  /** Whether this replica acts for the node now (the one that lowers it). */
  relieves: (node: string) => boolean;
  metrics: Pick<GatewayMetrics, 'relief' | 'harm'>;
  log: Logger;
  /** Evictions a minute over the whole cluster, from this replica (default 20). */
  clusterPerMinute?: number;
  /** How long a pod whose eviction a PodDisruptionBudget refused is left out (default 60 s). */
  blockedForMs?: number;
  /** A namespace's labels (spec.protect.namespaceSelector); default: read from the API server, kept a minute. Throws when unknown. */
  namespaceLabels?: NamespaceLabels;
  now?: () => number;
}

export class ReliefActor {
  readonly #o: ReliefActorOptions & { now: () => number };
  readonly #core: CoreV1Api;
  readonly #cluster: TokenBucket;
  readonly #inFlight = new Set<string>();
  /** Per node, when its evictions of the last minute were made. */
  readonly #evictedAt = new Map<string, number[]>();
  /** Pod uid -> until when it is left out (a PodDisruptionBudget refused it, or it is being evicted). */
  readonly #blocked = new Map<string, number>();
  /** Pod uid -> the memory it used when its eviction was accepted: freed already, while it terminates (left out as long as it is blocked). */
  readonly #evicting = new Map<string, number>();
  /**
   * Node -> agent time of the sample an eviction was made on when its pod
   * usage came from an earlier report: what that pod frees is not known, so
   * nothing more on the node until a newer pod report says it.
   */
  readonly #awaitingReport = new Map<string, number>();
  /** Node -> agent time of the first sample past the line since it was last under it: what relief's latency is measured from. */
  readonly #crossedAt = new Map<string, number>();
  readonly #namespaceLabels: NamespaceLabels;

  constructor(options: ReliefActorOptions) {
    this.#o = { now: Date.now, ...options };
    this.#core = options.kubeConfig.makeApiClient(CoreV1Api);
    this.#namespaceLabels = options.namespaceLabels ?? namespaceLabelsFrom(options.kubeConfig, this.#o.now);
    const perMinute = options.clusterPerMinute ?? 20;
    this.#cluster = new TokenBucket(perMinute / 60, perMinute, this.#o.now);
  }

  /** A stored sample (act/sample-watch.ts): relief starts when the node is past its policy's line and this replica acts for it. */
  onSample(record: NodeRecord, policy: Policy | undefined): void {
    if (!this.#o.relieves(record.name)) return;
    if (!this.#crossed(record, policy)) {
      this.#crossedAt.delete(record.name);
      return;
    }
    if (!this.#crossedAt.has(record.name)) this.#crossedAt.set(record.name, record.value('timestampMs'));
    void this.relieve(record.name);
  }

  /** The store forgot the node: so does relief. */
  forget(node: string): void {
    this.#crossedAt.delete(node);
    this.#evictedAt.delete(node);
    this.#awaitingReport.delete(node);
  }

  /** Cheap, on every stored sample of a node this replica acts for: relief on in its policy, and past the policy's line. */
  #crossed(record: NodeRecord, policy: Policy | undefined): policy is Policy {
    if (!policy?.relief.enabled) return false;
    const capacity = record.value('capacity.memoryBytes');
    return capacity > 0 && record.value('memoryWorkingSetBytes') > policy.relief.memoryLine * capacity;
  }

  /** One relief of the node if it is past the line: the results of the evictions asked for, in order (for tests and logs). */
  async relieve(node: string): Promise<ReliefResult[]> {
    if (this.#inFlight.has(node)) return [];
    const record = this.#o.store.get(node);
    const policy = record && this.#o.policies.select(record.labels)?.policy;
    if (!record || !this.#o.relieves(node) || !this.#crossed(record, policy)) return [];
    this.#inFlight.add(node);
    try {
      return await this.#relieve(node, record, policy);
    } finally {
      this.#inFlight.delete(node);
    }
  }

  async #relieve(node: string, record: NodeRecord, policy: Policy): Promise<ReliefResult[]> {
    const now = this.#o.now();
    const sampleAtMs = record.value('timestampMs');
    const waitingSince = this.#awaitingReport.get(node);
    if (waitingSince !== undefined) {
      if (record.podsAtMs <= waitingSince && sampleAtMs - waitingSince < REPORT_WAIT_MS) return [];
      this.#awaitingReport.delete(node);
    }
    // Per-pod usage comes with every Nth sample (--pod-report-every), and at
    // once when the node's memory moved (wire/pod-report.ts). A report from
    // before such a move may not show the pod that grew: wait for the next.
    // One that is older but still close: one victim, then wait for a newer.
    const usageFresh = record.podsAtMs >= sampleAtMs;
    const capacity = record.value('capacity.memoryBytes');
    const workingSet = record.value('memoryWorkingSetBytes');
    if (!usageFresh && Math.abs(workingSet - record.podsNodeWorkingSetBytes) >= POD_REPORT_ON_MEMORY_MOVE * capacity) return [];
    const usage = new Map(record.pods.map((p) => [p.uid, Number(p.memoryWorkingSetBytes)]));
    const candidates = await Promise.all(this.#o.pods.on(node).map(async (p) => this.#candidate(p, policy, usage.get(p.uid) ?? 0)));
    const recent = (this.#evictedAt.get(node) ?? []).filter((t) => now - t < 60_000);
    this.#evictedAt.set(node, recent);
    for (const [uid, until] of this.#blocked) {
      if (until > now) continue;
      this.#blocked.delete(uid);
      this.#evicting.delete(uid);
    }
    const results: ReliefResult[] = [];
    const tried = new Set<string>();
    // Pods still terminating after an earlier relief still show in the sample: what they free counts already, or the next sample would evict again for it.
    // A report newer than the eviction says what the pod uses now, which is what it frees.
    let freed = 0;
    for (const c of candidates) {
      const atEviction = this.#evicting.get(c.uid);
      if (atEviction !== undefined) freed += Math.max(atEviction, usage.get(c.uid) ?? 0);
    }
    // One victim at a time: a refused one is replaced by the next in order.
    for (;;) {
      const plan = planRelief({
        memoryCapacityBytes: capacity,
        memoryWorkingSetBytes: workingSet,
        freedBytes: freed,
        candidates,
        skip: new Set([...this.#blocked.keys(), ...tried]),
        allowance: policy.relief.perNodePerMinute - recent.length,
        policy: reliefLimits(policy),
      });
      const victim = plan.victims[0];
      if (!victim) {
        if (plan.short) this.#o.log.warn({ node, needBytes: plan.needBytes, freedBytes: freed }, `relief stops: ${plan.short}`);
        break;
      }
      tried.add(victim.uid);
      const result = await this.#evict(node, victim, policy, { capacity, workingSet, sampleAtMs, usageFresh });
      results.push(result);
      this.#o.metrics.relief(result);
      if (result === 'rate-limited') break;
      if (result === 'evicted' || result === 'dry-run') freed += Math.max(0, victim.memoryUsageBytes);
      if (result === 'evicted') recent.push(this.#o.now());
      if (result === 'evicted' && !usageFresh) {
        this.#awaitingReport.set(node, sampleAtMs);
        break;
      }
    }
    return results;
  }

  async #candidate(p: PodFacts, policy: Policy, memoryUsageBytes: number): Promise<ReliefCandidate> {
    const tier = await podTier(p, policy.protect, this.#namespaceLabels);
    return { namespace: p.namespace, name: p.name, uid: p.uid, tier, priority: p.priority, memoryUsageBytes, memoryRequestBytes: p.memoryRequestBytes, startedAtMs: p.startedAtMs };
  }

  async #evict(node: string, v: ReliefCandidate, policy: Policy, seen: { capacity: number; workingSet: number; sampleAtMs: number; usageFresh: boolean }): Promise<ReliefResult> {
    const { capacity, workingSet } = seen;
    const pod = `${v.namespace}/${v.name}`;
    const why = `node ${node}'s memory working set ${(workingSet / 2 ** 30).toFixed(2)} GiB is past the relief line (${policy.relief.memoryLine * 100} % of ${(capacity / 2 ** 30).toFixed(2)} GiB); ${pod} is unprotected, priority ${v.priority}, using ${(v.memoryUsageBytes / 2 ** 20).toFixed(0)} MiB of ${(v.memoryRequestBytes / 2 ** 20).toFixed(0)} MiB requested`;
    if (reliefLimits(policy).dryRun) {
      this.#o.log.info({ node, pod, policy: policy.name }, `relief (DryRun, nothing evicted): would evict ${pod}: ${why}`);
      return 'dry-run';
    }
    if (!this.#cluster.take()) {
      this.#o.log.warn({ node, pod }, 'relief held back: the cluster-wide rate of evictions is spent; the next sample tries again');
      return 'rate-limited';
    }
    this.#blocked.set(v.uid, this.#o.now() + (this.#o.blockedForMs ?? 60_000));
    try {
      await this.#core.createNamespacedPodEviction({ name: v.name, namespace: v.namespace, body: { apiVersion: 'policy/v1', kind: 'Eviction', metadata: { name: v.name, namespace: v.namespace } } });
    } catch (err) {
      const code = (err as { code?: number }).code;
      if (code === 429) {
        this.#o.log.info({ node, pod }, `relief: a PodDisruptionBudget refuses evicting ${pod} now; it is left out for a minute and the next pod in order is taken`);
        return 'blocked';
      }
      this.#blocked.delete(v.uid);
      this.#o.log.warn({ node, pod, code, err: (err as Error).message }, `relief: evicting ${pod} failed; the next sample tries again`);
      return 'failed';
    }
    this.#evicting.set(v.uid, Math.max(0, v.memoryUsageBytes));
    // The sample's agent clock against this host's: on one host (or with NTP) the time from the first sample past the line to the accepted eviction.
    const crossedAtMs = this.#crossedAt.get(node) ?? seen.sampleAtMs;
    this.#o.log.info({ node, pod, crossedAtMs, sampleAtMs: seen.sampleAtMs, crossingToEvictionMs: this.#o.now() - crossedAtMs, podUsageFresh: seen.usageFresh }, `relieved: evicted ${pod}: ${why}`);
    this.#o.metrics.harm(policy.name, 'unprotected', 'relief');
    void this.#event(node, pod, why);
    return 'evicted';
  }

  /** A Warning on the node (Events about Nodes live in default; the policy oversell-gateway-node-events allows this one kind). */
  async #event(node: string, pod: string, why: string): Promise<void> {
    const at = new Date(this.#o.now());
    await this.#core
      .createNamespacedEvent({
        namespace: 'default',
        body: {
          metadata: { generateName: `${node}.oversell-relief.` },
          involvedObject: { apiVersion: 'v1', kind: 'Node', name: node },
          reason: 'PodRelieved',
          message: `oversell evicted ${pod} through the Eviction API: ${why}`,
          type: 'Warning',
          source: { component: 'oversell-gateway' },
          reportingComponent: 'oversell.io/gateway',
          firstTimestamp: at,
          lastTimestamp: at,
          count: 1,
        },
      })
      .catch((err: unknown) => this.#o.log.warn({ node, err: (err as Error).message }, 'could not write the relief Event'));
  }
}
