// A V8 .cpuprofile (node --cpu-prof) summed by self time: per function and per
// part of the stack (TLS and sockets, HTTP parsing, fastify, the review
// reader, the decision, metrics, GC), so "where a review's time goes" is a
// table, not a flame graph read by eye.
//   node --import tsx bench/cpu-profile.ts <file.cpuprofile> [requests]
import { readFileSync } from 'node:fs';
import { pathToFileURL } from 'node:url';

interface CallFrame {
  functionName: string;
  url: string;
  lineNumber: number;
}
interface ProfileNode {
  id: number;
  callFrame: CallFrame;
  children?: number[];
}
export interface CpuProfile {
  nodes: ProfileNode[];
  startTime: number;
  endTime: number;
  samples: number[];
  timeDeltas: number[];
}

/** Which part of the server a frame belongs to; the first rule that matches wins. */
const PARTS: Array<[string, (f: CallFrame) => boolean]> = [
  ['idle', (f) => f.functionName === '(idle)'],
  ['gc', (f) => f.functionName === '(garbage collector)'],
  ['native, outside JS (TLS record decryption, syscalls)', (f) => f.functionName === '(program)'],
  ['review reader', (f) => f.url.includes('/admit/review-reader')],
  ['decision and patch', (f) => /\/(decide|admit)\//.test(f.url) || f.url.includes('/lib/quantity') || f.url.includes('/lib/json')],
  ['store', (f) => f.url.includes('/store/')],
  ['metrics (prom-client)', (f) => f.url.includes('prom-client') || f.url.includes('/metrics/')],
  ['fastify', (f) => /node_modules\/(fastify|@fastify|find-my-way|avvio|light-my-request|fast-json-stringify|secure-json-parse|toad-cache|process-warning|abstract-logging)/.test(f.url)],
  ['grpc (agent stream)', (f) => /@grpc|protobufjs|\/ingest\//.test(f.url)],
  // The native write of a response: TLS encryption and the write(2) itself.
  ['node: tls and sockets', (f) => f.functionName === 'writev' || f.functionName === 'writeUtf8String' || f.functionName === 'writeBuffer' || /node:(internal\/)?(tls|_tls|net|stream_base|crypto)|internal\/tls|_tls_wrap|internal\/stream_base/.test(f.url) || /^(TLSWrap|TLSSocket|Socket)/.test(f.functionName)],
  ['node: http', (f) => /node:(internal\/)?(_http|http)|internal\/http/.test(f.url) || f.functionName === 'parserOnHeadersComplete' || f.functionName === 'parserOnBody'],
  ['node: streams and events', (f) => /internal\/streams|node:events|node:stream|internal\/event_target/.test(f.url)],
  ['node: buffers and strings', (f) => /node:buffer|internal\/buffer/.test(f.url) || /^(toString|concat|write|utf8Slice|latin1Slice|indexOf)$/.test(f.functionName)],
  ['node: timers and ticks', (f) => /internal\/timers|internal\/process\/task_queues|node:timers/.test(f.url)],
  ['JSON', (f) => /^JSON|stringify|parse$/.test(f.functionName) && f.url === ''],
  ['other node internals', (f) => f.url.startsWith('node:')],
  ['other', () => true],
];

export interface ProfileSummary {
  /** Milliseconds of samples in the profile (idle included). */
  totalMs: number;
  /** Milliseconds busy (not idle). */
  busyMs: number;
  parts: Array<{ part: string; ms: number }>;
  functions: Array<{ name: string; where: string; part: string; ms: number }>;
}

/**
 * Self time by function and part. `window`: only samples taken between these
 * two instants, in µs of the monotonic clock (process.hrtime.bigint() / 1000n
 * in any process on the machine: V8 stamps its samples with the same clock).
 */
type Window = { fromUs: number; toUs: number };

/** Each sample taken inside `window` (all without one), in order: its node and the µs it stands for. */
function* samplesIn(profile: CpuProfile, window?: Window): Generator<{ id: number; us: number }> {
  // timeDeltas[i] is the time before sample i: the time a sample stands for is the next delta.
  let at = profile.startTime;
  for (let i = 0; i < profile.samples.length; i++) {
    at += profile.timeDeltas[i] ?? 0;
    if (window && (at < window.fromUs || at > window.toUs)) continue;
    yield { id: profile.samples[i]!, us: Math.max(0, profile.timeDeltas[i + 1] ?? 0) };
  }
}

/** A frame's file and line, shortened to the repository's folders. */
const whereOf = (f: CallFrame): string => (f.url ? `${f.url.replace(/^file:\/\/.*?\/(node_modules|gateway|lib|bench)\//, '$1/')}:${f.lineNumber + 1}` : '');

export function summarize(profile: CpuProfile, window?: Window): ProfileSummary {
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const selfUs = new Map<number, number>();
  for (const { id, us } of samplesIn(profile, window)) selfUs.set(id, (selfUs.get(id) ?? 0) + us);
  const parts = new Map<string, number>();
  const functions = new Map<string, { name: string; where: string; part: string; ms: number }>();
  let totalUs = 0;
  for (const [id, us] of selfUs) {
    const f = byId.get(id)!.callFrame;
    const part = PARTS.find(([, test]) => test(f))![0];
    totalUs += us;
    parts.set(part, (parts.get(part) ?? 0) + us);
    const where = whereOf(f);
    const key = `${f.functionName}|${where}`;
    const entry = functions.get(key) ?? { name: f.functionName || '(anonymous)', where, part, ms: 0 };
    entry.ms += us / 1000;
    functions.set(key, entry);
  }
  const idle = parts.get('idle') ?? 0;
  return {
    totalMs: totalUs / 1000,
    busyMs: (totalUs - idle) / 1000,
    parts: [...parts].map(([part, us]) => ({ part, ms: us / 1000 })).filter((p) => p.part !== 'idle').sort((a, b) => b.ms - a.ms),
    functions: [...functions.values()].filter((f) => f.part !== 'idle').sort((a, b) => b.ms - a.ms),
  };
}

/**
 * What held the thread busy without a pause for at least `minMs`: runs of
 * samples with no idle one between them (one or more turns of the event loop
 * back to back), each attributed to the first frame of ours (gateway/, lib/)
 * from the root of its stacks, else its leaf. A review that arrives during
 * such a run waits for the rest of it.
 */
export function longRuns(profile: CpuProfile, minMs: number, window?: Window): { runs: number; totalMs: number; longestMs: number; byCause: Array<{ cause: string; ms: number }> } {
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const parent = new Map<number, number>();
  for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
  const label = (f: CallFrame) => `${f.functionName || '(anonymous)'}${f.url ? `  ${whereOf(f)}` : ''}`;
  const causeOf = new Map<number, string>();
  const cause = (id: number) => {
    let c = causeOf.get(id);
    if (c === undefined) {
      const path: number[] = [];
      for (let x: number | undefined = id; x !== undefined; x = parent.get(x)) path.unshift(x);
      const ours = path.find((i) => {
        const url = byId.get(i)!.callFrame.url;
        return /\/(gateway|lib)\//.test(url) && !url.includes('/node_modules/');
      });
      c = label(byId.get(ours ?? id)!.callFrame);
      causeOf.set(id, c);
    }
    return c;
  };
  const totals = new Map<string, number>();
  let runs = 0, totalMs = 0, longestMs = 0;
  let run: Map<string, number> | undefined;
  let runMs = 0;
  const end = () => {
    if (run && runMs >= minMs) {
      runs += 1;
      totalMs += runMs;
      longestMs = Math.max(longestMs, runMs);
      for (const [c, ms] of run) totals.set(c, (totals.get(c) ?? 0) + ms);
    }
    run = undefined;
    runMs = 0;
  };
  for (const { id, us } of samplesIn(profile, window)) {
    if (byId.get(id)!.callFrame.functionName === '(idle)') {
      end();
      continue;
    }
    const ms = us / 1000;
    run ??= new Map();
    runMs += ms;
    const c = cause(id);
    run.set(c, (run.get(c) ?? 0) + ms);
  }
  end();
  return { runs, totalMs, longestMs, byCause: [...totals].map(([c, ms]) => ({ cause: c, ms })).sort((a, b) => b.ms - a.ms) };
}

export function formatLongRuns(r: ReturnType<typeof longRuns>, minMs: number, top = 10): string {
  return [
    `${r.runs} busy runs of ${minMs} ms or more (${r.totalMs.toFixed(0)} ms in all, the longest ${r.longestMs.toFixed(1)} ms), by what ran in them:`,
    ...r.byCause.slice(0, top).map((c) => `  ${c.ms.toFixed(0).padStart(7)} ms  ${c.cause}`),
  ].join('\n');
}

/** The profile of each thread in a --cpu-prof-dir: the main thread's is the one whose file name says thread 0. */
export function mainThreadProfile(files: readonly string[]): string | undefined {
  return files.find((f) => /\.0\.\d+\.cpuprofile$/.test(f)) ?? files.find((f) => f.endsWith('.cpuprofile'));
}

/** The summary as text; with `requests`, each part also in µs per request. */
export function formatSummary(s: ProfileSummary, requests?: number, top = 25): string {
  const per = (ms: number) => (requests ? `  ${((ms * 1000) / requests).toFixed(1).padStart(7)} µs/request` : '');
  const pct = (ms: number) => `${((100 * ms) / s.busyMs).toFixed(1).padStart(5)} %`;
  return [
    `busy ${s.busyMs.toFixed(0)} ms of ${s.totalMs.toFixed(0)} ms sampled${requests ? ` (${((s.busyMs * 1000) / requests).toFixed(1)} µs/request over ${requests} requests)` : ''}`,
    ...s.parts.map((p) => `  ${p.part.padEnd(52)} ${p.ms.toFixed(0).padStart(7)} ms ${pct(p.ms)}${per(p.ms)}`),
    `top ${top} functions by self time:`,
    ...s.functions.slice(0, top).map((f) => `  ${f.ms.toFixed(0).padStart(7)} ms ${pct(f.ms)}  ${f.name}  ${f.where}  [${f.part}]`),
  ].join('\n');
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const [file, requests] = process.argv.slice(2);
  if (!file) {
    console.error('usage: cpu-profile.ts <file.cpuprofile> [requests]');
    process.exit(2);
  }
  console.log(formatSummary(summarize(JSON.parse(readFileSync(file, 'utf8')) as CpuProfile), requests ? Number(requests) : undefined));
}
