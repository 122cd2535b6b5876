// The opted-in nodes as the API server has them, for every replica: one
// informer whose objects feed the store with what the kubelet's next write
// will be decided from (raw from our signed record, labels, per-node caps,
// the previous grant), so the query API and CLI decide from the same inputs
// as the webhook whichever replica they reach. The leader's status writer
// reads the same cache.
import type { KubeConfig, V1Node } from '@kubernetes/client-node';
import { kubeConfigConnection } from '../../lib/kube-connection.js';
import { BACKOFF, ListWatch } from '../../lib/list-watch.js';
import type { Logger } from '../../lib/log.js';
import { WatchCache, type Change } from '../../lib/watch-cache.js';
import type { GrantProof } from '../decide/grant-proof.js';
import { observeStoredNode, type StoredNodeObservation } from '../decide/node-decision.js';
import type { NodeStore } from '../store/node-store.js';

/** What readers of the node cache need: the status writer lists and gets. */
export interface NodeCache {
  list(): readonly V1Node[];
  get(name: string): V1Node | undefined;
}

export interface NodeWatchOptions {
  kubeConfig: KubeConfig;
  /** The nodes the webhook's objectSelector sends us (label selector string). */
  optInSelector: string;
  store: NodeStore;
  proof: GrantProof;
  log: Logger;
  now: () => number;
  /** Each stored node as observed: what the API server accepted, unlike a review anyone may post (webhook-plugin.ts perNodeMetrics). */
  onObserved?: (name: string, observed: StoredNodeObservation) => void;
}

export class NodeWatch implements NodeCache {
  readonly #o: NodeWatchOptions;
  readonly #nodes = new WatchCache<V1Node>((changes) => this.#changed(changes));
  readonly #watch: ListWatch<V1Node>;

  constructor(options: NodeWatchOptions) {
    this.#o = options;
    this.#watch = new ListWatch<V1Node>({
      connection: kubeConfigConnection(options.kubeConfig),
      path: '/api/v1/nodes',
      labelSelector: options.optInSelector,
      decode: (node) => node,
      target: this.#nodes,
      what: 'nodes',
      log: options.log,
      backoff: BACKOFF.replicas,
    });
  }

  async start(): Promise<void> {
    try {
      await this.#watch.start();
    } catch (err) {
      throw new Error(`cannot list the opted-in nodes: ${(err as Error).message}; the gateway needs list and watch on nodes (deploy/base/rbac.yaml)`);
    }
  }

  async stop(): Promise<void> {
    this.#watch.stop();
  }

  list(): readonly V1Node[] {
    return this.#nodes.list();
  }

  get(name: string): V1Node | undefined {
    return this.#nodes.get(name);
  }

  #changed(changes: readonly Change<V1Node>[]): void {
    for (const { type, object: node } of changes) {
      const name = node.metadata?.name;
      if (!name) continue;
      // A node relabelled out of the opt-in selector is a delete for this watch, as is a deleted node.
      if (type === 'DELETED') {
        this.#o.store.forgetObservation(name);
        continue;
      }
      const status = node.status ?? {};
      const observed = observeStoredNode(name, node.metadata ?? {}, { allocatable: status.allocatable, capacity: status.capacity }, this.#o.proof);
      this.#o.store.observe(name, observed, this.#o.now());
      this.#o.onObserved?.(name, observed);
    }
  }
}
