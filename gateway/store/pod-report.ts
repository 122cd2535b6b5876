// A node's pod report, kept across reports. An agent reports the same pods
// time after time with new figures; storing each report's new objects makes
// the main thread's heap promote, then drop, every node's pods every send
// interval (300,000 objects at 10,000 nodes of 30: most of its garbage
// collection, docs/performance-log.md 2026-12-06). When a report names the
// same pods and containers in the same order as the one kept, its figures are
// copied into the kept objects and no new ones are made. The record keeps the
// names' key, not the names (6 KB a node of 30 pods).
import type { PodUsage__Output } from '../../proto/gen/oversell/v1/PodUsage.js';
import { copyPodFigures, podsFrom, type PodFigures } from '../../wire/pod-figures.js';

/** No key of names: keys are never negative. */
export const NO_PODS_KEY = -1;

export interface KeptPods {
  pods: PodUsage__Output[];
  /** The key of the names (wire/pod-figures.ts) the pods were made from; NO_PODS_KEY with none. */
  podNamesKey: number;
}

/**
 * Keeps `next` in `kept`: its figures in the kept objects when both name the
 * same pods, else new objects. Readers take a node's pods synchronously
 * (relief, the harm meter, the metrics API), so an update in place is never
 * seen half-done. False when `next` came without names (its agent left them
 * out) and the kept pods are not the ones it meant: nothing is changed, and
 * the agent's next named report (at most 15 reports on) is kept again.
 */
export function keepPodReport(kept: KeptPods, next: PodFigures): boolean {
  if (next.key === kept.podNamesKey && copyPodFigures(next.figures, kept.pods)) return true;
  if (next.names === undefined) return false;
  kept.pods = podsFrom({ names: next.names, figures: next.figures });
  kept.podNamesKey = next.key;
  return true;
}
