// Where the agent learns which pods are bound to its node:
//  - a watch of pods with spec.nodeName=<node> (in a cluster, as the kubelet sees them);
//  - a YAML/JSON file of pods (local mode without a cluster, e.g. the npm start demo);
//  - nothing: requests are reported as unknown, never as a made-up zero floor.
//    Also what the agent does when its ServiceAccount may not list pods: the
//    install grants it no pod read unless asked (the gateway's own pod watch,
//    on by default, does not use the agents' reports), so a 403 is a setting,
//    not a failure.
import { readFileSync } from 'node:fs';
import yaml from 'js-yaml';
import type { V1Pod } from '@kubernetes/client-node';
import { connectionOf, type KubeAccess } from '../kube/kube-access.js';
import { ListRefused, ListWatch } from '../../lib/list-watch.js';
import { WatchCache } from '../../lib/watch-cache.js';
import type { Requests__Output } from '../../proto/gen/oversell/v1/Requests.js';
import type { Logger } from '../../lib/log.js';
import { sumRequests } from '../../lib/pod-requests.js';

export interface PodSource {
  /** Current sums; cheap (cached), called on every sample. */
  requests(): Requests__Output;
  stop(): Promise<void>;
}

const UNKNOWN: Requests__Output = { cpuMillicores: 0, memoryBytes: 0, podCount: 0, known: false };

export function noPodSource(): PodSource {
  return { requests: () => UNKNOWN, stop: async () => {} };
}

function toRequests(pods: Iterable<V1Pod>, log: Logger): Requests__Output {
  const sum = sumRequests(pods);
  for (const problem of sum.invalid) log.warn({ problem }, 'pod skipped in the requests sum: invalid quantity');
  return { cpuMillicores: sum.cpuMillicores, memoryBytes: sum.memoryBytes, podCount: sum.podCount, known: true };
}

/** Pods from a file: a single Pod, a List, or several YAML documents. */
export function filePodSource(path: string, log: Logger): PodSource {
  let docs: unknown[];
  try {
    docs = yaml.loadAll(readFileSync(path, 'utf8'));
  } catch (err) {
    throw new Error(`cannot load pods from ${path}: ${(err as Error).message}`);
  }
  const pods: V1Pod[] = [];
  for (const doc of docs) {
    const d = doc as { kind?: string; items?: V1Pod[] } | null;
    if (d?.kind === 'Pod') pods.push(d as V1Pod);
    else if (d?.kind?.endsWith('List')) pods.push(...(d.items ?? []).filter((i) => i.kind === undefined || i.kind === 'Pod'));
  }
  const requests = toRequests(pods, log);
  log.info({ path, pods: requests.podCount, cpuMillicores: requests.cpuMillicores, memoryBytes: requests.memoryBytes }, 'pods bound to this node read from file');
  return { requests: () => requests, stop: async () => {} };
}

/** Watches the pods bound to nodeName; sums are recomputed on each change, not on each sample. */
export async function watchPodSource(access: KubeAccess, nodeName: string, log: Logger): Promise<PodSource> {
  let current = UNKNOWN;
  const pods = new WatchCache<V1Pod>(() => (current = toRequests(pods.list(), log)), (p) => p.metadata?.uid);
  const watch = new ListWatch<V1Pod>({
    connection: connectionOf(access),
    path: '/api/v1/pods',
    fieldSelector: `spec.nodeName=${nodeName}`,
    decode: (pod) => pod,
    target: pods,
    what: 'pods bound to this node',
    log,
    userAgent: 'oversell-agent',
  });
  try {
    await watch.start();
  } catch (err) {
    if (err instanceof ListRefused && err.status === 403) {
      // Once, at start: nothing retries, so nothing repeats it.
      log.info(
        { node: nodeName },
        'no permission to list pods: requests of bound pods are reported as unknown (the gateway\'s own pod watch, --watch-bound-pods on by default, does not need them); with the gateway\'s watch off, grant the agent pod read (docs/install.md) and restart the agents',
      );
      return noPodSource();
    }
    throw new Error(`cannot list the pods of node ${nodeName}: ${(err as Error).message}; check the agent's RBAC (get/list/watch pods) and --kubeconfig`);
  }
  log.info({ node: nodeName, pods: current.podCount }, 'watching pods bound to this node');
  return {
    requests: () => (watch.synced ? current : UNKNOWN),
    stop: async () => watch.stop(),
  };
}
