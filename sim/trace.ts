// A recorded cluster (`oversell record`): what each node's agent reported and
// the gateway knew, every interval. Replayed by `oversell simulate --trace`:
// the recorded nodes with their own shapes, and their recorded usage and bound
// requests as load that stays where it is, under which each policy places the
// scenario's pods. One JSON object a line: a header, then one line per poll.
import type { NodeShape } from './allocators.js';
import type { Quantities } from './scenario.js';
import { ScenarioError } from './scenario.js';

export const TRACE_KIND = 'OversellTrace';

export interface TraceNode {
  name: string;
  capacity: Quantities;
  /** The kubelet's allocatable, as the gateway established it. */
  raw: Quantities;
  usage: Quantities;
  /** Requests of the pods bound to the node. */
  requests: Quantities;
}

export interface TracePoll {
  /** Seconds since the recording started. */
  t: number;
  nodes: TraceNode[];
}

export interface Trace {
  intervalSeconds: number;
  polls: TracePoll[];
}

export function traceHeader(intervalSeconds: number): string {
  return JSON.stringify({ kind: TRACE_KIND, version: 1, intervalSeconds }) + '\n';
}

export function tracePoll(p: TracePoll): string {
  return JSON.stringify(p) + '\n';
}

const isObj = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

function quantities(v: unknown, where: string): Quantities {
  if (!isObj(v) || typeof v.cpu !== 'number' || typeof v.memory !== 'number' || !(v.cpu >= 0) || !(v.memory >= 0)) {
    throw new ScenarioError(`${where} must be { cpu: millicores, memory: bytes }, not negative`);
  }
  return { cpu: v.cpu, memory: v.memory };
}

/** Reads a trace file's text; throws ScenarioError naming the line and field. */
export function parseTrace(text: string): Trace {
  const lines = text.split('\n').filter((l) => l.trim() !== '');
  const parse = (line: string, n: number): unknown => {
    try {
      return JSON.parse(line);
    } catch {
      throw new ScenarioError(`line ${n}: not JSON`);
    }
  };
  const header = parse(lines[0] ?? 'null', 1);
  if (!isObj(header) || header.kind !== TRACE_KIND || header.version !== 1) throw new ScenarioError(`line 1: not an ${TRACE_KIND} header (version 1)`);
  const intervalSeconds = header.intervalSeconds;
  if (typeof intervalSeconds !== 'number' || !(intervalSeconds > 0)) throw new ScenarioError('line 1: intervalSeconds must be a positive number');
  const polls: TracePoll[] = lines.slice(1).map((line, k) => {
    const n = k + 2;
    const p = parse(line, n);
    if (!isObj(p) || typeof p.t !== 'number' || !Array.isArray(p.nodes)) throw new ScenarioError(`line ${n}: a poll needs t (seconds) and nodes`);
    return {
      t: p.t,
      nodes: p.nodes.map((x, i) => {
        const where = `line ${n}: nodes[${i}]`;
        if (!isObj(x) || typeof x.name !== 'string') throw new ScenarioError(`${where}.name must be a string`);
        return { name: x.name, capacity: quantities(x.capacity, `${where}.capacity`), raw: quantities(x.raw, `${where}.raw`), usage: quantities(x.usage, `${where}.usage`), requests: quantities(x.requests, `${where}.requests`) };
      }),
    };
  });
  if (polls.length === 0 || polls[0]!.nodes.length === 0) throw new ScenarioError('the trace has no poll with nodes');
  for (let k = 1; k < polls.length; k++) if (polls[k]!.t < polls[k - 1]!.t) throw new ScenarioError(`line ${k + 2}: t goes back in time`);
  return { intervalSeconds, polls };
}

/** Seconds the trace covers: a replay longer than that starts it over. */
export function traceSeconds(trace: Trace): number {
  return trace.polls[trace.polls.length - 1]!.t - trace.polls[0]!.t + trace.intervalSeconds;
}

/** Recorded load, per step and node (index step * nodes + node), and its peak per node. */
export interface Baseline {
  cpu: Float64Array;
  memory: Float64Array;
  requestCpu: Float64Array;
  requestMemory: Float64Array;
  peakCpu: Float64Array;
  peakMemory: Float64Array;
}

export interface Replay {
  names: string[];
  shapes: NodeShape[];
  baseline: Baseline;
}

/**
 * The nodes of the first poll, each with its own shape, and their recorded load at
 * every step: the last poll at or before that time, the trace starting over when
 * the run is longer. A node missing from a poll keeps what it last reported.
 */
export function replay(trace: Trace, steps: number, stepSeconds: number): Replay {
  const first = trace.polls[0]!;
  const names = first.nodes.map((x) => x.name);
  const index = new Map(names.map((name, i) => [name, i]));
  // What the recorded usage includes already: the system's share is in it.
  const shapes: NodeShape[] = first.nodes.map((x) => ({ raw: x.raw, capacity: x.capacity, systemUsage: { cpu: 0, memory: 0 } }));
  const n = names.length;
  const b: Baseline = {
    cpu: new Float64Array(steps * n), memory: new Float64Array(steps * n), requestCpu: new Float64Array(steps * n), requestMemory: new Float64Array(steps * n),
    peakCpu: new Float64Array(n), peakMemory: new Float64Array(n),
  };
  const span = traceSeconds(trace);
  const current = first.nodes.map((x) => x);
  let poll = 0;
  let lap = 0;
  for (let t = 0; t < steps; t++) {
    const at = t * stepSeconds;
    const lapNow = Math.floor(at / span);
    if (lapNow !== lap) {
      lap = lapNow;
      poll = 0;
    }
    const within = at - lap * span + first.t;
    while (poll < trace.polls.length && trace.polls[poll]!.t <= within) {
      for (const x of trace.polls[poll]!.nodes) {
        const i = index.get(x.name);
        if (i !== undefined) current[i] = x;
      }
      poll += 1;
    }
    for (let i = 0; i < n; i++) {
      const x = current[i]!;
      const j = t * n + i;
      b.cpu[j] = x.usage.cpu;
      b.memory[j] = x.usage.memory;
      b.requestCpu[j] = x.requests.cpu;
      b.requestMemory[j] = x.requests.memory;
      if (x.usage.cpu > b.peakCpu[i]!) b.peakCpu[i] = x.usage.cpu;
      if (x.usage.memory > b.peakMemory[i]!) b.peakMemory[i] = x.usage.memory;
    }
  }
  return { names, shapes, baseline: b };
}
