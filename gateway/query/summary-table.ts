// The columns `oversell top` shows (ListNodeSummaries), kept per node as the
// store changes rather than computed per call, so a call neither decides nor
// sorts every node: a sample writes its node's row while the record is fresh
// in cache, with its decision made then (one decide() per sample), and a call
// copies rows in a name order kept between calls. The numbers are those
// nodeStatus() gives for the same record (tested).
import type { NodeSummaries__Output } from '../../proto/gen/oversell/v1/NodeSummaries.js';
import type { SampleField } from '../../wire/sample-row.js';
import { cpuPressureFrom } from '../../wire/cpu-pressure.js';
import { decideObserved } from '../decide/node-decision.js';
import { DEFAULT_POLICY, isFresh } from '../decide/policy.js';
import type { PolicyEntry } from '../decide/select-policy.js';
import { windowStart } from '../../lib/usage/usage-stats.js';
import type { PolicySource } from '../policies/policy-source.js';
import { usageOf, type NodeRecord, type NodeStore } from '../store/node-store.js';
import type { NodeRequests } from '../store/bound-requests.js';

/** Whether a node is listed, given its record and the name of the policy governing it. */
export type RowFilter = (record: NodeRecord, policy: string) => boolean;

const NUMBERS = [
  'cpuUsageMillicores', 'memoryWorkingSetBytes', 'capacityCpuMillicores', 'capacityMemoryBytes',
  'requestsCpuMillicores', 'requestsMemoryBytes', 'cpuPressure', 'memoryPressure',
  'rawCpuMillicores', 'rawMemoryBytes', 'allocatableCpuMillicores', 'allocatableMemoryBytes',
  'windowSamples', 'policy', 'cpuBound', 'memoryBound',
] as const;
const FLAGS = ['connected', 'hasSample', 'requestsKnown', 'pressureAvailable', 'rawAllocatableKnown'] as const;
type NumberColumn = (typeof NUMBERS)[number];
type FlagColumn = (typeof FLAGS)[number];

/** Policy and bound names repeat over every node: each is sent once, rows carry its index. */
class Texts {
  readonly list = [''];
  readonly #index = new Map<string, number>([['', 0]]);
  of(text: string): number {
    let i = this.#index.get(text);
    if (i === undefined) {
      i = this.list.push(text) - 1;
      this.#index.set(text, i);
    }
    return i;
  }
}

export class SummaryTable {
  readonly #policies: PolicySource;
  readonly #now: () => number;
  readonly #boundRequests: ((node: string) => NodeRequests | undefined) | undefined;
  readonly #slotOf = new Map<string, number>();
  readonly #free: number[] = [];
  /** Per slot; undefined for a free slot. */
  #records: Array<NodeRecord | undefined> = [];
  #entries: Array<PolicyEntry | undefined> = [];
  /** The labels object the entry was selected for: the webhook replaces it when labels change. */
  #selectedFor: Array<Record<string, string> | undefined> = [];
  #numbers = {} as Record<NumberColumn, Float64Array>;
  #flags = {} as Record<FlagColumn, Uint8Array>;
  #receivedAtMs = new Float64Array(0);
  /** The policy's staleAfter (Infinity without a policy) and whether the decision was made stale. */
  #staleAfterMs = new Float64Array(0);
  #decidedStale = new Uint8Array(0);
  /** Policy generation a row was computed under; a row of an older one is recomputed before it is read. */
  #generation = new Uint32Array(0);
  #policyGeneration = 1;
  #texts = new Texts();
  /** Occupied slots by node name; rebuilt only after a node comes or goes. */
  #order: Int32Array | undefined;

