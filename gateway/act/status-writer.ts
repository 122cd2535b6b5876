// Acting faster than the kubelet. When a node's grant must drop (pressure,
// stale data, a policy changed or deleted), the leader PATCHes that node's
// status itself instead of waiting up to 10 s (or 5 min) for the kubelet's next
// write; the webhook keeps the result on that write, because both use the same
// decision and patch code. Rises are left to the kubelet's next write: there is
// no hurry to give more.
//
// It writes only while the gateway is ready and its usage data is fresh for
// most opted-in nodes: a gateway that lost its agents (ingest thread down,
// network split) would otherwise see every node stale and lower them all at
// once. It lowers only nodes whose object carries our own signed record, so
// raw always comes from the kubelet (trusted-raw.ts), never from a guess.
//
// It also keeps each OversellPolicy's status.matchedNodes current, and raises
// a Warning Event on a node whose agent reports bound requests above the cap.
import { CoreV1Api, CustomObjectsApi, PatchStrategy, setHeaderOptions, type KubeConfig, type V1Node } from '@kubernetes/client-node';
import { QuantityError } from '../../lib/quantity.js';
import type { Logger } from '../../lib/log.js';
import { nodePatch } from '../admit/node-review.js';
import type { GrantProof } from '../decide/grant-proof.js';
import { decideForNode, nodeInputs, type NodeInputs } from '../decide/node-decision.js';
import { isFresh, pressureNow, type Allocatable, type Decision, type Policy, type ResourceDecision } from '../decide/policy.js';
import type { NodeObjectFacts, Unverified } from '../decide/trusted-raw.js';
import type { JsonPatchOp } from '../../lib/json.js';
import type { GatewayMetrics } from '../metrics/metrics.js';
import { POLICY_GROUP, POLICY_PLURAL, POLICY_VERSION } from '../policies/policy-spec.js';
import type { PolicySource } from '../policies/policy-source.js';
import type { NodeRecord, NodeStore } from '../store/node-store.js';
import type { NodeRequests } from '../store/bound-requests.js';
import type { NodeCache } from '../ingest/node-watch.js';
import type { LeaderLease } from './leader-lease.js';
import { TokenBucket } from '../../lib/token-bucket.js';
import { nudgePatch, shouldNudge } from './kubelet-nudge.js';

/** A memory rise, as a share of capacity, that makes the leader re-decide a node at once instead of at the next sweep. */
const USAGE_RISE = 0.02;

export interface StatusWriterOptions {
  kubeConfig: KubeConfig;
  /** The opted-in nodes (the node watch every replica runs). */
  nodes: NodeCache;
  store: NodeStore;
  policies: PolicySource;
  lease: LeaderLease;
  metrics: GatewayMetrics;
  log: Logger;
  writesPerSecond: number;
  /** Re-check every node this often (staleness has no event of its own). */
  sweepEveryMs?: number;
  proof: GrantProof;
  /** Why the gateway is not ready, or undefined when it is. */
  notReady: () => string | undefined;
  /** Share of opted-in nodes whose data must be fresh before anything is written. */
  minFreshShare?: number;
  /** This replica, as the Events it writes say. */
  identity: string;
  /** Requests bound to a node, from the gateway's own pod watch. */
  boundRequests?: (node: string) => NodeRequests | undefined;
  /**
   * Sharded: whether this replica is the node's first owner, the one replica
   * with its data that lowers it. Every replica then lowers its own nodes
   * (the lease still decides who writes policy status). Absent: the leader
   * lowers every node.
   */
  lowers?: (node: string) => boolean;
  /** A node with bound requests over its cap gets one Event per this interval. */
  overCapEventEveryMs?: number;
  now?: () => number;
}

/**
 * Why the leader must not write node status now, if it must not: the gateway
 * is not ready, or fewer than `minFreshShare` of the nodes a policy governs
 * have fresh usage data. Only then is a stale decision the node's own state
 * rather than the gateway's blindness.
 */
