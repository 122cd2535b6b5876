// Feeds BoundRequests from the API server: every pod bound to a node, as a
// paginated list and then a watch from its resourceVersion. Each pod is
// reduced to its node and requests on arrival, so neither a page nor the
// watch keeps whole pod objects. The view survives a broken watch: the last
// known sums stay in force, the watch resumes from where it was, and only a
// watch that fell too far behind (410 Gone) lists again.
import { CoreV1Api, Watch, type KubeConfig, type V1Pod } from '@kubernetes/client-node';
import type { Logger } from '../../lib/log.js';
import { admittedByKubelet, boundAtMs, holdsResources, podRequests } from '../../lib/pod-requests.js';
import { RETRY_AFTER_MS, type Watching } from '../../lib/keep-watching.js';
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

export async function watchBoundPods(kubeConfig: KubeConfig, target: BoundRequests, log: Logger, retryAfterMs = RETRY_AFTER_MS): Promise<Watching> {
  const core = kubeConfig.makeApiClient(CoreV1Api);
  const watch = new Watch(kubeConfig);
  let resourceVersion = '';
  let stopped = false;
  let abort: AbortController | undefined;
  let retry: NodeJS.Timeout | undefined;

  const list = async () => {
    const pods: Reduced[] = [];
    let next: string | undefined;
    do {
      const page = await core.listPodForAllNamespaces({ fieldSelector: BOUND, limit: PAGE, ...(next && { _continue: next }) });
      for (const pod of page.items) {
        const r = reduce(pod, log);
        if (r?.holds) pods.push(r);
      }
      next = page.metadata?._continue || undefined;
      resourceVersion = page.metadata?.resourceVersion ?? resourceVersion;
    } while (next);
    target.replaceAll(pods);
    log.info({ pods: target.podCount }, 'bound pods listed: bound requests now come from the API server');
  };

  const again = (why: string, relist: boolean) => {
    if (stopped || retry) return;
    log.warn({ why, retryInMs: retryAfterMs }, 'bound pods watch interrupted; the last known requests stay in force');
    retry = setTimeout(() => {
      retry = undefined;
      (relist ? list() : Promise.resolve()).then(start, (err: unknown) => again(`listing pods failed: ${(err as Error).message}`, true));
    }, retryAfterMs);
    retry.unref();
  };

  const start = async (): Promise<void> => {
    if (stopped) return;
    let gone = false;
    abort = await watch.watch(
      '/api/v1/pods',
      { fieldSelector: BOUND, allowWatchBookmarks: true, resourceVersion },
      (phase: string, obj: V1Pod & { code?: number; message?: string }) => {
        if (phase === 'ERROR') {
          if (obj.code === 410) gone = true;
          return;
        }
        if (obj.metadata?.resourceVersion) resourceVersion = obj.metadata.resourceVersion;
        if (phase === 'BOOKMARK') return;
        const r = reduce(obj, log);
        if (!r) return;
        if (phase === 'DELETED') target.delete(r.uid);
        else target.set(r.uid, r.node, r.cpuMillicores, r.memoryBytes, r.holds, r.boundAtMs, r.admitted);
      },
      (err: unknown) => {
        if (stopped) return;
        // The API server ends every watch after a while: resume at once from where it was.
        if (!err && !gone) void start().catch((e: unknown) => again((e as Error).message, false));
        else again(gone ? 'resourceVersion too old' : String((err as Error)?.message ?? err), gone);
      },
    ).catch((err: unknown) => {
      again(`cannot watch pods: ${(err as Error).message}`, false);
      return undefined;
    });
  };

  try {
    await list();
  } catch (err) {
    throw new Error(`cannot list the pods bound to nodes: ${(err as Error).message}; the gateway needs list and watch on pods (deploy/base/rbac.yaml)`);
  }
  await start();
  return {
    async stop() {
      stopped = true;
      clearTimeout(retry);
      abort?.abort();
    },
  };
}
