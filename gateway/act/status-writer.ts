// Acting faster than the kubelet. When a node's grant must drop (pressure,
// stale data, a policy changed or deleted), the leader PATCHes that node's
// status itself instead of waiting up to 10 s (or 5 min) for the kubelet's next
// write; the webhook keeps the result on that write, because both use the same
// decision and patch code. Rises are left to the kubelet's next write: there is
// no hurry to give more.
//
// It also keeps each OversellPolicy's status.matchedNodes current.
import {
  CoreV1Api, CustomObjectsApi, makeInformer, PatchStrategy, setHeaderOptions,
  type KubeConfig, type V1Node,
} from '@kubernetes/client-node';
import { QuantityError } from '../../lib/quantity.js';
import type { Logger } from '../../lib/log.js';
import { keepWatching, type Watching } from '../keep-watching.js';
import { ANNOTATION, decideForNode, nodePatch, readAllocatable } from '../admit/node-review.js';
import type { GatewayMetrics } from '../http/metrics.js';
import { POLICY_GROUP, POLICY_PLURAL, POLICY_VERSION } from '../policies/policy-spec.js';
import type { PolicySource } from '../policies/policy-source.js';
import type { NodeRecord, NodeStore } from '../store/node-store.js';
import { sampleAt } from '../../proto/sample-row.js';
import { COLUMN } from '../store/usage-window.js';
import type { LeaderLease } from './leader-lease.js';
import { TokenBucket } from './token-bucket.js';

export const DEFAULT_OPT_IN_SELECTOR = 'oversell.io/enabled=true';

export interface StatusWriterOptions {
  kubeConfig: KubeConfig;
  store: NodeStore;
  policies: PolicySource;
  lease: LeaderLease;
  metrics: GatewayMetrics;
  log: Logger;
  writesPerSecond: number;
  /** The nodes the webhook's objectSelector sends us (label selector string). */
  optInSelector?: string;
  /** Re-check every node this often (staleness has no event of its own). */
  sweepEveryMs?: number;
  now?: () => number;
}

export class StatusWriter {
  readonly #o: Required<Omit<StatusWriterOptions, 'now'>> & { now: () => number };
  readonly #core: CoreV1Api;
  readonly #custom: CustomObjectsApi;
  readonly #informer;
  readonly #bucket: TokenBucket;
  readonly #inFlight = new Set<string>();
  #watching: Watching | undefined;
  #timers: NodeJS.Timeout[] = [];
  /** What each policy's status last said, so unchanged status is not rewritten. */
  #writtenStatus = new Map<string, string>();