export function holdBack(
  notReady: string | undefined,
  nodes: readonly V1Node[],
  policyOf: (labels: Record<string, string>) => Policy | undefined,
  ageMsOf: (name: string) => number | undefined,
  minFreshShare: number,
): string | undefined {
  if (notReady) return `gateway not ready: ${notReady}`;
  let governed = 0;
  let fresh = 0;
  for (const node of nodes) {
    const name = node.metadata?.name;
    const policy = policyOf(node.metadata?.labels ?? {});
    if (!name || !policy) continue;
    governed += 1;
    const age = ageMsOf(name);
    if (age !== undefined && isFresh(age, policy.staleAfterMs)) fresh += 1;
  }
  if (governed > 0 && fresh < minFreshShare * governed) {
    return `usage data is fresh for ${fresh} of ${governed} governed nodes (below ${Math.round(minFreshShare * 100)}%): the gateway may have lost its agents`;
  }
  return undefined;
}

/**
 * The leader's JSONPatch for nodes/status: the decision, signed, with each
 * resource lowered or left alone, never raised (one resource may fall while
 * the other's decision is above what the node holds: that rise waits for the
 * kubelet's next write, through the webhook). Test ops pin it to the
 * allocatable decided from; a kubelet write in between makes it fail,
 * harmlessly. The ValidatingAdmissionPolicy oversell-gateway-node-status
 * (deploy/base/gateway-policy.yaml) refuses any other write by the gateway.
 */
export function loweringPatch(
  facts: NodeObjectFacts,
  held: { cpu: string; memory: string },
  raw: Allocatable,
  decision: Decision,
  proof: GrantProof,
  unconfirmed?: Partial<Allocatable>,
): Array<JsonPatchOp | { op: 'test'; path: string; value: string }> {
  const notAbove = (d: ResourceDecision, now: bigint): ResourceDecision => (d.applied > now ? { ...d, applied: now } : d);
  const lowering: Decision = {
    cpu: notAbove(decision.cpu, facts.incoming.cpuMillicores),
    memory: notAbove(decision.memory, facts.incoming.memoryBytes),
    policy: decision.policy,
    dryRun: decision.dryRun,
    reason: decision.reason,
  };
  return [
    { op: 'test', path: '/status/allocatable/cpu', value: held.cpu },
    { op: 'test', path: '/status/allocatable/memory', value: held.memory },
    ...nodePatch(facts, raw, lowering, proof, unconfirmed),
  ];
}

export class StatusWriter {
  readonly #o: Required<Omit<StatusWriterOptions, 'now' | 'lowers'>> & Pick<StatusWriterOptions, 'lowers'> & { now: () => number };
  readonly #core: CoreV1Api;
  readonly #custom: CustomObjectsApi;
  readonly #bucket: TokenBucket;
  readonly #burst: number;
  readonly #inFlight = new Set<string>();
  #timers: NodeJS.Timeout[] = [];
  #unlisten: () => void = () => {};
  /** What each policy's status last said, so unchanged status is not rewritten. */
  #writtenStatus = new Map<string, string>();
  /** Per node, the memory working set a rise is measured from (#usageRose). */
  readonly #memorySeen = new Map<string, number>();
  /** Why node writes are held back now; undefined when they may go ahead. Set by every sweep. */
  #paused: string | undefined = 'no sweep yet';
  #lastOverCapEvent = new Map<string, number>();
  /** Per node, when this replica last nudged its kubelet (kubelet-nudge.ts); gone once the node carries our record again. */
  readonly #nudgedAt = new Map<string, number>();

  constructor(options: StatusWriterOptions) {
    this.#o = { sweepEveryMs: 2000, now: Date.now, minFreshShare: 0.5, overCapEventEveryMs: 30 * 60_000, boundRequests: () => undefined, ...options };
    this.#core = options.kubeConfig.makeApiClient(CoreV1Api);
    this.#custom = options.kubeConfig.makeApiClient(CustomObjectsApi);
    this.#burst = Math.max(1, options.writesPerSecond * 2);
    this.#bucket = new TokenBucket(options.writesPerSecond, this.#burst, this.#o.now);
  }

