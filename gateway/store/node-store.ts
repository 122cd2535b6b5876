// Live state of every node, in memory. The store only keeps: it accepts
// samples (dropping duplicates and replays it already has), remembers the raw
// allocatable the webhook saw, and tells listeners what changed. Deciding is
// somebody else's job.
import { EventEmitter } from 'node:events';
import type { HostFacts__Output } from '../../proto/gen/oversell/v1/HostFacts.js';
import type { Sample__Output } from '../../proto/gen/oversell/v1/Sample.js';
import type { PodUsage__Output } from '../../proto/gen/oversell/v1/PodUsage.js';
import { sampleAt, sampleRow } from '../../wire/sample-row.js';
import type { Allocatable, NodeObservation, PreviousGrant, UsageInput } from '../decide/policy.js';
import { UsageWindow, type WindowPoint } from '../decide/usage-window.js';

export class NodeRecord {
  readonly name: string;
  instanceId: string;
  host: HostFacts__Output | null;
  /** The stream currently reporting for this node, if any. */
  streamId: number | undefined;
  lastSeq = 0;
  /**
   * The newest sample's numbers, laid out by wire/sample-row.ts (read with
   * sampleAt()); undefined before the first. Kept as numbers, not as the
   * decoded object: every number written into an object the record has held
   * for long was a new heap number that outlived scavenges until the next
   * sample replaced it, most of what the main thread's scavenges copied at
   * 10,000 agents (docs/benchmarks.md). Its pods are in `pods`.
   */
  latestRow: Float64Array | undefined = undefined;
  /** Gateway clock when the newest sample arrived. */
  receivedAtMs = 0;
  /** On the agent's timeline; as long as the longest policy window or calm period. */
  readonly window = new UsageWindow();
  /** The last full pod list an agent sent. */
  pods: PodUsage__Output[] = [];
  /** Raw allocatable, labels, caps and grant from the kubelet's last write, as the webhook saw them: the query API decides from these. */
  raw: (Allocatable & { seenAtMs: number }) | undefined = undefined;
  labels: Record<string, string> = {};
  nodeMaxRatio: NodeObservation['nodeMaxRatio'] = {};
  lastGrant: PreviousGrant | undefined = undefined;

  constructor(name: string, instanceId: string, host: HostFacts__Output | null, streamId: number) {
    this.name = name;
    this.instanceId = instanceId;
    this.host = host;
    this.streamId = streamId;
  }

  /** The newest sample as the query API shows it, made from its row on each read. */
  get latest(): Sample__Output | undefined {
    if (!this.latestRow) return undefined;
    const sample = sampleRow().read(this.latestRow, 0);
    if (sample.podsIncluded) sample.pods = this.pods;
    return sample;
  }
}

export interface NodeStoreOptions {
  /** Samples older than this, on the agent's timeline, are dropped (see retainMs()). */
  retainMs: number;
  /** Records with no stream and no sample for this long are forgotten. */
  forgetAfterMs: number;
}

export type IngestResult = 'stored' | 'duplicate' | 'not-current-stream' | 'unknown-node';

interface StoreEvents {
  updated: [NodeRecord];
  removed: [string];
}

/** The point being added: the window copies its numbers, so one object serves every sample. */
const POINT: WindowPoint = { timestampMs: 0, cpuMillicores: 0, memoryBytes: 0, cpuPressure: 0, memoryPressure: 0 };

export class NodeStore extends EventEmitter<StoreEvents> {
  readonly #nodes = new Map<string, NodeRecord>();
  #options: NodeStoreOptions;

  constructor(options: NodeStoreOptions) {
    super();
    this.#options = options;
    // One listener per watch stream; many watchers are normal.
    this.setMaxListeners(0);
  }

  /** Policies changed: keep enough history for the longest window or calm period. */
  setRetain(retainMs: number): void {
    this.#options = { ...this.#options, retainMs };
  }

  get size(): number {
    return this.#nodes.size;
  }

  get(name: string): NodeRecord | undefined {
    return this.#nodes.get(name);
  }

