// What a node's decision reads, as one replica of a sharded gateway sends it
// to the others (node-inputs-sender.ts), so that any replica decides a review
// for any node: the window summarized under each plan the policies have, the
// load history digested at the shares they read, and the sample's facts. JSON
// between replicas that present the gateway's own certificate; read back with
// every field checked all the same, as a bug in one replica must not put a
// NaN into another's decisions. Whatever arrives, a decision stays within
// [raw, cap x raw] (decide/policy.ts).
import type { AgentSummary, WindowSummary } from '../../lib/usage/summary-plan.js';
import type { UsageInput } from '../decide/decision-types.js';
import { DigestedHistory, MAX_DIGEST_SHARES, type DigestQuantile, type HistoryDigest } from '../decide/history-digest.js';
import { MAX_LOAD_FACTOR } from '../decide/load-history-codec.js';
import { isValidNodeName } from '../ingest/agent-stream-service.js';
import { SAMPLE_BOUNDS } from '../store/sample-check.js';
import type { PeerNodeInputs } from '../store/peer-inputs.js';
import { MAX_SUMMARY_PLANS } from '../../wire/usage-summary.js';

/** One node's inputs as they travel: [planId, newestMs, samples, spanMs, cpu, memory, cpuPressure, memoryPressure] per plan. */
export interface NodeInputsWire {
  name: string;
  /** How long before the send its newest sample arrived at the sender. */
  ageMs: number;
  capacityMemoryBytes: number;
  /** cpu millicores, memory bytes, 1 when known. */
  requests: [number, number, number];
  /** 1 for static, then its exclusive CPUs; null: unknown. */
  cpuManager: [number, number] | null;
  summaries: [number, number, number, number, number, number, number, number][];
  history: { spanMs: number; quantiles: DigestQuantile[] } | null;
}

export interface PeerInputsBody {
  nodes: NodeInputsWire[];
}

/** Most nodes in one body: a batch of a quarter second from a replica of 100,000 agents, with room. */
export const MAX_PEER_INPUTS = 50_000;
/** An age past this is no longer a sample's: an agent that quiet has been forgotten. */
const MAX_AGE_MS = 24 * 3_600_000;
const MAX_BYTES = Number.MAX_SAFE_INTEGER;

const bit = (b: boolean) => (b ? 1 : 0);

export function nodeInputsToWire(name: string, usage: UsageInput & { planned: readonly AgentSummary[] }, history: HistoryDigest | undefined): NodeInputsWire {
  const s = (a: AgentSummary): NodeInputsWire['summaries'][number] => {
    const w = a.summary;
    return [a.planId, w.newestMs ?? -1, w.samples, w.spanMs, w.cpuMillicores, w.memoryBytes, bit(w.cpuPressure), bit(w.memoryPressure)];
  };
  return {
    name,
    ageMs: usage.ageMs,
    capacityMemoryBytes: usage.capacityMemoryBytes,
    requests: [usage.requests.cpuMillicores, usage.requests.memoryBytes, bit(usage.requests.known)],
    cpuManager: usage.cpuManager ? [bit(usage.cpuManager.policy === 'static'), usage.cpuManager.exclusiveCpus] : null,
    summaries: usage.planned.map(s),
    history: history ? { spanMs: history.spanMs, quantiles: history.quantiles.map((q) => [q[0], q[1], q[2]]) } : null,
  };
}

const within = (v: unknown, lo: number, hi: number): v is number => typeof v === 'number' && v >= lo && v <= hi;
const flag = (v: unknown): v is 0 | 1 => v === 0 || v === 1;

/** The body's nodes as kept, or why it is refused (as a whole: a replica that sends one wrong field is not believed on the rest). */
export function peerInputsFromWire(body: unknown): Map<string, PeerNodeInputs> | string {
  if (typeof body !== 'object' || body === null || !Array.isArray((body as PeerInputsBody).nodes)) return 'the body must be {"nodes": [...]}';
  const nodes = (body as PeerInputsBody).nodes;
  if (nodes.length > MAX_PEER_INPUTS) return `more than ${MAX_PEER_INPUTS} nodes in one body`;
  const out = new Map<string, PeerNodeInputs>();
  for (const n of nodes) {
    const read = nodeFromWire(n);
    if (typeof read === 'string') return `node ${typeof n?.name === 'string' ? n.name.slice(0, 253) : '?'}: ${read}`;
    out.set(n.name, read);
  }
  return out;
}

