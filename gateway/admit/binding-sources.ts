// What the protected-room check (binding-review.ts) reads, from what every
// replica already holds with a cluster: the opted-in nodes' objects (their
// verified raw allocatable and labels), the policies, the pods bound to each
// node (their tiers' facts and requests), namespaces' labels; and, for the pod
// being bound, one read from the API server (pending pods are not watched).
import { CoreV1Api, type KubeConfig, type V1Pod } from '@kubernetes/client-node';
import type { Logger } from '../../lib/log.js';
import { OncePer } from '../../lib/once-per.js';
import { exclusiveCpus, qosClass } from '../../lib/pod-qos.js';
import { podRequests } from '../../lib/pod-requests.js';
import { parseBytes, parseMilli } from '../../lib/quantity.js';
import type { GrantProof } from '../decide/grant-proof.js';
import { observeStoredNode } from '../decide/node-decision.js';
import { NO_ROOM, addRoom } from '../decide/protected-room.js';
import type { NodeCache } from '../ingest/node-watch.js';
import { podTier, type NamespaceLabels } from '../policies/namespace-labels.js';
import type { PolicySource } from '../policies/policy-source.js';
import type { PodFactsStore } from '../store/pod-facts.js';
import { RoomReservations } from '../store/room-reservations.js';
import type { BindingNode, BindingPod, BindingReviewDeps } from './binding-review.js';

export interface BindingSources {
  kubeConfig: KubeConfig;
  nodes: NodeCache;
  proof: GrantProof;
  policies: PolicySource;
  pods: PodFactsStore;
  namespaceLabels: NamespaceLabels;
  log: Logger;
}

/**
 * The pod's tier facts and requests; throws QuantityError on a quantity the API server would not have stored.
 * A pod being created has no uid yet: with `created`, it is named by namespace and name instead.
 */
export function bindingPod(pod: V1Pod, created = false): BindingPod | undefined {
  const uid = pod.metadata?.uid || (created ? `${pod.metadata?.namespace ?? 'default'}/${pod.metadata?.name ?? pod.metadata?.generateName ?? ''}` : undefined);
  if (!uid) return undefined;
  const r = podRequests(pod);
  return {
    uid,
    namespace: pod.metadata?.namespace ?? 'default',
    requests: { cpuMillicores: Number(r.cpuMillicores), memoryBytes: Number(r.memoryBytes) },
    qos: qosClass(pod),
    exclusiveCpus: exclusiveCpus(pod),
    priority: pod.spec?.priority ?? 0,
  };
}

export function bindingDeps(s: BindingSources): BindingReviewDeps {
  const core = s.kubeConfig.makeApiClient(CoreV1Api);
  const unreadable = new OncePer(60_000);
  return {
    node(name): BindingNode | undefined {
      const node = s.nodes.get(name);
      const status = node?.status;
      if (!node || !status?.allocatable) return undefined;
      const observed = observeStoredNode(name, node.metadata ?? {}, { allocatable: status.allocatable, capacity: status.capacity }, s.proof);
      const policy = observed.raw && s.policies.select(observed.labels)?.policy;
      if (!observed.raw || !policy) return undefined;
      let inflated: boolean;
      try {
        inflated = parseMilli(status.allocatable.cpu ?? '0', 'allocatable.cpu') > observed.raw.cpuMillicores || parseBytes(status.allocatable.memory ?? '0', 'allocatable.memory') > observed.raw.memoryBytes;
      } catch {
        return undefined;
      }
      return { raw: { cpuMillicores: Number(observed.raw.cpuMillicores), memoryBytes: Number(observed.raw.memoryBytes) }, inflated, protect: policy.protect };
    },
    async pod(namespace, name) {
      try {
        return bindingPod(await core.readNamespacedPod({ namespace, name }));
      } catch (err) {
        if (unreadable.take('pod')) s.log.warn({ pod: `${namespace}/${name}`, err: (err as Error).message }, 'cannot read a pod being bound: its binding passes unchecked (the gateway needs get on pods, deploy/base/rbac.yaml)');
        return undefined;
      }
    },
    podOf(object, namespace) {
      try {
        const pod = object as V1Pod;
        return bindingPod({ ...pod, metadata: { ...pod.metadata, namespace } }, true);
      } catch {
        // A quantity the API server will refuse anyway: its own validation says why.
        return undefined;
      }
    },
    tier: (pod, protect) => podTier(pod, protect, s.namespaceLabels),
    async protectedBound(node, protect) {
      if (!s.pods.synced) return undefined;
      const on = s.pods.on(node);
      let room = NO_ROOM;
      for (const p of on) {
        if ((await podTier(p, protect, s.namespaceLabels)).tier === 'protected') room = addRoom(room, { cpuMillicores: p.cpuRequestMillicores, memoryBytes: p.memoryRequestBytes });
      }
      const uids = new Set(on.map((p) => p.uid));
      return { room, has: (uid) => uids.has(uid) };
    },
    reservations: new RoomReservations(),
  };
}
