// Every pod bound to a node, from the API server in one list-watch (lib/list-watch.ts):
// a paginated list, then a watch from its resourceVersion. Two stores read it:
// BoundRequests (each pod's node and requests, for the decision) and, with the
// metrics API, the PodDirectory (each pod's names and container ids). One watch
// for both: two would make the API server send every pod twice. Each pod is
// reduced on arrival, so neither a page nor the watch keeps whole pod objects.
// The views survive a broken watch: the last known state stays in force, the
// watch resumes from where it was, and only a watch that fell too far behind
// (410 Gone) lists again.
import type { KubeConfig, V1Pod } from '@kubernetes/client-node';
import type { BackoffOptions } from '../../lib/backoff.js';
import { kubeConfigConnection } from '../../lib/kube-connection.js';
import { BACKOFF, ListWatch, type KubeConnection, type Watching } from '../../lib/list-watch.js';
import type { Logger } from '../../lib/log.js';
import { admittedByKubelet, boundAtMs, holdsResources, podRequests } from '../../lib/pod-requests.js';
import type { BoundRequests } from '../store/bound-requests.js';
import { directoryPod, type DirectoryPod, type PodDirectory } from '../store/pod-directory.js';
import { podFacts, type PodFacts, type PodFactsStore } from '../store/pod-facts.js';

const BOUND = 'spec.nodeName!=';
const PAGE = 500;

type Requests = { node: string; cpuMillicores: number; memoryBytes: number; holds: boolean; boundAtMs: number; admitted: boolean; leaving: boolean };
/** What the stores keep of one pod: its requests, and its names while it may have usage (not Succeeded or Failed: its cgroups are gone). */
type Reduced = { uid: string; requests?: Requests; named?: DirectoryPod; facts?: PodFacts };

/** Where the bound pods go: any store may be left out. */
export interface BoundPodStores {
  requests?: BoundRequests;
  directory?: PodDirectory;
  /** Relief's view (act/relief-actor.ts): pods that may hold memory, with their tier's facts. */
  facts?: PodFactsStore;
}

/** A pod's node and requests. Requests that do not parse count as nothing. */
function requestsOf(pod: V1Pod, node: string, log: Logger): Requests {
  let cpuMillicores = 0;
  let memoryBytes = 0;
  try {
    const r = podRequests(pod);
    cpuMillicores = Number(r.cpuMillicores);
    memoryBytes = Number(r.memoryBytes);
  } catch (err) {
    log.warn({ pod: `${pod.metadata?.namespace}/${pod.metadata?.name}`, err: (err as Error).message }, 'a bound pod\'s requests do not parse; counted as none');
  }
  return { node, cpuMillicores, memoryBytes, holds: holdsResources(pod), boundAtMs: boundAtMs(pod), admitted: admittedByKubelet(pod), leaving: pod.metadata?.deletionTimestamp != null };
}

function reduce(pod: V1Pod, stores: BoundPodStores, log: Logger): Reduced | undefined {
  const uid = pod.metadata?.uid;
  const node = pod.spec?.nodeName;
  if (!uid || !node) return undefined;
  const finished = pod.status?.phase === 'Succeeded' || pod.status?.phase === 'Failed';
  const named = stores.directory && !finished ? directoryPod(pod) : undefined;
  // Finished pods too: an eviction or an OOM kill shows as the pod finishing.
  const facts = stores.facts ? podFacts(pod, log) : undefined;
  return { uid, ...(stores.requests && { requests: requestsOf(pod, node, log) }), ...(named && { named }), ...(facts && { facts }) };
}

export async function watchBoundPods(source: KubeConfig | KubeConnection, stores: BoundPodStores, log: Logger, backoff?: BackoffOptions): Promise<Watching> {
  const { requests, directory, facts } = stores;
  const watch = new ListWatch<V1Pod, Reduced>({
    connection: 'server' in source ? source : kubeConfigConnection(source),
    path: '/api/v1/pods',
    fieldSelector: BOUND,
    pageSize: PAGE,
    decode: (pod) => reduce(pod, stores, log),
    target: {
      replace: (pods) => {
        requests?.replaceAll(pods.flatMap((p) => (p.requests?.holds ? [{ uid: p.uid, ...p.requests }] : [])));
        directory?.replaceAll(pods.flatMap((p) => (p.named ? [p.named] : [])));
        facts?.replaceAll(pods.flatMap((p) => (p.facts ? [p.facts] : [])));
        log.info({ pods: pods.length, ...(requests && { holdingResources: requests.podCount }), ...(directory && { named: directory.size }) }, 'bound pods listed: bound requests now come from the API server');
      },
      apply: (type, p) => {
        if (requests) {
          if (type === 'DELETED' || !p.requests) requests.delete(p.uid);
          else requests.set(p.uid, p.requests.node, p.requests.cpuMillicores, p.requests.memoryBytes, p.requests.holds, p.requests.boundAtMs, p.requests.admitted, p.requests.leaving);
        }
        if (directory) {
          // A pod that finished stays bound but has no usage any more: it leaves the directory as if deleted.
          if (type === 'DELETED' || !p.named) directory.delete(p.uid);
          else directory.set(p.named);
        }
        if (facts) {
          if (type === 'DELETED' || !p.facts) facts.delete(p.uid);
          else facts.set(p.facts);
        }
      },
    },
    what: 'bound pods',
    log,
    backoff: backoff ?? BACKOFF.replicas,
  });
  try {
    await watch.start();
  } catch (err) {
    throw new Error(`cannot list the pods bound to nodes: ${(err as Error).message}; the gateway needs list and watch on pods (deploy/base/rbac.yaml)`);
  }
  return { stop: async () => watch.stop() };
}
