// The requests a pod holds on its node, computed the way the scheduler and the
// kubelet do (k8s.io/component-helpers/resource.PodRequests): containers add up,
// init containers count at their peak, restartable (sidecar) init containers stay
// for the pod's life, pod overhead is added, and pod-level resources win when set.
import type { V1Container, V1Pod } from '@kubernetes/client-node';
import { parseBytes, parseMilli } from './quantity.js';

export interface PodRequestTotals {
  cpuMillicores: bigint;
  memoryBytes: bigint;
}

interface Pair {
  cpu: bigint;
  mem: bigint;
}

const max = (a: bigint, b: bigint) => (a > b ? a : b);

function requestsOf(requests: Record<string, string> | undefined, where: string): Pair {
  return {
    cpu: requests?.cpu !== undefined ? parseMilli(requests.cpu, `${where}.cpu`) : 0n,
    mem: requests?.memory !== undefined ? parseBytes(requests.memory, `${where}.memory`) : 0n,
  };
}

function containerRequests(c: V1Container): Pair {
  return requestsOf(c.resources?.requests as Record<string, string> | undefined, `container ${c.name} requests`);
}

/** Throws QuantityError when a request is not a valid quantity (the API server would not have stored it). */
export function podRequests(pod: V1Pod): PodRequestTotals {
  const spec = pod.spec;
  if (!spec) return { cpuMillicores: 0n, memoryBytes: 0n };
  const podLevel = spec.resources?.requests as Record<string, string> | undefined;
  let total: Pair;
  if (podLevel && (podLevel.cpu !== undefined || podLevel.memory !== undefined)) {
    total = requestsOf(podLevel, 'pod requests');
  } else {
    total = { cpu: 0n, mem: 0n };
    for (const c of spec.containers ?? []) {
      const r = containerRequests(c);
      total.cpu += r.cpu;
      total.mem += r.mem;
    }
    const sidecars: Pair = { cpu: 0n, mem: 0n };
    const initPeak: Pair = { cpu: 0n, mem: 0n };
    for (const c of spec.initContainers ?? []) {
      const r = containerRequests(c);
      let during: Pair;
      if (c.restartPolicy === 'Always') {
        total.cpu += r.cpu;
        total.mem += r.mem;
        sidecars.cpu += r.cpu;
        sidecars.mem += r.mem;
        during = { ...sidecars };
      } else {
        during = { cpu: r.cpu + sidecars.cpu, mem: r.mem + sidecars.mem };
      }
      initPeak.cpu = max(initPeak.cpu, during.cpu);
      initPeak.mem = max(initPeak.mem, during.mem);
    }
    total = { cpu: max(total.cpu, initPeak.cpu), mem: max(total.mem, initPeak.mem) };
  }
  const overhead = requestsOf(spec.overhead as Record<string, string> | undefined, 'pod overhead');
  return { cpuMillicores: total.cpu + overhead.cpu, memoryBytes: total.mem + overhead.mem };
}

/** Pods that hold resources on the node: bound and not finished. */
export function holdsResources(pod: V1Pod): boolean {
  const phase = pod.status?.phase;
  return phase !== 'Succeeded' && phase !== 'Failed';
}

/**
 * The kubelet has accepted the pod: it is running, or the kubelet has written a
 * container status for it (which it does only after its admission check).
 * Before that a pod bound with spec.nodeName is only a claim: the kubelet may
 * still refuse it (OutOfcpu, OutOfmemory). Pod status is written by the
 * node's kubelet (pods/status), not by the pod's author.
 */
export function admittedByKubelet(pod: V1Pod): boolean {
  const s = pod.status;
  return s?.phase === 'Running' || (s?.containerStatuses?.length ?? 0) > 0 || (s?.initContainerStatuses?.length ?? 0) > 0;
}

/**
 * When the pod was bound to its node, in ms since the epoch (API server clock):
 * its PodScheduled condition, or its creation for a pod created with a nodeName;
 * 0 when neither is known.
 */
export function boundAtMs(pod: V1Pod): number {
  const scheduled = pod.status?.conditions?.find((c) => c.type === 'PodScheduled' && c.status === 'True')?.lastTransitionTime;
  const at = scheduled ?? pod.metadata?.creationTimestamp;
  const ms = at === undefined ? NaN : new Date(at).getTime();
  return Number.isFinite(ms) ? ms : 0;
}

export interface RequestsSum {
  cpuMillicores: number;
  memoryBytes: number;
  podCount: number;
  /** Pods skipped because a request did not parse; named in the agent's log. */
  invalid: string[];
}

export function sumRequests(pods: Iterable<V1Pod>): RequestsSum {
  let cpu = 0n;
  let mem = 0n;
  let podCount = 0;
  const invalid: string[] = [];
  for (const pod of pods) {
    if (!holdsResources(pod)) continue;
    try {
      const r = podRequests(pod);
      cpu += r.cpuMillicores;
      mem += r.memoryBytes;
      podCount += 1;
    } catch (err) {
      invalid.push(`${pod.metadata?.namespace}/${pod.metadata?.name}: ${(err as Error).message}`);
    }
  }
  return { cpuMillicores: Number(cpu), memoryBytes: Number(mem), podCount, invalid };
}
