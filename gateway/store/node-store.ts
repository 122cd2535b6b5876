// Live state of every node, in memory. The store only keeps: it accepts
// samples (dropping duplicates and replays it already has), remembers what
// each node object says a decision needs (observe()), and tells listeners what
// changed. Deciding is somebody else's job.
import { EventEmitter } from 'node:events';
import type { HostFacts__Output } from '../../proto/gen/oversell/v1/HostFacts.js';
import type { Sample__Output } from '../../proto/gen/oversell/v1/Sample.js';
import type { PodUsage__Output } from '../../proto/gen/oversell/v1/PodUsage.js';
import { sampleAt, sampleRow, type SampleField } from '../../wire/sample-row.js';
import type { StoredNodeObservation } from '../decide/node-decision.js';
import type { Allocatable, NodeObservation, PreviousGrant, UsageInput } from '../decide/policy.js';
import { UsageWindow, type WindowPoint } from '../../lib/usage/usage-window.js';
import type { AgentSummary } from '../../lib/usage/summary-plan.js';
import type { LoadHistory } from '../decide/load-history.js';
import { learnSample, type LearnAgainst } from '../decide/node-inputs.js';
import { DEFAULT_POLICY } from '../decide/policy.js';
import { cpuPressureFrom } from '../../wire/cpu-pressure.js';
import { keepPodReport, NO_PODS_KEY, type KeptPods } from './pod-report.js';
import type { PodFigures } from '../../wire/pod-figures.js';

export class NodeRecord implements KeptPods {
  readonly name: string;
  instanceId: string;
  host: HostFacts__Output | null;
  /** The stream currently reporting for this node, if any. */
  streamId: number | undefined;
  lastSeq = 0;
  /**
   * The newest sample's numbers, laid out by wire/sample-row.ts; undefined
   * before the first. Kept as numbers, not as the decoded object, so the
   * object dies young instead of being promoted with every heap number in it
   * (docs/performance-log.md). Its pods are in `pods`. Read with value().
   */
  #row: Float64Array | undefined = undefined;
  /** Gateway clock when the newest sample arrived. */
  receivedAtMs = 0;
  /** On the agent's timeline; as long as the longest policy window or calm period. */
  readonly window = new UsageWindow();
  /** The newest sample's window summaries from its agent (--agent-summaries); none from an agent that sends every sample. */
  summaries: readonly AgentSummary[] = NO_SUMMARIES;
  /** The last full pod list an agent sent. */
  pods: PodUsage__Output[] = [];
  /** The key of what names `pods` (wire/pod-figures.ts): a report of the same key updates them in place. */
  podNamesKey = NO_PODS_KEY;
  /** Agent clock of the sample that carried `pods` (0: none yet); the metrics API's timestamp. */
  podsAtMs = 0;
  /** What their CPU rates cover: the time since the pod report before (0: unknown, the first one this store saw). */
  podsWindowMs = 0;
  /** Gateway clock when `pods` arrived: their age. */
  podsReceivedAtMs = 0;
  /** The node's memory working set in the sample that carried `pods`: how far the node has moved since (relief). */
  podsNodeWorkingSetBytes = 0;
  /** Raw allocatable, labels, caps and grant the kubelet's next write will be decided from (observe()): the query API decides from these. */
  raw: (Allocatable & { seenAtMs: number }) | undefined = undefined;
  labels: Record<string, string> = {};
  nodeMaxRatio: NodeObservation['nodeMaxRatio'] = {};
  lastGrant: PreviousGrant | undefined = undefined;
  /** The node's load factor over hours; created with the first sample that has requests and raw to learn from. */
  history: LoadHistory | undefined = undefined;

  constructor(name: string, instanceId: string, host: HostFacts__Output | null, streamId: number) {
    this.name = name;
    this.instanceId = instanceId;
    this.host = host;
    this.streamId = streamId;
  }