  constructor(options: StatusWriterOptions) {
    this.#o = { sweepEveryMs: 2000, now: Date.now, optInSelector: DEFAULT_OPT_IN_SELECTOR, ...options };
    const optIn = this.#o.optInSelector;
    this.#core = options.kubeConfig.makeApiClient(CoreV1Api);
    this.#custom = options.kubeConfig.makeApiClient(CustomObjectsApi);
    this.#bucket = new TokenBucket(options.writesPerSecond, Math.max(1, options.writesPerSecond * 2), this.#o.now);
    this.#informer = makeInformer<V1Node>(
      options.kubeConfig,
      '/api/v1/nodes',
      () => this.#core.listNode({ labelSelector: optIn }),
      optIn,
    );
  }

  async start(): Promise<void> {
    const { store, policies, log } = this.#o;
    this.#watching = await keepWatching(this.#informer, { what: 'node', log });
    // Pressure is the urgent case: check a node as soon as its sample says so.
    store.on('updated', (record) => {
      if (this.#mayBeUnderPressure(record)) this.check(record.name);
    });
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

  async stop(): Promise<void> {
    for (const t of this.#timers) clearInterval(t);
    await (this.#watching?.stop() ?? this.#informer.stop());
  }

  #mayBeUnderPressure(record: NodeRecord): boolean {
    const entry = this.#o.policies.select(record.labels);
    const p = entry?.policy;
    const window = record.window;
    if (!p || window.length === 0) return false;
    // Read in place: this runs on every stored sample while leading.
    const last = window.length - 1;
    const capacity = record.latestRow?.[sampleAt()['capacity.memoryBytes']] ?? 0;
    return window.get(last, COLUMN.cpuPressure) >= p.cpu.pressureThreshold || window.get(last, COLUMN.memoryPressure) >= p.memory.pressureThreshold ||
      (capacity > 0 && window.get(last, COLUMN.memoryBytes) >= p.memory.workingSetThreshold * capacity);
  }

  sweep(): void {
    if (!this.#o.lease.isLeader) return;
    for (const node of this.#informer.list()) if (node.metadata?.name) this.check(node.metadata.name);
  }

  /** Lowers the node's allocatable now if the decision is below what it holds. */
  check(name: string): void {
    if (!this.#o.lease.isLeader || this.#inFlight.has(name)) return;
    const node = this.#informer.get(name);
    const allocatable = node?.status?.allocatable;
    if (!node || !allocatable?.cpu || !allocatable.memory) return;
    const annotations = node.metadata?.annotations;
    // Only nodes the webhook has already handled: we lower what we raised, and never guess raw.
    if (!annotations?.[ANNOTATION.rawCpu]) return;
    let incoming;
    let raw;
    try {
      ({ incoming, raw } = readAllocatable(allocatable, annotations));
    } catch (err) {
      if (err instanceof QuantityError) return;
      throw err;
    }
    const decision = decideForNode(raw, annotations, this.#o.store.usage(name, this.#o.now()), this.#o.policies.select(node.metadata?.labels ?? {}));
    const lower = decision.cpu.applied < incoming.cpuMillicores || decision.memory.applied < incoming.memoryBytes;
    if (!lower || decision.cpu.bound === 'no-data') return;
    if (!this.#bucket.take()) {
      this.#o.metrics.statusWrite('rate-limited');
      return; // the next sweep or sample tries again
    }
    const patch = nodePatch(incoming, annotations, raw, decision);
    // test ops pin the patch to the allocatable we decided from; a kubelet write in between makes it fail, harmlessly.
    const guarded = [
      { op: 'test', path: '/status/allocatable/cpu', value: allocatable.cpu },
      { op: 'test', path: '/status/allocatable/memory', value: allocatable.memory },
      ...patch,
    ];
    this.#inFlight.add(name);
    this.#core
      .patchNodeStatus({ name, body: guarded }, setHeaderOptions('Content-Type', PatchStrategy.JsonPatch))
      .then(
        () => {
          this.#o.metrics.statusWrite('lowered');
          this.#o.log.info({ node: name, cpu: `${decision.cpu.bound}`, memory: `${decision.memory.bound}`, reason: decision.reason }, 'lowered allocatable without waiting for the kubelet');
        },
        (err: unknown) => {
          this.#o.metrics.statusWrite('failed');
          this.#o.log.warn({ node: name, err: String((err as Error).message ?? err) }, 'could not lower allocatable now; the kubelet\'s next write will');
        },
      )
      .finally(() => this.#inFlight.delete(name));
  }

  /** status.matchedNodes of each policy: opted-in nodes it governs after precedence. */
  async writePolicyStatus(): Promise<void> {
    if (!this.#o.lease.isLeader || this.#o.policies.kind !== 'crd') return;
    const counts = new Map<string, number>(this.#o.policies.entries().map((e) => [e.name, 0]));
    for (const node of this.#informer.list()) {
      const e = this.#o.policies.select(node.metadata?.labels ?? {});
      if (e) counts.set(e.name, (counts.get(e.name) ?? 0) + 1);
    }
    for (const e of this.#o.policies.entries()) {
      const matchedNodes = counts.get(e.name) ?? 0;
      const status = { matchedNodes, valid: e.policy !== undefined, message: e.error ?? 'ok' };
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
