// What the pods a rise lets in are counted at: the load factor a typical node
// of the pool reaches at its predicted peak. A node's history has seen only
// the pods it holds, but the pods its next grant lets in come from the whole
// pool; where pods are unlike (VMs of 1 to 8 cores, some ten times busier
// than others), a node that happened to hold quiet ones promises room the
// next ones do not keep to. The budget counts them at the larger of the
// node's predicted peak and the pool's typical one (policy.ts).

import type { LoadHistoryView } from './load-history.js';
import type { Policy, PoolLoad } from './decision-types.js';

export type { PoolLoad } from './decision-types.js';

export interface PoolLoadNode {
  /** The node's policy (undefined: not opted in, or no policy selects it: not counted). */
  policy: Policy | undefined;
  history: LoadHistoryView | undefined;
}

/**
 * Per pool (policy name), the median of its nodes' predicted peak load
 * factors, at each resource's overShare. The median, not the mean: a node's
 * factors come from its agent's reports, and a minority of nodes cannot move
 * a median past the factors of the others.
 */
export function poolLoads(nodes: Iterable<PoolLoadNode>): Map<string, PoolLoad> {
  const factors = new Map<string, { cpu: number[]; memory: number[] }>();
  for (const { policy, history } of nodes) {
    if (!policy || !history || history.spanMs() < policy.history.minSpanMs) continue;
    const cpu = history.quantile('cpu', policy.cpu.riskBudget.overShare);
    const memory = history.quantile('memory', policy.memory.riskBudget.overShare);
    // A factor that is not a finite number says nothing of the pool.
    if (!(Number.isFinite(cpu) && Number.isFinite(memory) && cpu >= 0 && memory >= 0)) continue;
    let f = factors.get(policy.name);
    if (!f) factors.set(policy.name, (f = { cpu: [], memory: [] }));
    f.cpu.push(cpu);
    f.memory.push(memory);
  }
  const loads = new Map<string, PoolLoad>();
  for (const [pool, f] of factors) loads.set(pool, { cpu: median(f.cpu), memory: median(f.memory), nodes: f.cpu.length });
  return loads;
}

function median(xs: number[]): number {
  xs.sort((a, b) => a - b);
  const mid = xs.length >> 1;
  return xs.length % 2 === 1 ? xs[mid]! : (xs[mid - 1]! + xs[mid]!) / 2;
}