  /** The newest sample as the query API shows it, made from its row on each read. */
  get latest(): Sample__Output | undefined {
    if (!this.#row) return undefined;
    const sample = sampleRow().read(this.#row, 0);
    if (sample.podsIncluded) sample.pods = this.pods;
    return sample;
  }

  get hasSample(): boolean {
    return this.#row !== undefined;
  }

  /** A field of the newest sample: 0 before the first, and for a nested message it lacked; bools 1 or 0. */
  value(field: SampleField): number {
    return this.#row ? this.#row[sampleAt()[field]]! : 0;
  }

  /** Keeps the sample at rows[at .. at + width) as the newest. */
  setLatestRow(rows: Float64Array, at: number): void {
    const width = sampleRow().width;
    const row = (this.#row ??= new Float64Array(width));
    for (let i = 0; i < width; i++) row[i] = rows[at + i]!;
  }
}

export interface NodeStoreOptions {
  /** Samples older than this, on the agent's timeline, are dropped (see retainMs()). */
  retainMs: number;
  /** Records with no stream and no sample for this long are forgotten. */
  forgetAfterMs: number;
  /** The node's policy's startupGraceMs, from its labels (default: the default policy's). */
  startupGraceMs?: (labels: Record<string, string>) => number;
  /** Requests the API server has bound to a node (the gateway's pod watch), at nowMs; undefined: the agent's report is all there is. */
  boundRequests?: (node: string, nowMs: number) => { cpuMillicores: number; memoryBytes: number; newestPodAgeMs: number } | undefined;
}

export type IngestResult = 'stored' | 'duplicate' | 'not-current-stream' | 'unknown-node';

interface StoreEvents {
  updated: [NodeRecord];
  removed: [string];
}

/**
 * Observations kept for nodes no agent reports for: bounded, since in local
 * mode anyone who reaches the webhook port can name a node.
 */
const MAX_OBSERVED_WITHOUT_AGENT = 100_000;

// Reused on every sample, as POINT is: learnSample keeps none of them.
const LEARN_REQUESTS = { cpu: 0, memory: 0 };
const LEARN_RAW = { cpu: 0, memory: 0 };
const AGAINST: LearnAgainst = { requests: undefined, raw: LEARN_RAW, newestPodAgeMs: undefined };

/** The point being added: the window copies its numbers, so one object serves every sample. */
const NO_SUMMARIES: readonly AgentSummary[] = Object.freeze([]);
const POINT: WindowPoint = { timestampMs: 0, cpuMillicores: 0, memoryBytes: 0, cpuPressure: 0, memoryPressure: 0 };

export class NodeStore extends EventEmitter<StoreEvents> {
  readonly #nodes = new Map<string, NodeRecord>();
  /** observe()'s latest per node, agent or not. */
  readonly #observed = new Map<string, { observed: StoredNodeObservation; atMs: number }>();
  /** Load histories read from the last snapshot (seedHistory()) for nodes with no record yet. */
  readonly #seeds = new Map<string, LoadHistory>();
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
      const seen = this.#observed.get(name);
      if (seen) this.#apply(record, seen.observed, seen.atMs);
      record.history = this.#seeds.get(name);
      this.#seeds.delete(name);
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

  /**
   * Stores a checked sample (gateway/store/sample-check.ts), handed over as
   * its row of numbers at rows[at .. at + width) (wire/sample-row.ts), which
   * is copied into the record's row: whatever decoded it lets go of it. pods:
   * the pod report it carried, as names and figures (a row holds no lists);
   * summaries: its agent's window summaries, checked too.
   */
  ingest(name: string, streamId: number, rows: Float64Array, at: number, nowMs: number, pods?: PodFigures, summaries?: readonly AgentSummary[]): IngestResult {
    const record = this.#current(name, streamId, rows[at + sampleAt().seq]!);
    if (typeof record === 'string') return record;
    record.setLatestRow(rows, at);
    record.summaries = summaries ?? NO_SUMMARIES;
    if (record.value('podsIncluded') === 1) {
      if (pods) keepPodReport(record, pods);
      else if (record.pods.length > 0) {
        record.pods = [];
        record.podNamesKey = NO_PODS_KEY;
      }
      // The agent's rates run from its previous pod report to this one (agent/sample/sampler.ts).
      const at = record.value('timestampMs');
      record.podsWindowMs = record.podsAtMs > 0 && at > record.podsAtMs ? at - record.podsAtMs : 0;
      record.podsAtMs = at;
      record.podsReceivedAtMs = nowMs;
      record.podsNodeWorkingSetBytes = record.value('memoryWorkingSetBytes');
    }
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

  /** The record's newest sample is new: the rest of the record follows it (window and history by decide/node-inputs.ts, with the node's own policy). */
  #stored(record: NodeRecord, nowMs: number): 'stored' {
    record.receivedAtMs = nowMs;
    POINT.timestampMs = record.value('timestampMs');
    POINT.cpuMillicores = record.value('cpuUsageMillicores');
    POINT.memoryBytes = record.value('memoryWorkingSetBytes');
    POINT.cpuPressure = cpuPressureFrom(record);
    POINT.memoryPressure = record.value('pressure.memorySome.avg10');
    learnSample(record, POINT, this.#against(record, nowMs), { retainMs: this.#options.retainMs, startupGraceMs: this.#options.startupGraceMs?.(record.labels) ?? DEFAULT_POLICY.startupGraceMs });
    this.emit('updated', record);
    return 'stored';
  }

  /** What the sample's load factor is measured against: the requests bound at the time (the API server's, else the agent's), and raw. */
  #against(record: NodeRecord, nowMs: number): LearnAgainst {
    const raw = record.raw;
    AGAINST.requests = undefined;
    AGAINST.newestPodAgeMs = undefined;
    if (!raw) return AGAINST;
    const bound = this.#options.boundRequests?.(record.name, nowMs);
    if (bound) {
      LEARN_REQUESTS.cpu = bound.cpuMillicores;
      LEARN_REQUESTS.memory = bound.memoryBytes;
      AGAINST.newestPodAgeMs = bound.newestPodAgeMs;
    } else if (record.value('requests.known') === 1) {
      LEARN_REQUESTS.cpu = record.value('requests.cpuMillicores');
      LEARN_REQUESTS.memory = record.value('requests.memoryBytes');
    } else return AGAINST;
    AGAINST.requests = LEARN_REQUESTS;
    LEARN_RAW.cpu = Number(raw.cpuMillicores);
    LEARN_RAW.memory = Number(raw.memoryBytes);
    return AGAINST;
  }

  /**
   * What a node's next kubelet write will be decided from: raw allocatable
   * (undefined: not established), labels, caps and the grant it carries. Kept
   * for nodes whose agent has not connected yet too, and handed to the
   * node's record when it does.
   */
  observe(name: string, observed: StoredNodeObservation, nowMs: number): void {
    if (!this.#observed.has(name) && this.#observed.size >= MAX_OBSERVED_WITHOUT_AGENT && !this.#nodes.has(name)) return;
    this.#observed.set(name, { observed, atMs: nowMs });
    const record = this.#nodes.get(name);
    if (record) this.#apply(record, observed, nowMs);
  }

  /**
   * A node's load history as a snapshot kept it (gateway/act/history-snapshots.ts),
   * for the node's record now or when its agent first connects. A record with
   * a history of its own keeps it unless the snapshot spans longer: every
   * replica hears every agent, so the two cover the same hours, and adding
   * them would count those hours twice; the longer one has seen more of the
   * day (the shorter is a replica that started after the snapshot's writer).
   */
  seedHistory(name: string, history: LoadHistory): 'seeded' | 'kept-own' | 'held' | 'full' {
    const record = this.#nodes.get(name);
    if (!record) {
      if (!this.#seeds.has(name) && this.#seeds.size >= MAX_OBSERVED_WITHOUT_AGENT) return 'full';
      this.#seeds.set(name, history);
      return 'held';
    }
    if (record.history && record.history.spanMs() >= history.spanMs()) return 'kept-own';
    record.history = history;
    return 'seeded';
  }

  /** The node's load history: its record's, else the one a snapshot left for it. */
  history(name: string): LoadHistory | undefined {
    return this.#nodes.get(name)?.history ?? this.#seeds.get(name);
  }

  /** The node object is gone (deleted): its observation goes with it. */
  forgetObservation(name: string): void {
    this.#observed.delete(name);
    this.#seeds.delete(name);
    const record = this.#nodes.get(name);
    if (record) this.#apply(record, { raw: undefined, labels: {}, nodeMaxRatio: {}, lastGrant: undefined }, 0);
  }

  #apply(record: NodeRecord, observed: StoredNodeObservation, nowMs: number): void {
    const { raw, labels } = observed;
    const changed = record.raw?.cpuMillicores !== raw?.cpuMillicores || record.raw?.memoryBytes !== raw?.memoryBytes || !sameLabels(record.labels, labels) ||
      record.nodeMaxRatio.cpu !== observed.nodeMaxRatio.cpu || record.nodeMaxRatio.memory !== observed.nodeMaxRatio.memory ||
      !sameGrant(record.lastGrant, observed.lastGrant);
    record.raw = raw && { ...raw, seenAtMs: nowMs };
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
  return a === b || (
    a !== undefined && b !== undefined && sameAllocatable(a.granted, b.granted) && sameAllocatable(a.wouldGrant, b.wouldGrant) &&
    a.unconfirmed?.cpuMillicores === b.unconfirmed?.cpuMillicores && a.unconfirmed?.memoryBytes === b.unconfirmed?.memoryBytes
  );
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
  if (!record.hasSample) return undefined;
  return {
    ageMs: Math.max(0, nowMs - record.receivedAtMs),
    window: record.window,
    ...(record.summaries.length > 0 && { agentSummaries: record.summaries }),
    capacityMemoryBytes: record.value('capacity.memoryBytes'),
    requests: {
      cpuMillicores: record.value('requests.cpuMillicores'),
      memoryBytes: record.value('requests.memoryBytes'),
      known: record.value('requests.known') === 1,
    },
    history: record.history,
    cpuManager: record.value('cpuManager') === 1
      ? { policy: record.value('cpuManager.staticPolicy') === 1 ? 'static' : 'none', exclusiveCpus: record.value('cpuManager.exclusiveCpus') }
      : undefined,
  };
}
