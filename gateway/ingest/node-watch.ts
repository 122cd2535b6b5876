// The opted-in nodes as the API server has them, for every replica: one
// informer whose objects feed the store with what the kubelet's next write
// will be decided from (raw from our signed record, labels, per-node caps,
// the previous grant), so the query API and CLI decide from the same inputs
// as the webhook whichever replica they reach. The leader's status writer
// reads the same cache.
import { CoreV1Api, makeInformer, type KubeConfig, type V1Node } from '@kubernetes/client-node';
import type { Logger } from '../../lib/log.js';
import type { GrantProof } from '../decide/grant-proof.js';
import { observeStoredNode, type StoredNodeObservation } from '../decide/node-decision.js';
import { keepWatching, type Watching } from '../../lib/keep-watching.js';
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
  readonly #informer;
  #watching: Watching | undefined;

  constructor(options: NodeWatchOptions) {
    this.#o = options;
    const core = options.kubeConfig.makeApiClient(CoreV1Api);
    this.#informer = makeInformer<V1Node>(options.kubeConfig, '/api/v1/nodes', () => core.listNode({ labelSelector: options.optInSelector }), options.optInSelector);
  }

  async start(): Promise<void> {
    const keep = (node: V1Node) => {
      const name = node.metadata?.name;
      if (!name) return;
      const status = node.status ?? {};
      const observed = observeStoredNode(name, node.metadata ?? {}, { allocatable: status.allocatable, capacity: status.capacity }, this.#o.proof);
      this.#o.store.observe(name, observed, this.#o.now());
      this.#o.onObserved?.(name, observed);
    };
    this.#informer.on('add', keep);
    this.#informer.on('update', keep);
    // A node relabelled out of the opt-in selector is a delete for this informer, as is a deleted node.
    this.#informer.on('delete', (node) => node.metadata?.name && this.#o.store.forgetObservation(node.metadata.name));
    this.#watching = await keepWatching(this.#informer, { what: 'node', log: this.#o.log });
  }

  async stop(): Promise<void> {
    await (this.#watching?.stop() ?? this.#informer.stop());
  }

  list(): readonly V1Node[] {
    return this.#informer.list();
  }

  get(name: string): V1Node | undefined {
    return this.#informer.get(name);
  }
}
