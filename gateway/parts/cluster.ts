// With a cluster: what every replica watches of it (nodes, bound pods,
// namespaces), and the parts that act on it (status writes, relief, harm,
// load history snapshots, the leader lease), each a part (lib/lifecycle.ts).
import { LeaderLease } from '../act/leader-lease.js';
import { StatusWriter } from '../act/status-writer.js';
import { HistorySnapshots } from '../act/history-snapshots.js';
import type { BoundRequests } from '../store/bound-requests.js';
import { watchBoundPods } from '../ingest/bound-pods-watch.js';
import { ReliefActor } from '../act/relief-actor.js';
import { watchSamples } from '../act/sample-watch.js';
import { PodFactsStore } from '../store/pod-facts.js';
import { meterHarm } from '../metrics/harm-meter.js';
import { CpuHarmMeter } from '../metrics/cpu-harm-meter.js';
import { namespaceLabelsFrom, type NamespaceLabels } from '../policies/namespace-labels.js';
import { NodeWatch } from '../ingest/node-watch.js';
import { decideObserved, type StoredNodeObservation } from '../decide/node-decision.js';
import type { Watching } from '../../lib/list-watch.js';
import type { Part } from '../../lib/lifecycle.js';
import type { PodDirectory } from '../store/pod-directory.js';
import { watchShardMembers } from '../shard/shard-members.js';
import type { GatewayOptions } from './gateway-options.js';
import type { Shared } from './shared.js';

/** With a cluster, what every replica keeps of it and the webhook reads too: the opted-in node objects, the bound pods' tier facts, namespaces' labels. */
export interface ClusterSources {
  nodes: NodeWatch;
  /** Relief, the harm count and the protected-room check read each bound pod's tier facts, from the same watch as its requests. */
  podFacts: PodFactsStore | undefined;
  namespaceLabels: NamespaceLabels;
}

export function clusterSources(s: Shared, cluster: NonNullable<GatewayOptions['cluster']>): ClusterSources {
  const { store, metrics, log, now, proof } = s;
  const { policies } = s.options;
  const { kubeConfig, optInSelector } = cluster;
  const nodes = new NodeWatch({
    kubeConfig, optInSelector, store, proof, log, now,
    ...(s.nodeGaugesFromWatch && {
      onObserved: (name: string, o: StoredNodeObservation) => {
        if (!o.raw) return;
        const d = decideObserved(o.raw, o, { usage: store.usage(name, now()), entry: policies.select(o.labels), boundRequests: s.boundRequests(name) });
        if (d.cpu.decidedBy === 'no-data') return;
        metrics.nodeGauges(name, 'cpu', d.cpu);
        metrics.nodeGauges(name, 'memory', d.memory);
      },
    }),
  });
  return { nodes, podFacts: cluster.watchBoundPods !== false ? new PodFactsStore() : undefined, namespaceLabels: namespaceLabelsFrom(kubeConfig, now) };
}

/** With a cluster: the pods bound to nodes (for the decision and the metrics API's directory), the node objects, and the leader's status writes. */
export function clusterParts(s: Shared, cluster: NonNullable<GatewayOptions['cluster']>, sources: ClusterSources, bound: BoundRequests, directory: PodDirectory | undefined): Part[] {
  const { store, metrics, log, now, proof } = s;
  const { policies } = s.options;
  const { kubeConfig, leaseNamespace, identity, statusWritesPerSecond } = cluster;
  const { nodes, podFacts, namespaceLabels } = sources;
  const parts: Part[] = [];
  const stores = { ...(cluster.watchBoundPods !== false && { requests: bound }), ...(directory && { directory }), ...(podFacts && { facts: podFacts }) };
  if (stores.requests || stores.directory) {
    let boundPods: Watching | undefined;
    parts.push({
      name: 'bound pods watch',
      start: async () => void (boundPods = await watchBoundPods(kubeConfig, stores, log)),
      close: () => boundPods?.stop(),
    });
  }
  parts.push({ name: 'node watch', start: () => nodes.start(), close: () => nodes.stop() });
  const shard = s.shard;
  const service = s.options.shard?.service;
  if (shard && service) {
    let members: Watching | undefined;
    parts.push({
      name: 'shard members watch',
      start: async () => void (members = await watchShardMembers({ kubeConfig, namespace: service.namespace, service: service.name, webhookPort: s.options.webhookPort, view: shard.view, log })),
      close: () => members?.stop(),
    });
  }
  const lease = new LeaderLease(kubeConfig, { namespace: leaseNamespace, name: 'oversell-gateway', identity, log });
  const writer = new StatusWriter({
    kubeConfig, nodes, store, policies, lease, metrics, log, proof, writesPerSecond: statusWritesPerSecond, now,
    notReady: s.notReady,
    identity,
    boundRequests: s.boundRequests,
    ...(shard && { lowers: (node: string) => shard.view.isFirstOwner(node) }),
  });
  // The writer listens for the lease before the lease runs: it hears the first leadership.
  let stopLeaving = () => {};
  parts.push({
    name: 'status writer',
    start: () => {
      writer.start();
      // A pod being deleted on a hot node: lower it now, before the pod is gone and its replacement is scheduled.
      stopLeaving = bound.onLeaving((node) => writer.check(node));
    },
    close: () => {
      stopLeaving();
      writer.stop();
    },
  });
  if (podFacts) {
    // The replica that lowers a node relieves it, and only an opted-in node.
    meterHarm({ pods: podFacts, nodes, policies, namespaceLabels, metrics, log, ledger: s.poolHarm, now });
    const actsFor = (node: string) => nodes.get(node) !== undefined && (shard ? shard.view.isFirstOwner(node) : lease.isLeader);
    const relief = new ReliefActor({ kubeConfig, store, pods: podFacts, policies, metrics, log, now, namespaceLabels, relieves: actsFor });
    const cpuHarm = new CpuHarmMeter({ pods: podFacts, namespaceLabels, metrics, actsFor, ledger: s.poolHarm, now });
    let unwatch = () => {};
    parts.push({
      name: 'relief and CPU harm meter',
      start: () => {
        unwatch = watchSamples({ store, policies, optedIn: (node) => nodes.get(node) !== undefined, consumers: [relief, cpuHarm] });
      },
      close: () => unwatch(),
    });
  }
  if (cluster.historySnapshotEveryMs) {
    const histories = new HistorySnapshots({
      kubeConfig, namespace: leaseNamespace, store, nodes, lease, log, everyMs: cluster.historySnapshotEveryMs,
      ...(shard && { holds: (node: string) => shard.view.isFirstOwner(node) }),
    });
    parts.push({ name: 'load history snapshots', start: () => histories.start(), close: () => histories.stop() });
  }
  parts.push({ name: 'leader lease', start: () => lease.start(), close: () => lease.stop() });
  return parts;
}
