// The pools' policies with the harm their nodes took (decide/pool-harm.ts):
// every reader that selects a node's policy (webhook, status writer, query
// API, CLI through the query API) gets the same entry, so the closed loop of
// the risk budget is one input of the one decision, not a second path.
import type { PolicyEntryWithHarm } from '../decide/node-decision.js';
import type { PoolHarmLedger } from '../decide/pool-harm.js';
import type { PolicySource } from './policy-source.js';

export function withPoolHarm(source: PolicySource, ledger: PoolHarmLedger, now: () => number): PolicySource {
  return {
    kind: source.kind,
    entries: () => source.entries(),
    select(labels): PolicyEntryWithHarm | undefined {
      const entry = source.select(labels);
      if (!entry) return entry;
      const harm = ledger.of(entry.name, now());
      // Attached once anything is known, so the query API can show the budget; a share of none decides nothing.
      return harm.memoryOverloads > 0 || harm.cpuObservedSeconds > 0 ? { ...entry, harm } : entry;
    },
    retainMs: () => source.retainMs(),
    notReady: () => source.notReady(),
    onChange: (listener) => source.onChange(listener),
    stop: () => source.stop(),
  };
}
