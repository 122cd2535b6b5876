// `npm run bench`: every benchmark in one run, a summary table, JSON per
// benchmark in bench/results/, and docs/benchmarks.md written from them.
// BENCH_QUICK=1 shortens every window (for trying the harness, not for figures);
// BENCH_ONLY=webhook,ingest runs a subset.
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { spawnSync } from 'node:child_process';
import { REPO } from './processes.js';
import { machine, save, type BenchResult } from './result.js';
import { ensureOha } from './oha.js';
import { ensureGhz } from './ghz.js';

/** The order of docs/benchmarks.md. */
const ALL = ['webhook', 'ingest', 'scaling', 'agent-overhead', 'freshness'] as const;
/**
 * The order they run in: agent-overhead first, so load generators not built
 * yet build while it runs. Its figures are each process's own CPU time and
 * RSS, which other work on the machine does not add to.
 */
const RUN_ORDER = ['agent-overhead', 'webhook', 'ingest', 'scaling', 'freshness'] as const;
const quick = process.env.BENCH_QUICK === '1';
const only = process.env.BENCH_ONLY?.split(',').filter(Boolean);
const started = Date.now();

if (!existsSync(join(REPO, 'dist/gateway/main.js'))) {
  console.log('building (npm run build)');
  if (spawnSync('npm', ['run', 'build'], { cwd: REPO, stdio: 'inherit' }).status !== 0) process.exit(1);
}

const wanted = RUN_ORDER.filter((name) => !only || only.includes(name));
// One after the other: two compilers at once would only share the 2 cores. A
// failed build is reported by the benchmark that needs the tool.
const builds = [...(wanted.includes('ingest') ? [ensureGhz] : []), ...(wanted.includes('webhook') ? [ensureOha] : [])];
let building = true;
void builds.reduce<Promise<unknown>>((previous, ensure) => previous.then(ensure), Promise.resolve()).catch(() => {}).finally(() => (building = false));

const results: BenchResult[] = [];
for (const name of wanted) {
  const t = Date.now();
  console.log(`\n=== ${name}${quick ? ' (quick)' : ''}  [${Math.round((t - started) / 1000)}s elapsed]`);
  const mod = (await import(`./${name}.js`)) as { run(o: { quick?: boolean }): Promise<BenchResult> };
  try {
    const buildingBefore = building;
    const r = await mod.run({ quick });
    if (buildingBefore && name === 'agent-overhead') {
      (r.notes ??= []).push('the load generators (oha, ghz) were being built from source during part of this run, the first on this machine: the CPU figures are each process\'s own, but expect them a little higher than on a quiet machine');
    }
    save(r);
    results.push(r);
    console.log(`  -> ${r.summary} (${Math.round((Date.now() - t) / 1000)} s)`);
  } catch (err) {
    console.error(`  ${name} failed: ${(err as Error).stack ?? err}`);
    results.push({ name, summary: `FAILED: ${(err as Error).message}`, figures: {}, targets: [{ name: `${name} ran`, measured: 'failed', met: false }] });
  }
}

const pad = (s: string, n: number) => s + ' '.repeat(Math.max(0, n - s.length));
console.log(`\n=== summary (${Math.round((Date.now() - started) / 1000)} s)`);
for (const r of results) {
  for (const t of r.targets) console.log(`  ${t.met ? 'met   ' : 'MISSED'}  ${pad(r.name, 15)} ${pad(t.name, 55)} ${t.measured}`);
}