  constructor(store: NodeStore, policies: PolicySource, now: () => number, boundRequests?: (node: string) => NodeRequests | undefined) {
    this.#policies = policies;
    this.#now = now;
    this.#boundRequests = boundRequests;
    this.#grow(1024);
    store.on('updated', (record) => this.#update(record));
    store.on('removed', (name) => this.#remove(name));
    policies.onChange(() => {
      this.#policyGeneration += 1;
      this.#texts = new Texts(); // every row is recomputed under the new generation before it is read
    });
    for (const record of store.list()) this.#update(record);
  }

  /** The rows of the nodes `filter` keeps (all without one), by name, as of now. Throws when a row cannot be computed. */
  summaries(filter: RowFilter | undefined): NodeSummaries__Output {
    const nowMs = this.#now();
    const order = this.#sorted();
    const rows: number[] = [];
    for (let i = 0; i < order.length; i++) {
      const slot = order[i]!;
      const record = this.#records[slot]!;
      if (this.#generation[slot] !== this.#policyGeneration) this.#write(slot, record);
      // Data that went stale since the sample changes the decision, and only that does.
      const stale = this.#flags.hasSample[slot] === 1 && !isFresh(nowMs - this.#receivedAtMs[slot]!, this.#staleAfterMs[slot]!);
      if (stale !== (this.#decidedStale[slot] === 1)) this.#write(slot, record);
      if (!filter || filter(record, this.#texts.list[this.#numbers.policy[slot]!]!)) rows.push(slot);
    }
    const out = { name: rows.map((slot) => this.#records[slot]!.name), texts: this.#texts.list.slice() } as NodeSummaries__Output;
    for (const key of NUMBERS) out[key] = gather(this.#numbers[key], rows);
    for (const key of FLAGS) {
      const column = this.#flags[key];
      out[key] = rows.map((slot) => column[slot] === 1);
    }
    const received = this.#receivedAtMs;
    out.ageMs = rows.map((slot) => (this.#flags.hasSample[slot] === 1 ? Math.max(0, nowMs - received[slot]!) : 0));
    return out;
  }

  #update(record: NodeRecord): void {
    let slot = this.#slotOf.get(record.name);
    if (slot === undefined) {
      slot = this.#free.pop() ?? this.#slotOf.size;
      if (slot >= this.#receivedAtMs.length) this.#grow(this.#receivedAtMs.length * 2);
      this.#slotOf.set(record.name, slot);
      this.#order = undefined;
    }
    this.#records[slot] = record;
    try {
      this.#write(slot, record);
    } catch {
      // Called from inside the store's change: a row that cannot be computed
      // must not fail the sample. It is tried again when read, where the
      // error reaches the caller of ListNodeSummaries.
      this.#generation[slot] = 0;
    }
  }

  #remove(name: string): void {
    const slot = this.#slotOf.get(name);
    if (slot === undefined) return;
    this.#slotOf.delete(name);
    this.#records[slot] = undefined;
    this.#entries[slot] = undefined;
    this.#selectedFor[slot] = undefined;
    this.#free.push(slot);
    this.#order = undefined;
  }

  #write(slot: number, record: NodeRecord): void {
    const n = this.#numbers;
    const f = this.#flags;
    const texts = this.#texts;
    let entry = this.#entries[slot];
    if (this.#selectedFor[slot] !== record.labels || this.#generation[slot] !== this.#policyGeneration) {
      entry = this.#policies.select(record.labels);
      this.#entries[slot] = entry;
      this.#selectedFor[slot] = record.labels;
      this.#generation[slot] = this.#policyGeneration;
    }
    const raw = record.raw;
    f.connected[slot] = record.streamId !== undefined ? 1 : 0;
    this.#receivedAtMs[slot] = record.receivedAtMs;
    f.hasSample[slot] = record.hasSample ? 1 : 0;
    // A node with no sample yet reads zeros, as the query API shows it.
    const read = (field: SampleField) => record.value(field);
    n.cpuUsageMillicores[slot] = read('cpuUsageMillicores');
    n.memoryWorkingSetBytes[slot] = read('memoryWorkingSetBytes');
    n.capacityCpuMillicores[slot] = read('capacity.cpuMillicores');
    n.capacityMemoryBytes[slot] = read('capacity.memoryBytes');
    f.requestsKnown[slot] = read('requests.known');
    n.requestsCpuMillicores[slot] = read('requests.cpuMillicores');
    n.requestsMemoryBytes[slot] = read('requests.memoryBytes');
    f.pressureAvailable[slot] = read('pressure.available');
    n.cpuPressure[slot] = cpuPressureFrom(record);
    n.memoryPressure[slot] = read('pressure.memorySome.avg10');
    n.windowSamples[slot] = record.window.length - windowStart(record.window, entry?.policy?.windowMs ?? DEFAULT_POLICY.windowMs);
    n.policy[slot] = texts.of(entry?.name ?? '');
    f.rawAllocatableKnown[slot] = raw ? 1 : 0;
    n.rawCpuMillicores[slot] = raw ? Number(raw.cpuMillicores) : 0;
    n.rawMemoryBytes[slot] = raw ? Number(raw.memoryBytes) : 0;
    const staleAfterMs = entry?.policy?.staleAfterMs ?? Infinity;
    this.#staleAfterMs[slot] = staleAfterMs;
    const nowMs = this.#now();
    const usage = usageOf(record, nowMs);
    this.#decidedStale[slot] = usage !== undefined && !isFresh(usage.ageMs, staleAfterMs) ? 1 : 0;
    if (raw) {
      const d = decideObserved(raw, record, { usage, entry, boundRequests: this.#boundRequests?.(record.name) });
      n.allocatableCpuMillicores[slot] = Number(d.cpu.applied);
      n.allocatableMemoryBytes[slot] = Number(d.memory.applied);
      n.cpuBound[slot] = texts.of(d.cpu.decidedBy);
      n.memoryBound[slot] = texts.of(d.memory.decidedBy);
    } else {
      n.allocatableCpuMillicores[slot] = 0;
      n.allocatableMemoryBytes[slot] = 0;
      n.cpuBound[slot] = 0;
      n.memoryBound[slot] = 0;
    }
  }

  #sorted(): Int32Array {
    if (this.#order) return this.#order;
    const names = [...this.#slotOf.keys()].sort();
    const order = new Int32Array(names.length);
    for (let i = 0; i < names.length; i++) order[i] = this.#slotOf.get(names[i]!)!;
    this.#order = order;
    return order;
  }

  #grow(capacity: number): void {
    const grown = <T extends Float64Array | Uint8Array | Uint32Array>(old: T, make: (n: number) => T): T => {
      const bigger = make(capacity);
      bigger.set(old);
      return bigger;
    };
    for (const key of NUMBERS) this.#numbers[key] = grown(this.#numbers[key] ?? new Float64Array(0), (c) => new Float64Array(c));
    for (const key of FLAGS) this.#flags[key] = grown(this.#flags[key] ?? new Uint8Array(0), (c) => new Uint8Array(c));
    this.#receivedAtMs = grown(this.#receivedAtMs, (c) => new Float64Array(c));
    this.#staleAfterMs = grown(this.#staleAfterMs, (c) => new Float64Array(c));
    this.#decidedStale = grown(this.#decidedStale, (c) => new Uint8Array(c));
    this.#generation = grown(this.#generation, (c) => new Uint32Array(c));
  }
}

function gather(column: Float64Array, rows: readonly number[]): number[] {
  const out = new Array<number>(rows.length);
  for (let i = 0; i < rows.length; i++) out[i] = column[rows[i]!]!;
  return out;
}
