// A sharded gateway's query API: a node's usage is on its owners, so a
// replica answers from what it holds and from what the other replicas hold.
// This is what the query service needs from them (gateway/shard/peer-queries.ts
// asks them), and how their answers are put together: pure, tested alone.
import type { NodeEvent__Output } from '../../proto/gen/oversell/v1/NodeEvent.js';
import type { NodeStatus } from '../../proto/gen/oversell/v1/NodeStatus.js';
import type { NodeSummaries__Output } from '../../proto/gen/oversell/v1/NodeSummaries.js';
import type { NodeFilterRequest } from './local-nodes.js';

/** What the other replicas answered, and which did not (as "address: why"). */
export interface FromPeers<T> {
  answers: T[];
  failed: string[];
}

export interface PeerNodes {
  /** The replicas a node's agent streams to, other than this one ("ip:port"), for messages. */
  owners(node: string): string[];
  /** The node as its owners hold it: the first owner's answer that has usage. */
  get(node: string): Promise<FromPeers<NodeStatus>>;
  /** Every other replica's nodes with usage that the request keeps. */
  list(request: NodeFilterRequest): Promise<FromPeers<NodeStatus[]>>;
  /** The same, as summary rows. */
  summaries(request: NodeFilterRequest): Promise<FromPeers<NodeSummaries__Output>>;
  /** Whether this replica streams the node in a watch: each node comes from one replica. */
  streams(node: string): boolean;
  /** Whether this replica streams the node in a watch in place of the replicas it cannot reach (`unreachable`, as PeerWatchHandlers.standIn names them). */
  standsIn(node: string, unreachable: ReadonlySet<string>): boolean;
  /** Calls `listener` when the replicas change (and with them which nodes each streams); returns how to stop. */
  onMembersChange(listener: () => void): () => void;
  /** A watch at every other replica, each streaming its own nodes; opened at replicas listed later too. */
  watch(request: NodeFilterRequest, handlers: PeerWatchHandlers): PeerWatch;
}

export interface PeerWatchHandlers {
  /** An event of replica `from`'s stream, as it sent it (its SNAPSHOTs, SYNCED, then changes). */
  event(from: string, event: NodeEvent__Output): void;
  /**
   * Replica `from`'s stream could not open, ended, or sent nothing for the
   * deadline before its SYNCED; it is opened again in a second while the
   * replica is listed, and until it syncs the replica is unreachable.
   */
  failed(from: string, why: string): void;
  /**
   * The replicas this watch cannot reach changed (`unreachable`, member keys;
   * empty when all can be reached again): until the next change, the nodes
   * they stream are streamed in their place by their next owners, this
   * replica (standsIn) and the streams `opened` (sources of events, like the
   * replicas'), which replace those of the last change. Called before the
   * failure that caused it, so that a watch not yet synced waits for them.
   */
  standIn(unreachable: ReadonlySet<string>, opened: readonly string[]): void;
}

export interface PeerWatch {
  /** The replicas asked at the start: a watch is synced once each, and each stand-in opened before then, has sent SYNCED or failed. */
  readonly initial: readonly string[];
  /** Stops reading the replicas while the caller's reader is behind. */
  pause(): void;
  resume(): void;
  close(): void;
}

/** Of two views of one node, whether `b` shows it better: with a sample over without, then the younger sample. */
function better(a: { hasSample: boolean; ageMs: number }, b: { hasSample: boolean; ageMs: number }): boolean {
  return a.hasSample !== b.hasSample ? b.hasSample : b.ageMs < a.ageMs;
}

const view = (s: NodeStatus) => ({ hasSample: s.latest != null, ageMs: Number(s.ageMs ?? 0) });

/** One status per node, in name order, each the best view any list has of it (the first list wins ties: pass this replica's first). */
export function mergeStatuses(lists: readonly NodeStatus[][]): NodeStatus[] {
  const best = new Map<string, NodeStatus>();
  for (const list of lists) {
    for (const s of list) {
      const name = s.name ?? '';
      const held = best.get(name);
      if (!held || better(view(held), view(s))) best.set(name, s);
    }
  }
  return [...best.keys()].sort().map((name) => best.get(name)!);
}

type Column = Exclude<keyof NodeSummaries__Output, 'name' | 'texts'>;
/** Columns that hold an index into `texts`: renumbered into the merged texts. */
const TEXT_COLUMNS = new Set<Column>(['policy', 'cpuBound', 'memoryBound']);

/** One row per node, in name order, each the best view any part has of it (the first part wins ties). */
export function mergeSummaries(parts: readonly NodeSummaries__Output[]): NodeSummaries__Output {
  const first = parts[0];
  if (!first || parts.length === 1) return first ?? emptySummaries();
  const best = new Map<string, { part: NodeSummaries__Output; row: number }>();
  for (const part of parts) {
    for (let row = 0; row < part.name.length; row++) {
      const name = part.name[row]!;
      const held = best.get(name);
      const at = (p: NodeSummaries__Output, i: number) => ({ hasSample: p.hasSample[i] ?? false, ageMs: p.ageMs[i] ?? 0 });
      if (!held || better(at(held.part, held.row), at(part, row))) best.set(name, { part, row });
    }
  }
  const out = emptySummaries();
  const columns = (Object.keys(out) as Array<keyof NodeSummaries__Output>).filter((k): k is Column => k !== 'name' && k !== 'texts');
  const textIndex = new Map<string, number>([['', 0]]);
  const textOf = (text: string) => {
    let i = textIndex.get(text);
    if (i === undefined) {
      i = out.texts.push(text) - 1;
      textIndex.set(text, i);
    }
    return i;
  };
  for (const name of [...best.keys()].sort()) {
    const { part, row } = best.get(name)!;
    out.name.push(name);
    for (const key of columns) {
      const value = part[key][row]!;
      (out[key] as Array<typeof value>).push(TEXT_COLUMNS.has(key) ? textOf(part.texts[value as number] ?? '') : value);
    }
  }
  return out;
}

function emptySummaries(): NodeSummaries__Output {
  return {
    name: [], connected: [], hasSample: [], ageMs: [], cpuUsageMillicores: [], memoryWorkingSetBytes: [],
    capacityCpuMillicores: [], capacityMemoryBytes: [], requestsKnown: [], requestsCpuMillicores: [], requestsMemoryBytes: [],
    pressureAvailable: [], cpuPressure: [], memoryPressure: [], rawAllocatableKnown: [], rawCpuMillicores: [], rawMemoryBytes: [],
    allocatableCpuMillicores: [], allocatableMemoryBytes: [], windowSamples: [], policy: [], cpuBound: [], memoryBound: [], texts: [''],
  };
}