  start(): void {
    const { store, policies } = this.#o;
    // Check a node as soon as its sample says the grant may fall: pressure, or
    // memory up since the last such check (the window's max rose). The sweep
    // every sweepEveryMs is the backstop (CPU's p95, staleness, policies).
    const updated = (record: NodeRecord) => {
      // Only for nodes this replica lowers: every other replica would compute pressure on every sample for nothing.
      if (!this.#lowers(record.name)) return;
      if (this.#mayBeUnderPressure(record) || this.#usageRose(record)) this.check(record.name);
    };
    const removed = (name: string) => {
      this.#memorySeen.delete(name);
      this.#nudgedAt.delete(name);
    };
    store.on('updated', updated);
    store.on('removed', removed);
    this.#unlisten = () => {
      store.off('updated', updated);
      store.off('removed', removed);
    };
    policies.onChange(() => {
      this.sweep();
      void this.writePolicyStatus();
    });
    this.#o.lease.onChange((leader) => {
      if (!leader) return;
      this.#writtenStatus.clear();
      this.sweep();
      void this.writePolicyStatus();
    });
    this.#timers.push(setInterval(() => this.sweep(), this.#o.sweepEveryMs));
    this.#timers.push(setInterval(() => void this.writePolicyStatus(), 10_000));
    for (const t of this.#timers) t.unref();
  }

  stop(): void {
    for (const t of this.#timers) clearInterval(t);
    this.#unlisten();
  }

  /**
   * Whether the node's memory working set rose by more than USAGE_RISE of
   * capacity since the baseline; the baseline follows every fall, so a slow
   * climb triggers once it adds up. Memory only: its window statistic (max)
   * moves with one sample, and it does not jitter the way CPU does (CPU's p95
   * needs several samples; the sweep and pressure cover it). One number per
   * node, updated in place: this runs on every sample.
   */
  #usageRose(record: NodeRecord): boolean {
    const memory = record.value('memoryWorkingSetBytes');
    const seen = this.#memorySeen.get(record.name);
    const rose = seen !== undefined && memory - seen > record.value('capacity.memoryBytes') * USAGE_RISE;
    if (seen === undefined || rose || memory < seen) this.#memorySeen.set(record.name, memory);
    return rose;
  }