// docs/benchmarks.md from every saved result (this run's and earlier ones for benchmarks not run now).
const m = machine();
const sections = ALL.map((name) => {
  const file = join(REPO, 'bench/results', `${name}.json`);
  if (!existsSync(file)) return `## ${name}\n\nNot run yet.\n`;
  const r = JSON.parse(readFileSync(file, 'utf8')) as BenchResult & { date: string; machine: Record<string, string | number> };
  const lines = [`## ${name}`, '', r.summary, '', `Measured ${r.date.slice(0, 16).replace('T', ' ')} UTC on ${r.machine.cores} × ${r.machine.cpu}, ${r.machine.memoryGiB} GiB, kernel ${r.machine.kernel}, Node.js ${r.machine.node}.`, ''];
  lines.push('| target | measured | |', '|---|---|---|', ...r.targets.map((t) => `| ${t.name} | ${t.measured} | ${t.met ? 'met' : '**missed**'} |`), '');
  lines.push('| figure | value |', '|---|---|', ...Object.entries(r.figures).map(([k, v]) => `| ${k} | ${v} |`), '');
  if (r.reference) lines.push('Reference measured in the same run:', '', '| figure | value |', '|---|---|', ...Object.entries(r.reference).map(([k, v]) => `| ${k} | ${v} |`), '');
  if (r.notes?.length) lines.push(...r.notes.map((n) => `- ${n}`), '');
  return lines.join('\n');
});
const header = `# Benchmarks

Written by \`npm run bench\` from \`bench/results/*.json\`; every figure below was
measured by that command on the machine named in its section. Targets come
from issue 7; a missed target is reported as missed, not hidden. This machine
is shared (2 cores: the load generator, the system under test and anything
else running compete), so absolute latencies are pessimistic; the JSON files
keep every figure.

Run: \`npm run bench\` (about 12 minutes: 633 s on a machine where nothing
was built yet, the load generators ghz (30 s, Go module proxy) and oha (230 s,
crates.io) building while agent-overhead runs, then cached in
~/.cache/oversell; 671 and 707 s with them cached, the second with the
top ingest scale warmed until every usage window is full, 747 s with the
query API's reference and paced runs added), \`BENCH_ONLY=webhook npm run bench\`,
or one file alone: \`node --import tsx bench/webhook.ts\`. The 10-minute soak
(5,000 agents plus 500 webhook requests/s: errors, latency, memory growth) is
not part of this run: \`npm run soak\`, results in docs/reliability.md.

Machine of this run: ${m.cores} × ${m.cpu}, ${m.memoryGiB} GiB, kernel ${m.kernel}, Node.js ${m.node}.

## Fixes measured before and after (same machine, same day)

- Agent RSS: @kubernetes/client-node, imported for one pod watch, loads every
  API model (bare import: 40 -> 111 MiB RSS). The agent ran at 101-142 MiB
  with it; with a small list+watch of its own (agent/kube/) at 64-75 MiB.
- Webhook handler: Float64Array.from(window, fn) for the window statistics
  and six labelled gauge updates per request cost the handler 135 µs CPU and
  the gateway 1.1-1.5 ms CPU per request (saturation 453 req/s); a plain loop
  fill and skipping unchanged gauges: 74 µs and 0.6-0.76 ms (saturation
  1688 req/s), p99 at 1000 req/s 126 ms -> 21 ms.
- decide(): object spread (\`{ ...common, ... }\`, \`{ ...cpu, applied }\`) left
  V8 with slow-mode objects that every later field access paid for; fields
  spelled out: 65 -> 17 µs per decision (microbenchmark, 100,000 calls),
  which the webhook handler and every query status share.
- Gateway memory at 10,000 agents: the store kept each decoded Sample by
  reference, so every sample outlived a scavenge, was promoted and died in
  the old generation (heap 400 MiB used for 148 MiB live, event-loop pauses
  up to 337 ms). Copied into objects the record owns, and window points
  recycled: RSS 603 -> 383 MiB in the same 10,000-agent run, worst pause
  90 ms.
- ListNodes at 10,000 nodes: protobufjs built one operation list of about a
  million objects for the whole response, and garbage collection was most of
  its 0.7 s; encoded node by node (bytes identical, tested): 0.25 s. The list
  is also computed in chunks of 500 that yield to heartbeats, so a full list
  no longer stalls the webhook. Still far from 50 ms: about 25 µs to encode
  and 23 µs to decode a 465-byte NodeStatus with protobufjs, plus ~20 µs of
  policy per node; 10,000 of them cannot fit. A columnar summary message for
  \`top\` would; not built.
- The fixed-rate webhook runs used autocannon's \`-R\`, which sends each
  second's quota as one burst per connection, with 20 connections waiting on
  each other: that measured p99 21-35 ms at 1000 req/s. Spread over the second
  with enough connections that slow answers do not throttle the rate
  (bench/rate-cannon.ts), and with the issue's 36 KB body (37.7 KB; it was
  27 KB), the same gateway measures what a single event loop at ~87% of its
  saturation gives: p99 157 ms. Not a regression: the old build measures the
  same on the same machine within noise.
- Webhook body: a --cpu-prof of the gateway at 1000 req/s showed JSON.parse
  of the 37.7 KB review and fastify's two prototype-poisoning regex scans of
  the whole text at ~20% of the gateway's CPU (handler ~10%, socket writes
  5%). Most of the body (oldObject, 50 images on each object) is never read.
  gateway/admit/review-reader.ts builds only the fields the handler reads and
  skips the rest by matching brackets and strings over the bytes: 190-240 ->
  70-80 µs per review (microbenchmark); gateway CPU per review at 1000 req/s
  997 -> 542-568 µs, saturation 1145 -> 1944-2032 req/s, p99 at 1000 req/s
  157 -> 23-28 ms (two runs; same generator, same machine, same day; a third
  run beside a test suite measured 43 ms and is not counted).
- decide(): the window was copied into two typed arrays and sorted per call,
  and the reason string built every time: a rank pick in one reused buffer
  and a reason built on first read: 17.7-22 -> 6.4 µs per call (3.0 µs when
  the reason is not read); the webhook handler went 63-73 -> 48 µs.
- ListNodes at 10,000: a columnar \`ListNodeSummaries\` (one packed array
  per column, encoded and decoded with plain loops, bytes identical to
  protobufjs) for \`oversell top\`: in-process with decisions, compute +
  encode + decode 75-100 ms against 500-1,100 ms for the full view. Under
  10,000 agents' ingest on the same event loop it still measures ~1.2 s: the
  time is waiting for turns of a busy loop (a summary filtered to nothing
  takes 16-36 ms), not the summary's work (<2% of the gateway's profile).
- The ingest simulator sent each second's samples in 20 bursts; it now sends
  agent i at i/N of each second, like independent agents. That made the
  gateway's ingest cost honest (about 450 -> 700 millicores at 10,000: one
  small read per sample instead of a few large ones), and on this 2-core box
  (simulator ~570 millicores beside it) GetNode p99 stays ~20 ms; scavenges
  every ~190 ms at 7.7 ms p50 show in it (the ingest thread below came of
  this).
- Agent: prom-client's default collectors woke the event loop every 10 ms
  (event-loop-delay monitor): a small exposition module of its own, 9.8 ->
  3.2-3.6 millicores; systeminformation only in a short-lived child for the
  start-up host facts: RSS 65.5 -> 61.2 MiB; \`node --jitless
  --no-expose-wasm\` in the DaemonSet (an agent needs no JIT at 1 sample/s):
  61.2 -> 53.5 MiB, CPU within noise; sampler reads one key per stat file and
  keeps pod paths while the pod set holds: 3.87 -> 3.02 ms per sample. Full
  300 s run: 10.93m -> 2.8m CPU, 71.3 -> 56.9 MiB RSS max.
- Webhook load generator: autocannon's rate is a quota per connection per
  second, so even ten staggered instances (bench/rate-cannon.ts) send bursts
  with 12 in flight. Against the same gateway build on the same machine the
  same day, at 1000 req/s: rate-cannon measured p50 3.7 ms, p99 16.8-18.1 ms
  (two runs); oha (Rust, built from crates.io) with \`-q\`, which sends at
  evenly spaced times, and \`--latency-correction\`, which times each request
  from when it was due, measured p50 0.5-0.6 ms, p99 1.69-2.12 ms (three
  runs), at ~140 millicores of its own. Saturation went 1944 (autocannon,
  the day before) -> 3562-3861 req/s, most of it the core a Node generator
  no longer takes. p99.9 stays 24-68 ms (not a target). It is not the
  gateway's GC: a --trace-gc run at 1000 req/s (p99.9 39.6 ms) had two
  mark-compacts of 2.3 and 4.3 ms and scavenges of at most 7.8 ms; not
  attributed yet (the generator and the gateway share 2 vCPUs). (k6's
  constant-arrival-rate executor was tried earlier and dropped 39% of its
  iterations on this box.)
- Ingest thread (\`--agent-port\`, gateway/ingest/ingest-thread.ts): at 10,000
  agents the main thread decoded every sample beside the webhook and the
  query API. With agent streams decoded on a worker thread and handed to the
  store in 5 ms batches, a CPU profile of the main thread shows it 83% idle
  (applying samples 5%, GC 3%). Four runs of bench/ingest.ts, each measuring
  both at 10,000 agents with the same simulator: GetNode p99 4.8-7.0 ms with
  the thread against 5.7-15.0 ms without, ListNodeSummaries p99 85-123 ms
  against 81-231 ms (three runs clearly apart, the fourth even: p99 of one
  process on a shared 2-vCPU VM moves that much between runs); gateway CPU
  668-696 against 487-600 millicores (the hand-over costs ~100), RSS
  360-366 against 343-357 MiB. The deploy manifests now send agents there.
- What is left of GetNode p99 is mostly the machine (scratch runs with the
  bench's helpers, not part of \`npm run bench\`): the same client against a
  second, idle gateway (50 agents) beside a 10,000-agent run measured p99
  2.8 ms, and against a gateway with 1-1,000 agents on a quiet box 1.4-2.9 ms
  back to back (a vCPU woken from idle adds about a millisecond more: calls
  5 ms apart measured p50 1.4 ms). The 2 ms target sits at the floor of a
  grpc-js client and server on these 2 vCPUs before any load.
- windowStart() scanned the window from its end to find where the last
  windowMs begins: 10,000 summaries spent 9.4 ms of their ~16 ms computing it.
  A binary search over the sorted points: 2.8 ms (the webhook's decide() uses
  it too).
- The ingest benchmark's nodes had no raw allocatable, so neither list
  decided any node: every simulated node now gets one 36 KB nodes/status
  review through the webhook first, as kubelets would. That made
  ListNodeSummaries p99 at 10,000 agents 154.6 ms (the build before the
  table below, same harness, same machine and day), not the 85.9 ms
  reported without decisions.
- ListNodeSummaries from a table kept as samples arrive
  (gateway/query/summary-table.ts): each sample writes its node's row with
  its decision, a call copies rows in a name order kept between calls, and
  the columns are encoded in a loop per kind. In-process at 10,000 nodes
  with decisions: sort 5.8 + rows 46.7 + encode 8.6 ms -> rows 1.7 +
  encode 4.9 ms (medians of 15). Through the benchmark at 10,000 agents:
  p99 154.6 -> 24.9-43.9 ms (six runs). The cost moved to ingest: one
  decide() per sample on the main thread, ~20 MB/s more garbage there
  (sampling heap profile: 43.6 MB/s on the main thread at 10,000 agents, of
  which structured clones of the thread's batches 18.9, the table's
  decisions ~20).
- GetNode from ghz (Go), beside the CLI's grpc-js client: the same gateway
  with the simulator paused measured p99 0.59-0.92 ms from ghz and
  5.1-5.6 ms from the grpc-js client, so most of the old figure was the
  client process. Under the 10,000 agents ghz measures 1.89-2.29 ms on a
  quiet machine (2,000 calls: 1.89, 2.18, 2.18; 6,000 calls: 2.29; 3.93 in
  a run beside a large file copy), so the target is at the edge: the main
  thread allocates ~112 MB/s under back-to-back GetNode (grpc-js and
  protobufjs objects, ~44 KB per call, plus the ingest above), a scavenge
  of 1-2 ms every ~100 ms (--trace-gc), and the calls that meet one are the
  p99.
- Gateway Node flags: the benchmarks now start the gateway with the flags
  of its container command in deploy/base/gateway.yaml (the webhook
  benchmark had run it without the deployed heap cap). With the cap alone
  (--max-old-space-size=320), V8 sizes its heap growing for a small device:
  at 1000 reviews/s the old generation was collected 38 times in 10 s with
  ~60 MB in use, p99 14.1 ms and 434 µs of gateway CPU per review, against
  no mark-compact, 2.5 ms and 309 µs without the cap. --heap-growing-percent=50
  beside the cap: 1 mark-compact, p99 2.6 ms, 263 µs, RSS the same
  (bench-like oha runs of 10 s; 1024 MB still collects 27 times, 2048
  none). At 10,000 agents the gateway's RSS went 427 -> 449 MiB, inside
  the cap's bound either way. The flag is not allowed in NODE_OPTIONS, so
  both install paths put the flags in the command.
- Where GetNode's tail under ingest comes from, measured by switching one
  thing at a time inside one running gateway at 10,000 agents (a file the
  gateway polls; ghz runs of 3,000 calls alternating between the two
  settings, 4-5 pairs; scratch runs, not part of \`npm run bench\`):
  dropping every sample on the main thread (decoded by the thread but not
  stored) took p99 3.12 -> 1.84 ms and p90 0.85 -> 0.57 ms, so the main
  thread's work per sample is what there is to win; not updating the
  summary table alone 2.81 -> 2.52 ms. No gain: applying a batch in slices
  of 16 samples between which the event loop polls (3.53 / 3.64 ms), the
  ingest thread at nice 10 (per-thread setpriority), --single-threaded-gc
  and --no-parallel-scavenge (across runs, within noise). Two nice-19 CPU
  burners beside a paused simulator did not raise the tail (p99 1.4-1.8
  against 2.1-2.3 ms without them), so it is not CPU taken by the
  simulator.
- Samples cross from the ingest thread as rows of numbers
  (wire/message-row.ts: one Float64Array per batch, every scalar of the
  Sample laid out from the loaded descriptor, read straight into the
  record's objects; a sample with pods still crosses as an object). Main
  thread per sample at 10,000 nodes (microbenchmark: receive a batch,
  store, table row, metric; --cpu-prof): receiving 3.3 -> 0.5 µs, copying
  into the record 1.35 -> 1.46 µs (assignInto -> the row reader), 10.9 ->
  8.5 µs in all. A/B inside one gateway as above, 5 pairs: GetNode p99
  7.15 -> 4.85 ms, p90 1.89 -> 1.55 ms (every pair lower; that hour the
  host was noisy, p50 0.56 against 0.33 ms earlier). With it: an empty
  pods list no longer replaces the record's empty one (scavenge survivors
  430 -> 327 KB, pause 1.95 -> 1.67 ms in the microbenchmark), and samples
  are counted into prom-client at scrape time instead of one labelled
  inc() per sample. The full run after these measured GetNode p99 2.33 ms
  at 10,000 agents and 1.67-1.69 ms at 1,000 and 5,000, where the
  gateway's ingest work is a tenth to a half of it (the ingest benchmark
  alone, 30 minutes later: 2.97, 2.33 and 1.61 ms; simulator paused
  0.92): on this host that day the tail with any simulator running sat
  near 1.7 ms, and the 2 ms target stays at the edge.
- Ingest thread heap: the thread is a second V8 heap, and --trace-gc at
  10,000 agents shows it holding ~70 MiB live (~7 KB per agent; its
  mark-compacts run every ~3 s, 70 -> 105 MB, ~12 MB/s promoted by grpc-js
  per message) beside the main thread's ~146 MiB. A cap of its own (the
  worker's resourceLimits, half the main heap) was tried and does not
  apply: beside --max-old-space-size, V8's flag wins (a worker asked for
  100 MB ran with a 368 MB limit), so both heaps run under the one cap.
  What is there instead: the thread reports its heap
  (oversell_ingest_thread_heap_bytes, on the Gateway resident memory
  panel), and Helm's \`gateway.heapMb\` sets the cap with the memory limit.
- Scaling: handler time at 10,000 nodes measured 1.85x the 100-node
  figure in one full run and 1.04x right after. process.cpuUsage() counts
  V8's helper threads, which could still be marking the heap that building
  a large store had grown; sizes were also timed one after another, so a
  busy spell of the host landed on one size. A full GC before timing, and
  rounds taken in turn across the sizes: 0.98-1.08x over seven runs (1,000
  and 5,000 nodes up to 1.3x in one of them).
- Usage windows as numbers (gateway/decide/usage-window.ts): a node's minute
  of 1 Hz points was 61 objects with boxed doubles, all in the old
  generation; now one Float64Array, five numbers a point. At 10,000 agents
  with full windows (70 s after connecting), two builds alternating in the
  same harness: main heap used 213-223 -> 100-109 MiB, gateway RSS max
  512-517 -> 441-442 MiB, CPU within noise, GetNode p99 not moved. The
  previous full run's 465 MiB had windows a sixth full (10 s of warm-up):
  the ingest benchmark now warms its top scale 70 s.
- The newest sample kept as its row of numbers (NodeRecord.latestRow; the
  query API builds the Sample when asked): V8 kept the number fields of the
  record's Sample objects tagged (written by generic keyed stores), so each
  number read into them was a new heap number that lived until the next
  sample a second later, outlived scavenges and was promoted. Objects of
  the main thread's ingest path alive after a full GC (sampling heap
  profile, 200,000 samples at 10,000 nodes): 1,050 -> 117 KB sampled, 928
  of them from the row reader. Main thread per sample (microbenchmark)
  5.4-6.5 -> 4.6-5.5 µs. At 10,000 agents under back-to-back GetNode
  (--trace-gc, two builds alternating): the main thread's scavenge p50
  1.22-1.85 -> 0.77-0.85 ms at the same rate.
- Ingest thread batches: one Float64Array of samples behind their stream
  id and arrival time (the main thread knows each stream's node from its
  attach), where each sample had been an object with its node's name. A
  50 s CPU profile of the thread at 10,000 agents had postMessage at 1.08 s
  of 12.4 s busy. Gateway CPU 417/474 -> 405/462 millicores (two pairs).
- grpc-js's StreamDecoder kept each stream's last message pieces (slices of
  the DATA frame) until the stream's next message, a second later: 3.7 of
  the 4.7 MB sampled live on the ingest thread at 10,000 agents. A patch
  (then patch-package on the installed file; now
  the same fix at run time, lib/grpc-stream-decoder.ts): the thread's
  scavenge p50 3.6-7.3 -> 2.1-3.5 ms, no mark-compact of its heap in the
  GetNode runs, gateway RSS max 440-443 -> 406-422 MiB (two pairs).
- Where GetNode's tail is not: halving the main thread's scavenge pauses,
  halving the ingest thread's and the CPU saved above each left GetNode p99
  inside its run-to-run spread: 1.5-3.8 ms over 63 ghz runs of 6,000 calls
  at 10,000 agents in one afternoon (every build and setting; in 14 of 19
  sets of back-to-back runs the first was the highest). Tried and not
  kept: channelz off (grpc-js 1.14.7's forceShutdown then no longer
  destroys open sessions, it walks a map only its channelz handler fills,
  so an agent's stream outlived the gateway's close: a test caught it);
  --max-semi-space-size=32 (main thread scavenges 7-10/s at 1.3-1.7 ms ->
  4.6-5/s at 2.1-2.3 ms, p99 1.80-2.69 against 2.15-3.55 ms, RSS +66 MiB
  to 506).
- ListNodeSummaries p99 was the maximum of 20 calls: the first full run
  after the changes above measured 66.8 ms at 10,000 agents (missed), the
  ingest benchmark alone right after 33.4 ms; main-thread mark-compact
  pauses of 23-35 ms were in the --trace-gc runs, and one call that meets
  one decides a maximum. The query client now makes 100 calls, so the p99
  is their 99th. That first run's other figures at 10,000 agents: GetNode
  p99 2.15 ms (1.33 and 1.49 ms at 1,000 and 5,000), gateway 513
  millicores, RSS 441 MiB with full windows; the run alone after it:
  GetNode 2.45 ms, 538 millicores, 458 MiB. The next full run, with 100
  calls: ListNodeSummaries p99 34.4 ms, GetNode p99 2.37 ms (missed;
  1.85 and 2.2 ms at 1,000 and 5,000 agents, webhook p99 3.16 against 1.71
  ms in the first run: a busier hour).
- Scaling's memory per node counted the V8 heap only, and the usage
  windows and newest samples are now Float64Arrays outside it: it read
  0.7 KiB per node at 10,000. Counting array buffers too, but right after
  gc() (their bytes are freed after it returns), the full run read 0.9-3.3
  KiB, out of order across sizes. Heap plus array buffers after a second
  GC 100 ms later: 3.3-3.4 KiB at every size, two runs (7.1 KiB of heap
  alone before the windows and rows were numbers); 3.3-3.4 KiB from 1,000
  nodes up in the full run published here.
- The webhook handler reads the same windows: 25.2 µs per review in the
  previous full run, 13.8 and 16.1 µs in the two after these changes.
- Where GetNode's tail goes, call by call, at 10,000 agents (scratch runs,
  not part of \`npm run bench\`): a gateway build that timestamps a query's
  arrival in grpc-js, its handler, its sendTrailers and every ingest batch,
  main-thread GC from a PerformanceObserver, tcpdump on the loopback for the
  packets, and ghz's per-call times (ghz records when a call ended, not when
  it began). For the slowest 1% of 6,000 back-to-back calls (3.4-6.3 ms on
  average, by run), the request reached the gateway's JavaScript 1.3-2.9 ms
  after it was on the wire (the median call: 0.08 ms), and the trailers
  left 1.1-2.3 ms after the handler had sent them (median: 0.03-0.1 ms).
  Ingest batches overlapped 0.2-1.6 ms of such a call and main-thread GC
  0-0.7 ms; for the rest the main thread was not running. Over a ghz run
  the kernel took the CPU from the main thread 1,800-2,000 times a second
  (involuntary context switches: another thread run on its CPU, ghz's
  wake-ups included), from the ingest thread 1,300-1,600.
  Node's HTTP/2 sends a unary answer's trailers in a second write, one
  event-loop turn after the message (every call's packets: the 11-byte
  HEADERS frame after the ~1.5 KB one), so each answer needs the main
  thread twice.
- Tried against it, two settings alternating over gateway restarts, three
  ghz runs each, twice: ingest batches applied from setImmediate in slices
  of 32 rows, after the answers' writes (p99 median 3.08 -> 3.02 ms); the
  simulator at SCHED_IDLE instead of nice 19 (2.45 -> 2.70 ms); TCP_NODELAY
  on the gateway's gRPC sockets (1,000 nodes, paced: p50 1.10 -> 1.08 ms).
  Later, the ingest thread at nice 10 (the kernel's counts show it set on
  that thread alone): p99 median 2.92 -> 2.26 ms, ranges 1.89-3.17 against
  1.75-3.00, the main thread's involuntary switches the same (~2,000/s).
  None moved it beyond the spread between runs; none is kept.
- A calmer client is slower, not faster (as the earlier note on the
  machine found). With the simulator paused (no ingest), GetNode paced at
  250/s: p50 1.12 ms, p99 2.66-2.92 ms, against 0.37 and 1.07-1.16 ms back
  to back; a bare grpc-js server answering a one-field message the same
  way: p50 0.66-0.70 ms, p99 1.25-2.70 ms, with 0.52-0.66 ms of process CPU
  per call against 0.19-0.24 ms back to back. Two processes ping-ponging
  UDP 4 ms apart: p50 0.09, p99 0.2 ms, so waking a thread is not the
  cost; running the call's path cold is. This VM: 2 vCPUs (Firecracker),
  kernel 6.18, PREEMPT_NONE, HZ=250.
- So the ingest benchmark now measures it every run: the gateway's CPU and
  its main thread's preemptions during the ghz run, GetNode paced at 250/s
  against the idle gateway, and a reference: bench/grpc-floor.ts, a bare
  grpc-js server (same grpc-js, proto, loader options and Node flags)
  answering every GetNode with sim-0's NodeStatus, measured by the same
  ghz, back to back and paced.
- Trust checks (issue 19): the webhook now reads status.capacity, checks
  the writer's identity, verifies the HMAC of the grant record it finds and
  signs the one it writes. In-process, the fixture review (27 KB) against a
  node with 60 samples, best of 7 rounds of 10,000 calls, old and new build
  alternated on the same machine (2 × Intel Xeon, kernel 6.18) on 2026-11-24:
  handler 17.1 -> 33.7 µs per steady-state review (the object already carries
  our record) with two HMAC-SHA256 (2.3 µs each) and the extra parsing; with
  each record's proof remembered (a Map lookup when the record repeats, as a
  kubelet's every 10 s does) 17.1 -> 22.9 µs, first write 16.3 -> 22.5 µs;
  with reading the body 60.6 -> 68.4 µs. At 500 reviews/s (5,000 nodes) that
  is 3 ms of CPU a second more.
- The full run published here meets every target: GetNode p99 1.84 ms at
  10,000 agents. The four full runs of the last two days measured 2.33,
  2.15, 2.37 and 1.84 ms: the figure sits on the target and a run lands
  either side. Its reference, on the quiet machine: the idle gateway 0.73
  ms back to back and 2.21 ms paced at 250/s, the bare grpc-js server with
  the same answer 0.94 and 2.2 ms. Without the load the gateway answers as
  fast as grpc-js answering a fixed message; what the 10,000 agents add is
  the two vCPUs they share. The main thread's involuntary context
  switches during the ghz run: 891 a second at 1,000 agents, 1,557 at
  5,000, 2,256 at 10,000 (the client's own wake-ups on its CPU count
  among them, which is why the count did not fall with the ingest thread
  at nice 10).
`;
writeFileSync(join(REPO, 'docs/benchmarks.md'), [header, ...sections].join('\n') + '\n');
console.log('\nwrote docs/benchmarks.md');
process.exit(results.some((r) => r.summary.startsWith('FAILED')) ? 1 : 0);