  list(): NodeRecord[] {
    return [...this.#nodes.values()];
  }

  connectedCount(): number {
    let n = 0;
    for (const r of this.#nodes.values()) if (r.streamId !== undefined) n += 1;
    return n;
  }

  /**
   * A stream says hello. Returns the last seq stored for this agent instance
   * (0 for a new instance), which the agent uses to replay only what is missing.
   * The newest stream for a node wins; an older one's samples are refused.
   */
  attach(name: string, instanceId: string, host: HostFacts__Output | null, streamId: number): number {
    let record = this.#nodes.get(name);
    if (!record) {
      record = new NodeRecord(name, instanceId, host, streamId);
      this.#nodes.set(name, record);
    } else {
      if (record.instanceId !== instanceId) {
        // A restarted agent numbers from 1 again; the usage history of the node stays valid.
        record.instanceId = instanceId;
        record.lastSeq = 0;
      }
      record.host = host ?? record.host;
      record.streamId = streamId;
    }
    this.emit('updated', record);
    return record.lastSeq;
  }

  detach(name: string, streamId: number): void {
    const record = this.#nodes.get(name);
    if (record && record.streamId === streamId) {
      record.streamId = undefined;
      this.emit('updated', record);
    }
  }

  ingest(name: string, streamId: number, sample: Sample__Output, nowMs: number): IngestResult {
    const record = this.#current(name, streamId, sample.seq);
    if (typeof record === 'string') return record;
    // Copied into the record's row: the decoded message then dies young. Kept
    // by reference, every sample outlived a scavenge and was promoted, and at
    // 10,000 agents the old generation filled with dead samples (heap 400 MiB
    // for 150 MiB live, long pauses).
    record.latestRow ??= new Float64Array(sampleRow().width);
    sampleRow().write(sample.pods.length > 0 ? { ...sample, pods: [] } : sample, record.latestRow, 0);
    if (sample.podsIncluded) record.pods = sample.pods;
    return this.#stored(record, nowMs);
  }

  /** ingest() for a sample handed over as a row of numbers (wire/sample-row.ts), copied into the record's row. */
  ingestRow(name: string, streamId: number, rows: Float64Array, at: number, nowMs: number): IngestResult {
    const record = this.#current(name, streamId, rows[at + sampleAt().seq]!);
    if (typeof record === 'string') return record;
    const width = sampleRow().width;
    const row = (record.latestRow ??= new Float64Array(width));
    for (let i = 0; i < width; i++) row[i] = rows[at + i]!;
    // A sample with pods crosses as an object: one here carried an empty list.
    if (row[sampleAt().podsIncluded] === 1 && record.pods.length > 0) record.pods = [];
    return this.#stored(record, nowMs);
  }

  /**
   * A sample refused before it was stored: its seq is taken as received, so
   * the gateway acknowledges past it and an agent that reconnects does not
   * send it again. Nothing else of the record changes (the node's data ages
   * as if the sample never came).
   */
  consume(name: string, streamId: number, seq: number): 'consumed' | Exclude<IngestResult, 'stored'> {
    const record = this.#current(name, streamId, seq);
    return typeof record === 'string' ? record : 'consumed';
  }

  /** The node's record if a sample with this seq from this stream is one to store, else why not. */
  #current(name: string, streamId: number, seq: number): NodeRecord | Exclude<IngestResult, 'stored'> {
    const record = this.#nodes.get(name);
    if (!record) return 'unknown-node';
    if (record.streamId !== streamId) return 'not-current-stream';
    if (seq <= record.lastSeq) return 'duplicate';
    record.lastSeq = seq;
    return record;
  }

  /** record.latestRow is the new sample: the rest of the record follows it. */
  #stored(record: NodeRecord, nowMs: number): 'stored' {
    const row = record.latestRow!;
    const at = sampleAt();
    record.receivedAtMs = nowMs;

    const window = record.window;
    const timestampMs = row[at.timestampMs]!;
    const newestMs = window.newestMs() ?? timestampMs;
    // Samples arrive in seq order, so one that lies behind the whole window
    // means the agent's clock stepped back (an NTP fix, or one bad timestamp
    // before it): the window restarts on the new timeline instead of keeping
    // every later sample out until the clock catches up.
    const cut = timestampMs <= newestMs - this.#options.retainMs ? Infinity : Math.max(newestMs, timestampMs) - this.#options.retainMs;
    window.dropThrough(cut);
    if (cut === Infinity || timestampMs > cut) {
      POINT.timestampMs = timestampMs;
      POINT.cpuMillicores = row[at.cpuUsageMillicores]!;
      POINT.memoryBytes = row[at.memoryWorkingSetBytes]!;
      POINT.cpuPressure = row[at['pressure.cpuSome.avg10']]!;
      POINT.memoryPressure = row[at['pressure.memorySome.avg10']]!;
      window.add(POINT);
    }
    this.emit('updated', record);
    return 'stored';
  }