  #mayBeUnderPressure(record: NodeRecord): boolean {
    const p = this.#o.policies.select(record.labels)?.policy;
    // Read in place: this runs on every stored sample while leading.
    return p !== undefined && pressureNow(record.window, p, record.value('capacity.memoryBytes'));
  }

  /** Why writes are held back, if they are (for tests and logs). */
  get paused(): string | undefined {
    return this.#paused;
  }

  /** Whether this replica lowers any node now: sharded, each replica its own; otherwise the leader. */
  #lowersAny(): boolean {
    return this.#o.lowers !== undefined || this.#o.lease.isLeader;
  }

  /** Whether this replica lowers `node` now: sharded, its first owner; otherwise the leader, every node. */
  #lowers(node: string): boolean {
    return this.#o.lowers ? this.#o.lowers(node) : this.#o.lease.isLeader;
  }

  sweep(): void {
    if (!this.#lowersAny()) return;
    const { lowers } = this.#o;
    // Sharded, the share of fresh data is of the nodes this replica holds: it has no data on the others.
    const nodes = lowers ? this.#o.nodes.list().filter((n) => lowers(n.metadata?.name ?? '')) : this.#o.nodes.list();
    const paused = this.#holdBack(nodes);
    if (paused !== this.#paused) {
      if (paused) this.#o.log.warn({ why: paused }, 'not lowering allocatable ahead of the kubelet until this clears; the webhook still decides on every kubelet write');
      else if (this.#paused) this.#o.log.info({ was: this.#paused }, 'lowering allocatable ahead of the kubelet again');
      this.#paused = paused;
    }
    for (const node of nodes) if (node.metadata?.name) this.check(node.metadata.name);
  }

  #holdBack(nodes: readonly V1Node[]): string | undefined {
    const { store, policies, now } = this.#o;
    const t = now();
    return holdBack(this.#o.notReady(), nodes, (labels) => policies.select(labels)?.policy, (name) => store.usage(name, t)?.ageMs, this.#o.minFreshShare);
  }

  /** Lowers the node's allocatable now if the decision is below what it holds. */
  check(name: string): void {
    if (!this.#lowers(name) || this.#inFlight.has(name)) return;
    const node = this.#o.nodes.get(name);
    const status = node?.status;
    if (!node || !status?.allocatable?.cpu || !status.allocatable.memory) return;
    let inputs: NodeInputs;
    try {
      inputs = nodeInputs(name, node.metadata ?? {}, { allocatable: status.allocatable, capacity: status.capacity }, false, this.#o.proof);
    } catch (err) {
      if (err instanceof QuantityError) return;
      throw err;
    }
    // Only nodes carrying our own signed record: we lower what we raised, and never guess raw.
    const { facts, trusted } = inputs;
    if (trusted.unverified) {
      this.#nudgeIfDue(name, trusted.unverified, inputs.labels, status.allocatable.memory);
      return;
    }
    this.#nudgedAt.delete(name);
    const { raw } = trusted;
    const decision = decideForNode({
      raw, signed: trusted.signed, nodeMaxRatio: inputs.nodeMaxRatio, usage: this.#o.store.usage(name, this.#o.now()),
      entry: this.#o.policies.select(inputs.labels), boundRequests: this.#o.boundRequests?.(name),
    });
    if (decision.cpu.decidedBy === 'no-data') return;
    if (decision.cpu.requestsOverCap || decision.memory.requestsOverCap) this.#reportOverCap(node, decision);
    const { incoming } = facts;
    const lower = decision.cpu.applied < incoming.cpuMillicores || decision.memory.applied < incoming.memoryBytes;
    if (!lower || !this.#mayWrite()) return;
    const guarded = loweringPatch(facts, { cpu: status.allocatable.cpu, memory: status.allocatable.memory }, raw, decision, this.#o.proof, trusted.signed?.unconfirmed);
    this.#patch(name, guarded, () => {
      this.#o.metrics.statusWrite('lowered');
      this.#o.log.info({ node: name, cpu: `${decision.cpu.decidedBy}`, memory: `${decision.memory.decidedBy}`, reason: decision.reason }, 'lowered allocatable without waiting for the kubelet');
    }, 'could not lower allocatable now; the kubelet\'s next write will');
  }

  /**
   * Memory one byte down on a node whose stored allocatable carries no valid
   * record of ours, so its kubelet writes again within 10 s through the
   * webhook instead of in up to 5 min (kubelet-nudge.ts). Held back as
   * lowering is, and it spends the same write budget.
   */
  #nudgeIfDue(name: string, unverified: Unverified, labels: Record<string, string>, heldMemory: string): void {
    const now = this.#o.now();
    const policy = this.#o.policies.select(labels)?.policy;
    const age = this.#o.store.usage(name, now)?.ageMs;
    const decidable = policy !== undefined && age !== undefined && isFresh(age, policy.staleAfterMs);
    if (!shouldNudge({ unverified, decidable, lastNudgeAt: this.#nudgedAt.get(name), now })) return;
    // Half the burst stays for lowering: after an outage every node wants a nudge, and a fall must not wait behind them.
    if (!this.#mayWrite(Math.floor(this.#burst / 2))) return;
    // Logged once per loss of the record, not every 30 s for a webhook that keeps failing open.
    const first = !this.#nudgedAt.has(name);
    this.#nudgedAt.set(name, now);
    this.#patch(name, nudgePatch(heldMemory), () => {
      this.#o.metrics.statusWrite('nudged');
      this.#o.log[first ? 'info' : 'debug']({ node: name, memory: heldMemory }, 'nudged the kubelet to write its status again: the node carries no valid grant record of ours (a kubelet write passed the webhook unpatched, or the node was just labelled)');
    }, 'could not nudge the kubelet; it writes its status again within 5 min, or at once when restarted');
  }

  /**
   * Whether a node write may go now: not held back, and within the rate,
   * `reserve` tokens left for others. Counts why not; the next sweep or
   * sample tries again.
   */
  #mayWrite(reserve = 0): boolean {
    if (this.#paused) {
      this.#o.metrics.statusWrite('paused');
      return false;
    }
    if (!this.#bucket.take(1, reserve)) {
      this.#o.metrics.statusWrite('rate-limited');
      return false;
    }
    return true;
  }

  #patch(name: string, body: object[], done: () => void, failure: string): void {
    this.#inFlight.add(name);
    this.#core
      .patchNodeStatus({ name, body }, setHeaderOptions('Content-Type', PatchStrategy.JsonPatch))
      .then(done, (err: unknown) => {
        this.#o.metrics.statusWrite('failed');
        this.#o.log.warn({ node: name, err: String((err as Error).message ?? err) }, failure);
      })
      .finally(() => this.#inFlight.delete(name));
  }

  /**
   * A Warning Event on the node, at most once per interval: its agent reports
   * more bound requests than the cap allows, so the grant stops at the cap and
   * a kubelet restart may reject pods. Either the policy's cap is too low for
   * this node, or the agent reports nonsense.
   */
  #reportOverCap(node: V1Node, decision: Decision): void {
    const name = node.metadata?.name ?? '';
    const now = this.#o.now();
    const last = this.#lastOverCapEvent.get(name);
    if (last !== undefined && now - last < this.#o.overCapEventEveryMs) return;
    this.#lastOverCapEvent.set(name, now);
    const over = (['cpu', 'memory'] as const).filter((r) => decision[r].requestsOverCap);
    const message = `bound requests reported by the node's agent exceed the oversell cap for ${over.join(' and ')} (${over
      .map((r) => `${r} cap ${decision[r].cap}${r === 'cpu' ? 'm' : ' bytes'}`)
      .join(', ')}); allocatable stops at the cap, so a kubelet restart may reject pods. Raise the policy's maxRatio for this node pool, or check the agent.`;
    const at = new Date(now);
    this.#core
      .createNamespacedEvent({
        namespace: 'default',
        body: {
          metadata: { generateName: `${name}.oversell-over-cap.` },
          involvedObject: { apiVersion: 'v1', kind: 'Node', name, ...(node.metadata?.uid && { uid: node.metadata.uid }) },
          reason: 'BoundRequestsOverCap',
          message,
          type: 'Warning',
          source: { component: 'oversell-gateway' },
          reportingComponent: 'oversell.io/gateway',
          reportingInstance: this.#o.identity,
          firstTimestamp: at,
          lastTimestamp: at,
          count: 1,
        },
      })
      .then(
        () => this.#o.metrics.statusWrite('event'),
        (err: unknown) => {
          this.#o.metrics.statusWrite('event-failed');
          this.#o.log.warn({ node: name, err: String((err as Error).message ?? err) }, 'could not write the bound-requests-over-cap Event');
        },
      );
  }

  /** status.matchedNodes of each policy: opted-in nodes it governs after precedence. */
  async writePolicyStatus(): Promise<void> {
    if (!this.#o.lease.isLeader || this.#o.policies.kind !== 'crd') return;
    const counts = new Map<string, number>(this.#o.policies.entries().map((e) => [e.name, 0]));
    for (const node of this.#o.nodes.list()) {
      const e = this.#o.policies.select(node.metadata?.labels ?? {});
      if (e) counts.set(e.name, (counts.get(e.name) ?? 0) + 1);
    }
    for (const e of this.#o.policies.entries()) {
      const matchedNodes = counts.get(e.name) ?? 0;
      const status = { matchedNodes, valid: e.policy !== undefined, message: e.error ?? 'ok', warnings: e.warnings ?? [] };
      const key = JSON.stringify(status);
      if (this.#writtenStatus.get(e.name) === key) continue;
      try {
        await this.#custom.patchClusterCustomObjectStatus(
          {
            group: POLICY_GROUP, version: POLICY_VERSION, plural: POLICY_PLURAL, name: e.name,
            body: { status },
          },
          setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
        );
        this.#writtenStatus.set(e.name, key);
      } catch (err) {
        this.#o.log.warn({ policy: e.name, err: String((err as Error).message ?? err) }, 'could not write policy status');
      }
    }
  }
}
