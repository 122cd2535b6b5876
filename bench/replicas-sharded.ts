// The replicas benchmark (bench/replicas.ts) with the gateway sharded
// (--shard-copies 2): the same load and the same kill, each agent streaming
// to its node's two owners. Needs the local control plane with its real node
// (the replicas listen on its bridge). Published as its own section.
import { runIfMain, type BenchResult } from './result.js';
import { run as runReplicas } from './replicas.js';

export const SHARD_COPIES = 2;

export function run(options: { quick?: boolean } = {}): Promise<BenchResult> {
  return runReplicas({ ...options, shardCopies: SHARD_COPIES });
}

runIfMain(import.meta.url, run);
