// Feeds BoundRequests from the API server: every pod bound to a node, as a
// paginated list and then a watch from its resourceVersion (lib/list-watch.ts).
// Each pod is reduced to its node and requests on arrival, so neither a page
// nor the watch keeps whole pod objects. The view survives a broken watch: the
// last known sums stay in force, the watch resumes from where it was, and only
// a watch that fell too far behind (410 Gone) lists again.
import type { KubeConfig, V1Pod } from '@kubernetes/client-node';
import type { BackoffOptions } from '../../lib/backoff.js';
import { kubeConfigConnection } from '../../lib/kube-connection.js';
import { BACKOFF, ListWatch, type Watching } from '../../lib/list-watch.js';
import type { Logger } from '../../lib/log.js';
import { admittedByKubelet, boundAtMs, holdsResources, podRequests } from '../../lib/pod-requests.js';
import type { BoundRequests } from '../store/bound-requests.js';

const BOUND = 'spec.nodeName!=';
const PAGE = 500;

type Reduced = { uid: string; node: string; cpuMillicores: number; memoryBytes: number; holds: boolean; boundAtMs: number; admitted: boolean };

/** A pod as three numbers; undefined when it names no node or has no uid. Requests that do not parse count as nothing. */
function reduce(pod: V1Pod, log: Logger): Reduced | undefined {
  const uid = pod.metadata?.uid;
  const node = pod.spec?.nodeName;
  if (!uid || !node) return undefined;
  let cpuMillicores = 0;
  let memoryBytes = 0;
  try {
    const r = podRequests(pod);
    cpuMillicores = Number(r.cpuMillicores);
    memoryBytes = Number(r.memoryBytes);
  } catch (err) {
    log.warn({ pod: `${pod.metadata?.namespace}/${pod.metadata?.name}`, err: (err as Error).message }, 'a bound pod\'s requests do not parse; counted as none');
  }
  return { uid, node, cpuMillicores, memoryBytes, holds: holdsResources(pod), boundAtMs: boundAtMs(pod), admitted: admittedByKubelet(pod) };
}

export async function watchBoundPods(kubeConfig: KubeConfig, target: BoundRequests, log: Logger, backoff?: BackoffOptions): Promise<Watching> {
  const watch = new ListWatch<V1Pod, Reduced>({
    connection: kubeConfigConnection(kubeConfig),
    path: '/api/v1/pods',
    fieldSelector: BOUND,
    pageSize: PAGE,
    decode: (pod) => reduce(pod, log),
    target: {
      replace: (pods) => {
        target.replaceAll(pods.filter((p) => p.holds));
        log.info({ pods: target.podCount }, 'bound pods listed: bound requests now come from the API server');
      },
      apply: (type, r) => {
        if (type === 'DELETED') target.delete(r.uid);
        else target.set(r.uid, r.node, r.cpuMillicores, r.memoryBytes, r.holds, r.boundAtMs, r.admitted);
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