  /** What the kubelet's last real write said about the node (raw allocatable, labels, caps, the grant it carried away). */
  observe(name: string, observed: NodeObservation, nowMs: number): void {
    const record = this.#nodes.get(name);
    if (!record) return;
    const { raw, labels } = observed;
    const changed = record.raw?.cpuMillicores !== raw.cpuMillicores || record.raw.memoryBytes !== raw.memoryBytes || !sameLabels(record.labels, labels) ||
      record.nodeMaxRatio.cpu !== observed.nodeMaxRatio.cpu || record.nodeMaxRatio.memory !== observed.nodeMaxRatio.memory ||
      !sameGrant(record.lastGrant, observed.lastGrant);
    record.raw = { ...raw, seenAtMs: nowMs };
    record.labels = labels;
    record.nodeMaxRatio = observed.nodeMaxRatio;
    record.lastGrant = observed.lastGrant;
    // Watchers filter by labels and show raw allocatable: tell them, but not on every heartbeat.
    if (changed) this.emit('updated', record);
  }

  /** What the policy needs, measured at nowMs; undefined when no sample ever arrived. */
  usage(name: string, nowMs: number): UsageInput | undefined {
    const record = this.#nodes.get(name);
    return record ? usageOf(record, nowMs) : undefined;
  }

  /** Forgets nodes whose agent is gone for longer than forgetAfterMs. */
  prune(nowMs: number): string[] {
    const removed: string[] = [];
    for (const [name, r] of this.#nodes) {
      if (r.streamId === undefined && nowMs - r.receivedAtMs > this.#options.forgetAfterMs) {
        this.#nodes.delete(name);
        removed.push(name);
        this.emit('removed', name);
      }
    }
    return removed;
  }
}

const sameAllocatable = (a: Allocatable | undefined, b: Allocatable | undefined) =>
  a === b || (a !== undefined && b !== undefined && a.cpuMillicores === b.cpuMillicores && a.memoryBytes === b.memoryBytes);

function sameGrant(a: PreviousGrant | undefined, b: PreviousGrant | undefined): boolean {
  return a === b || (a !== undefined && b !== undefined && sameAllocatable(a.granted, b.granted) && sameAllocatable(a.wouldGrant, b.wouldGrant));
}

// On the webhook path: a plain loop, not JSON.stringify of both maps.
function sameLabels(a: Record<string, string>, b: Record<string, string>): boolean {
  let n = 0;
  for (const k in b) {
    if (a[k] !== b[k]) return false;
    n += 1;
  }
  return n === Object.keys(a).length;
}

export function usageOf(record: NodeRecord, nowMs: number): UsageInput | undefined {
  const row = record.latestRow;
  if (!row) return undefined;
  const at = sampleAt();
  return {
    ageMs: Math.max(0, nowMs - record.receivedAtMs),
    window: record.window,
    capacityMemoryBytes: row[at['capacity.memoryBytes']]!,
    requests: {
      cpuMillicores: row[at['requests.cpuMillicores']]!,
      memoryBytes: row[at['requests.memoryBytes']]!,
      known: row[at['requests.known']] === 1,
    },
  };
}
