// Feeds the PodDirectory from the API server: one list-watch of the pods
// bound to nodes and not finished (lib/list-watch.ts: one retry policy,
// the last known view kept while the watch is broken).
import type { KubeConfig, V1Pod } from '@kubernetes/client-node';
import type { BackoffOptions } from '../../lib/backoff.js';
import { kubeConfigConnection } from '../../lib/kube-connection.js';
import { BACKOFF, ListWatch, type KubeConnection, type Watching } from '../../lib/list-watch.js';
import type { Logger } from '../../lib/log.js';
import { directoryPod, type DirectoryPod, type PodDirectory } from './pod-directory.js';

/** Pods that may have usage: bound, and neither Succeeded nor Failed (their cgroups are gone). */
const RUNNING_SOMEWHERE = 'spec.nodeName!=,status.phase!=Succeeded,status.phase!=Failed';
const PAGE = 500;

export async function watchPodDirectory(source: KubeConfig | KubeConnection, directory: PodDirectory, log: Logger, backoff?: BackoffOptions): Promise<Watching> {
  const connection = 'server' in source ? source : kubeConfigConnection(source);
  const watch = new ListWatch<V1Pod, DirectoryPod | { uid: string; gone: true }>({
    connection,
    path: '/api/v1/pods',
    fieldSelector: RUNNING_SOMEWHERE,
    pageSize: PAGE,
    // A pod that stops matching (finished) arrives as DELETED with its uid, which is all delete() needs.
    decode: (pod) => directoryPod(pod) ?? (pod.metadata?.uid ? { uid: pod.metadata.uid, gone: true } : undefined),
    target: {
      replace: (pods) => {
        directory.replaceAll(pods.filter((p): p is DirectoryPod => !('gone' in p)));
        log.info({ pods: directory.size }, 'metrics API: pods listed; their containers have names now');
      },
      apply: (type, p) => {
        if (type === 'DELETED' || 'gone' in p) directory.delete(p.uid);
        else directory.set(p);
      },
    },
    what: 'pods for the metrics API',
    log,
    backoff: backoff ?? BACKOFF.replicas,
  });
  try {
    await watch.start();
  } catch (err) {
    throw new Error(`the metrics API cannot list pods: ${(err as Error).message}; the gateway needs list and watch on pods (deploy/base/rbac.yaml)`);
  }
  return { stop: async () => watch.stop() };
}