function nodeFromWire(n: NodeInputsWire): PeerNodeInputs | string {
  if (typeof n !== 'object' || n === null) return 'not an object';
  if (typeof n.name !== 'string' || !isValidNodeName(n.name)) return 'not a node name';
  if (!within(n.ageMs, 0, MAX_AGE_MS)) return 'ageMs out of bounds';
  if (!within(n.capacityMemoryBytes, 0, SAMPLE_BOUNDS.maxCapacityBytes)) return 'capacityMemoryBytes out of bounds';
  const r = n.requests;
  if (!Array.isArray(r) || r.length !== 3 || !within(r[0], 0, MAX_BYTES) || !within(r[1], 0, MAX_BYTES) || !flag(r[2])) return 'requests malformed';
  const m = n.cpuManager;
  if (m !== null && (!Array.isArray(m) || m.length !== 2 || !flag(m[0]) || !within(m[1], 0, 1 << 20) || !Number.isInteger(m[1]))) return 'cpuManager malformed';
  if (!Array.isArray(n.summaries) || n.summaries.length > MAX_SUMMARY_PLANS) return 'summaries malformed';
  const planned: AgentSummary[] = [];
  for (const s of n.summaries) {
    const summary = summaryFromWire(s, n.capacityMemoryBytes);
    if (!summary) return 'a summary out of bounds';
    planned.push({ planId: s[0], summary });
  }
  const h = n.history;
  let history: DigestedHistory | undefined;
  if (h !== null) {
    if (typeof h !== 'object' || !within(h.spanMs, 0, Number.MAX_SAFE_INTEGER) || !Array.isArray(h.quantiles)) return 'history malformed';
    const q = h.quantiles;
    if (q.length < 1 || q.length > MAX_DIGEST_SHARES || q[0]?.[0] !== 0) return 'history quantiles must start at share 0';
    for (const row of q) if (!Array.isArray(row) || row.length !== 3 || !within(row[0], 0, 1) || !within(row[1], 0, MAX_LOAD_FACTOR) || !within(row[2], 0, MAX_LOAD_FACTOR)) return 'a history quantile out of bounds';
    history = new DigestedHistory({ spanMs: h.spanMs, quantiles: q });
  }
  return {
    ageMs: n.ageMs,
    usage: {
      capacityMemoryBytes: n.capacityMemoryBytes,
      requests: { cpuMillicores: r[0], memoryBytes: r[1], known: r[2] === 1 },
      history,
      cpuManager: m === null ? undefined : { policy: m[0] === 1 ? 'static' : 'none', exclusiveCpus: m[1] },
      planned,
    },
  };
}

function summaryFromWire(s: NodeInputsWire['summaries'][number], capacityMemoryBytes: number): WindowSummary | undefined {
  if (!Array.isArray(s) || s.length !== 8) return undefined;
  const [id, newestMs, samples, spanMs, cpu, memory, cpuPressure, memoryPressure] = s;
  if (!within(id, 1, 0xffffffff) || !Number.isInteger(id)) return undefined;
  if (!within(newestMs, -1, Number.MAX_SAFE_INTEGER) || !within(samples, 0, SAMPLE_BOUNDS.maxSummarySamples) || !within(spanMs, 0, SAMPLE_BOUNDS.maxSummarySpanMs)) return undefined;
  // CPU is bounded by what a decision can do with it (the cap bounds the grant whatever it reads), memory by the node's capacity as samples are.
  if (!within(cpu, 0, MAX_BYTES) || !within(memory, 0, SAMPLE_BOUNDS.memoryUsageOverCapacity * capacityMemoryBytes)) return undefined;
  if (!flag(cpuPressure) || !flag(memoryPressure)) return undefined;
  return { newestMs: newestMs < 0 ? undefined : newestMs, samples, spanMs, cpuMillicores: cpu, memoryBytes: memory, cpuPressure: cpuPressure === 1, memoryPressure: memoryPressure === 1 };
}
