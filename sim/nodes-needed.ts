// The fewest nodes a policy needs for the same workload with no pod left
// waiting: what a cluster autoscaler would have to buy. A binary search over
// the node count, each probe a run of the policy (ended at the first step a
// pod waits); it takes log2 of the range in runs, about 8 for 100 nodes.

export interface NodesNeeded {
  /** The fewest nodes with no pod waiting; undefined when even `max` leaves pods waiting. */
  nodes: number | undefined;
  /** Node counts run, in order. */
  probes: number[];
}

/**
 * fits(k): whether k nodes leave no pod waiting. Assumed monotone (more nodes never
 * leave more pods waiting), which the tests check; the search starts at `start`
 * and doubles up to `max` if that is not enough.
 */
export function nodesNeeded(fits: (nodes: number) => boolean, start: number, max: number): NodesNeeded {
  const probes: number[] = [];
  const ok = (k: number) => {
    probes.push(k);
    return fits(k);
  };
  // lo never fits (0 nodes place nothing), hi fits.
  let lo = 0;
  let hi = Math.max(1, Math.min(start, max));
  while (!ok(hi)) {
    if (hi >= max) return { nodes: undefined, probes };
    lo = hi;
    hi = Math.min(max, hi * 2);
  }
  while (hi - lo > 1) {
    const mid = Math.floor((lo + hi) / 2);
    if (ok(mid)) hi = mid;
    else lo = mid;
  }
  return { nodes: hi, probes };
}
