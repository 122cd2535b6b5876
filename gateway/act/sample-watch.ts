// One subscriber to the store's stored samples for everything that acts on
// each of them (relief, the CPU harm meter): the node's policy is selected
// once per sample and handed to each, and a node the store forgets is
// forgotten by each. Sharded, only a node's owners receive its samples;
// without sharding every replica receives every sample, so the per-sample
// work is paid once, not once per consumer.
import type { Policy } from '../decide/policy.js';
import { policyOrNone, type PolicySource } from '../policies/policy-source.js';
import type { NodeRecord, NodeStore } from '../store/node-store.js';

export interface SampleConsumer {
  /** One stored sample of a node; `policy` is undefined when the node is not opted in or no policy selects it. */
  onSample(record: NodeRecord, policy: Policy | undefined): void;
  /** The store forgot the node (deleted, or silent past its forget time). */
  forget?(node: string): void;
}

export interface SampleWatchOptions {
  store: Pick<NodeStore, 'on' | 'off'>;
  policies: PolicySource;
  /** Whether the node is opted in: only then is a policy selected for it. */
  optedIn: (node: string) => boolean;
  consumers: readonly SampleConsumer[];
}

/** Subscribes; returns the unsubscribe. */
export function watchSamples(o: SampleWatchOptions): () => void {
  const updated = (record: NodeRecord) => {
    const policy = o.optedIn(record.name) ? policyOrNone(o.policies, record.labels) : undefined;
    for (const c of o.consumers) c.onSample(record, policy);
  };
  const removed = (node: string) => {
    for (const c of o.consumers) c.forget?.(node);
  };
  o.store.on('updated', updated);
  o.store.on('removed', removed);
  return () => {
    o.store.off('updated', updated);
    o.store.off('removed', removed);
  };
}
