// A pod's QoS class and whether it holds exclusive CPUs, from its spec, the
// way the kubelet computes them (k8s.io/kubernetes/pkg/apis/core/helper/qos):
// at pod creation (a mutating webhook) status.qosClass is not set yet.
import type { V1Container, V1Pod } from '@kubernetes/client-node';
import { parseBytes, parseMilli } from './quantity.js';

export type QosClass = 'Guaranteed' | 'Burstable' | 'BestEffort';

type Resources = Record<string, string> | undefined;
const amount = (r: Resources, name: 'cpu' | 'memory', where: string): bigint | undefined =>
  r?.[name] === undefined ? undefined : name === 'cpu' ? parseMilli(r[name], `${where}.cpu`) : parseBytes(r[name], `${where}.memory`);

function containersOf(pod: V1Pod): V1Container[] {
  return [...(pod.spec?.initContainers ?? []), ...(pod.spec?.containers ?? [])];
}

/** Throws QuantityError on a quantity the API server would not have stored. */
export function qosClass(pod: V1Pod): QosClass {
  let anyRequestOrLimit = false;
  let guaranteed = true;
  const podLevel = pod.spec?.resources;
  const sets: Array<{ requests: Resources; limits: Resources; where: string }> =
    podLevel && (podLevel.requests || podLevel.limits)
      ? [{ requests: podLevel.requests as Resources, limits: podLevel.limits as Resources, where: 'pod' }]
      : containersOf(pod).map((c) => ({ requests: c.resources?.requests as Resources, limits: c.resources?.limits as Resources, where: `container ${c.name}` }));
  for (const { requests, limits, where } of sets) {
    for (const name of ['cpu', 'memory'] as const) {
      const req = amount(requests, name, `${where} requests`);
      const lim = amount(limits, name, `${where} limits`);
      if ((req !== undefined && req > 0n) || (lim !== undefined && lim > 0n)) anyRequestOrLimit = true;
      // A request left out defaults to the limit; Guaranteed needs both resources limited, requests equal to limits.
      if (lim === undefined || (req !== undefined && req !== lim)) guaranteed = false;
    }
  }
  if (!anyRequestOrLimit) return 'BestEffort';
  return guaranteed ? 'Guaranteed' : 'Burstable';
}

/**
 * The CPUs the static CPU manager gives the pod for its own: a Guaranteed
 * pod's containers whose CPU request is a whole number of cores, summed; 0 for
 * any other pod (they share the pool).
 */
export function exclusiveCpus(pod: V1Pod): number {
  if (qosClass(pod) !== 'Guaranteed') return 0;
  let cores = 0;
  for (const c of pod.spec?.containers ?? []) {
    const r = c.resources as { requests?: Resources; limits?: Resources } | undefined;
    // A CPU request left out defaults to the limit.
    const millis = amount(r?.requests, 'cpu', `container ${c.name} requests`) ?? amount(r?.limits, 'cpu', `container ${c.name} limits`) ?? 0n;
    if (millis > 0n && millis % 1000n === 0n) cores += Number(millis / 1000n);
  }
  return cores;
}
