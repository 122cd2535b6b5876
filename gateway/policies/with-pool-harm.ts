// The pools' policies with the harm their nodes took (decide/pool-harm.ts)
// and their typical predicted peak (decide/pool-load.ts): every reader that
// selects a node's policy (webhook, status writer, query API, CLI through the
// query API) gets the same entry, so the closed loop of the risk budget and
// the pool's peak are inputs of the one decision, not a second path.
import type { PolicyEntryWithHarm } from '../decide/node-decision.js';
import type { PoolHarmLedger } from '../decide/pool-harm.js';
import type { PoolLoad } from '../decide/pool-load.js';
import type { PolicySource } from './policy-source.js';

export function withPoolHarm(source: PolicySource, ledger: PoolHarmLedger, now: () => number, poolLoad: (pool: string) => PoolLoad | undefined = () => undefined): PolicySource {
  return {
    kind: source.kind,
    entries: () => source.entries(),
    select(labels): PolicyEntryWithHarm | undefined {
      const entry = source.select(labels);
      if (!entry) return entry;
      const harm = ledger.of(entry.name, now());
      const load = poolLoad(entry.name);
      // Attached once anything is known, so the query API can show the budget; a share of none decides nothing.
      const known = harm.memoryOverloads > 0 || harm.cpuObservedSeconds > 0;
      if (!known && !load) return entry;
      return { ...entry, ...(known && { harm }), ...(load && { poolLoad: load }) };
    },
    retainMs: () => source.retainMs(),
    notReady: () => source.notReady(),
    onChange: (listener) => source.onChange(listener),
    stop: () => source.stop(),
  };
}
