// A node's pod report, kept across reports. An agent reports the same pods
// time after time with new figures; storing each report's new objects makes
// the main thread's heap promote, then drop, every node's pods every send
// interval (300,000 objects at 10,000 nodes of 30: most of its garbage
// collection, docs/performance-log.md 2026-12-06). When a report names the
// same pods and containers in the same order as the one kept, its figures are
// copied into the kept objects and the new ones die young.
import type { ContainerUsage__Output } from '../../proto/gen/oversell/v1/ContainerUsage.js';
import type { PodUsage__Output } from '../../proto/gen/oversell/v1/PodUsage.js';

const sameContainers = (a: ContainerUsage__Output[], b: ContainerUsage__Output[]): boolean =>
  a.length === b.length && a.every((c, i) => c.containerId === b[i]!.containerId);

/** Whether `next` names the same pods, QoS classes and containers as `kept`, in the same order. */
function samePods(kept: PodUsage__Output[], next: PodUsage__Output[]): boolean {
  if (kept.length !== next.length) return false;
  for (let i = 0; i < kept.length; i++) {
    const k = kept[i]!;
    const n = next[i]!;
    if (k.uid !== n.uid || k.qosClass !== n.qosClass || !sameContainers(k.containers, n.containers)) return false;
  }
  return true;
}

/**
 * The report to keep for a node: `kept` with `next`'s figures when both name
 * the same pods and containers, else `next` itself. Readers take a node's
 * pods synchronously (relief, the harm meter, the metrics API), so an update
 * in place is never seen half-done.
 */
export function keepPodReport(kept: PodUsage__Output[], next: PodUsage__Output[]): PodUsage__Output[] {
  if (!samePods(kept, next)) return next;
  for (let i = 0; i < kept.length; i++) {
    const k = kept[i]!;
    const n = next[i]!;
    k.cpuUsageMillicores = n.cpuUsageMillicores;
    k.memoryWorkingSetBytes = n.memoryWorkingSetBytes;
    k.cpuThrottledMicros = n.cpuThrottledMicros;
    for (let j = 0; j < k.containers.length; j++) {
      const kc = k.containers[j]!;
      const nc = n.containers[j]!;
      kc.cpuUsageMillicores = nc.cpuUsageMillicores;
      kc.memoryWorkingSetBytes = nc.memoryWorkingSetBytes;
    }
  }
  return kept;
}
