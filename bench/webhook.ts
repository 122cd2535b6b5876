// Webhook latency and throughput over HTTPS keep-alive with a realistic 36 KB
// nodes/status AdmissionReview, driven by oha (bench/oha.ts) from a separate
// process, at 500 and 1000 requests/s (open model) and at saturation; plus the
// handler's own CPU time per request, measured in-process without HTTP.
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { reviewNode } from '../gateway/admit/node-review.js';
import { GrantProof } from '../gateway/decide/grant-proof.js';
import { NODE_REVIEW_FIELDS, readJsonFields } from '../gateway/admit/review-reader.js';
import { DEFAULT_POLICY } from '../gateway/decide/policy.js';
import { flagsPolicySource } from '../gateway/policies/policy-source.js';
import { NodeStore } from '../gateway/store/node-store.js';
import { watchProcess } from './proc-stats.js';
import { ensureOha, oha, OHA_VERSION } from './oha.js';
import { ensureLoadgen } from './loadgen.js';
import { freePort, REPO, startChild, startGateway } from './processes.js';
import { round, runIfMain, type BenchResult } from './result.js';
import { storeSample } from '../test/helpers/store-sample.js';

const NODE = 'bench-0';

/** Compact review bytes the issue asks for: "realistic 36 KB nodes/status AdmissionReviews". */
export const REVIEW_BYTES = 36 * 1024;

/**
 * A kubelet status write for `name`: the fixture (50 images, the kubelet's
 * nodeStatusMaxImages; object and oldObject) is 27 KB compact. Cloud nodes
 * carry more metadata than it has: labels and annotations of the kind GKE and
 * EKS nodes carry are added, on both objects, up to REVIEW_BYTES.
 */
export function reviewBody(name = NODE): string {
  type Obj = { metadata: { name: string; labels?: Record<string, string>; annotations?: Record<string, string> } };
  const review = JSON.parse(readFileSync(join(REPO, 'test/fixtures/admission/node-status-update.json'), 'utf8')) as {
    request: { name: string; object: Obj; oldObject?: Obj; userInfo: { username: string } };
  };
  review.request.name = name;
  review.request.userInfo.username = `system:node:${name}`;
  review.request.object.metadata.name = name;
  if (review.request.oldObject) review.request.oldObject.metadata.name = name;
  const cloud: Array<[string, string]> = [
    ['cloud.google.com/gke-nodepool', 'batch-pool-e2-standard-16'], ['cloud.google.com/gke-os-distribution', 'cos'],
    ['cloud.google.com/machine-family', 'e2'], ['node.kubernetes.io/instance-type', 'e2-standard-16'],
    ['topology.kubernetes.io/region', 'europe-west4'], ['topology.kubernetes.io/zone', 'europe-west4-b'],
    ['topology.gke.io/zone', 'europe-west4-b'], ['cloud.google.com/gke-boot-disk', 'pd-balanced'],
    ['cloud.google.com/gke-container-runtime', 'containerd'], ['cloud.google.com/gke-cpu-scaling-level', '16'],
  ];
  for (let i = 0; JSON.stringify(review).length < REVIEW_BYTES; i++) {
    for (const o of [review.request.object, review.request.oldObject]) {
      if (!o) continue;
      const [k, v] = cloud[i % cloud.length]!;
      (o.metadata.labels ??= {})[`${k}${i >= cloud.length ? `-${i}` : ''}`] = v;
      (o.metadata.annotations ??= {})[`node.gke.io/last-applied-node-labels-${i}`] = cloud.map(([a, b]) => `${a}=${b}`).join(',');
    }
  }
  return JSON.stringify(review);
}

/**
 * reviewNode on one parsed 36 KB review against a store of `nodes` nodes with
 * 60 samples each, warmed up: each call of review / reviewWithParse times one
 * round of `calls` and gives CPU µs per call.
 */
export function handlerRounds(nodes = 1): { review: (calls: number) => number; reviewWithParse: (calls: number) => number } {
  const store = new NodeStore({ retainMs: 60_000, forgetAfterMs: 600_000 });
  const now = Date.now();
  for (let i = 0; i < nodes; i++) {
    const name = `bench-${i}`;
    store.attach(name, 'i', null, i + 1);
    for (let s = 1; s <= 60; s++) {
      storeSample(store, name, i + 1, {
        seq: s, timestampMs: now - (60 - s) * 1000, cpuUsageMillicores: 500 + (s % 5) * 50, memoryWorkingSetBytes: 4 * 2 ** 30,
        capacity: { cpuMillicores: 8000, memoryBytes: 32 * 2 ** 30 }, pressure: null,
        requests: { cpuMillicores: 6000, memoryBytes: 20 * 2 ** 30, podCount: 30, known: true }, podsIncluded: false, pods: [],
      }, now);
    }
  }
  const policies = flagsPolicySource(DEFAULT_POLICY);
  const deps = {
    usage: (n: string) => store.usage(n, now),
    policyFor: (labels: Record<string, string>) => policies.select(labels),
    proof: new GrantProof(randomBytes(32)),
  };
  const body = Buffer.from(reviewBody('bench-0'));
  const parsed = readJsonFields(body, NODE_REVIEW_FIELDS);
  for (let i = 0; i < 2000; i++) reviewNode(parsed, deps); // warm the JIT
  // process.cpuUsage() counts every thread: a marking cycle that building a
  // large store started would go on on V8's helper threads during the rounds
  // and be counted as handler time. Done with first, when exposed.
  (globalThis as { gc?: () => void }).gc?.();
  const timed = (fn: () => void) => (calls: number) => {
    const t0 = process.cpuUsage();
    for (let i = 0; i < calls; i++) fn();
    const t = process.cpuUsage(t0);
    return (t.user + t.system) / calls;
  };
  return {
    review: timed(() => reviewNode(parsed, deps)),
    reviewWithParse: timed(() => reviewNode(readJsonFields(body, NODE_REVIEW_FIELDS), deps)),
  };
}

/** The best of five rounds: other processes on a shared machine only ever add time. */
export function bestOf<T>(rounds: number, candidates: readonly T[], round: (c: T) => number): number[] {
  const best = candidates.map(() => Infinity);
  for (let r = 0; r < rounds; r++) candidates.forEach((c, i) => (best[i] = Math.min(best[i]!, round(c))));
  return best;
}

/** reviewNode() alone, on an already parsed review and with parsing, against a store of `nodes`: CPU µs per call, best of five rounds. */
export function handlerCpuMicros(iterations = 20_000, nodes = 1): { perCallUs: number; withParseUs: number } {
  const h = handlerRounds(nodes);
  const [perCallUs, withParseUs] = bestOf(5, [() => h.review(iterations / 5), () => h.reviewWithParse(iterations / 20)], (fn) => fn());
  return { perCallUs: perCallUs!, withParseUs: withParseUs! };
}

export async function run(options: { quick?: boolean } = {}): Promise<BenchResult> {
  const seconds = options.quick ? 8 : 20;
  const ohaBin = await ensureOha();
  const loadgenBin = await ensureLoadgen();
  const gw = await startGateway({ agentThread: false });
  const sim = spawn(process.execPath, ['--import', 'tsx', join(REPO, 'bench/sim-agents.ts'), `127.0.0.1:${gw.ports.grpc}`, '1', 'bench'], { stdio: ['ignore', 'pipe', 'inherit'] });
  const dir = mkdtempSync(join(tmpdir(), 'oversell-bench-webhook-'));
  const bodyFile = join(dir, 'review.json');
  writeFileSync(bodyFile, reviewBody());
  const url = `https://127.0.0.1:${gw.ports.webhook}/mutate/nodes`;
  try {
    await new Promise((r) => setTimeout(r, 2500)); // a few samples for the node
    console.log(`  webhook: body ${readFileSync(bodyFile).length} bytes; warm-up`);
    await oha(ohaBin, url, bodyFile, ['-c', '10', '-z', '3s']);
    interface Run { p50: number; p99: number; p99_9: number; reqPerS: number; failed: number; cpuUsPerRequest: number; generatorMillicores: number }
    const runs: Record<string, Run> = {};
    const measure = async (label: string, args: string[]) => {
      const w = watchProcess(gw.pid);
      const r = await oha(ohaBin, url, bodyFile, [...args, '-z', `${seconds}s`]);
      const cpu = w.stop();
      const run = { p50: r.p50, p99: r.p99, p99_9: r.p99_9, reqPerS: r.reqPerS, failed: r.failed, cpuUsPerRequest: (cpu.cpuSeconds * 1e6) / Math.max(1, r.total), generatorMillicores: r.generatorMillicores };
      runs[label] = run;
      if (r.failed > 0) console.log(`    failures: ${JSON.stringify(r.failures)}`);
      console.log(`    p50 ${run.p50} ms  p99 ${run.p99} ms  p99.9 ${run.p99_9} ms  ${Math.round(run.reqPerS)} req/s  failed ${run.failed}  gateway CPU ${Math.round(run.cpuUsPerRequest)} µs/request  oha ${run.generatorMillicores} millicores`);
    };
    // Kubelets do not wait for each other: requests due at evenly spaced
    // times on 50 connections, each timed from when it was due.
    for (const rate of [500, 1000]) {
      console.log(`  webhook: ${rate} requests/s for ${seconds}s`);
      await measure(String(rate), ['-c', '50', '-q', String(rate), '--latency-correction']);
    }
    console.log(`  webhook: saturation (50 connections, no rate limit) for ${seconds}s`);
    await measure('saturation', ['-c', '50']);
    // The references, in the same run and under the same load: bare servers reading the same body and answering a fixed review.
    const references: Record<string, Awaited<ReturnType<typeof oha>>> = {};
    for (const ref of [
      { key: 'bare_node_https', what: 'bare node:https', start: (port: number) => startChild('bare-webhook', process.execPath, ['--import', 'tsx', join(REPO, 'bench/bare-webhook.ts'), String(port), gw.tlsDir]) },
      { key: 'go_net_http', what: 'Go net/http', start: (port: number) => startChild('go-webhook', loadgenBin, ['bare-webhook', '--port', String(port), '--tls-dir', gw.tlsDir]) },
    ]) {
      const port = await freePort();
      const server = ref.start(port);
      try {
        await server.waitForLine((line) => line === 'listening', 20_000);
        const refUrl = `https://127.0.0.1:${port}/mutate/nodes`;
        await oha(ohaBin, refUrl, bodyFile, ['-c', '10', '-z', '3s']);
        console.log(`  webhook: reference (${ref.what}), 1000 requests/s for ${seconds}s`);
        const r = await oha(ohaBin, refUrl, bodyFile, ['-c', '50', '-q', '1000', '--latency-correction', '-z', `${seconds}s`]);
        console.log(`    p50 ${r.p50} ms  p99 ${r.p99} ms  p99.9 ${r.p99_9} ms  ${Math.round(r.reqPerS)} req/s  failed ${r.failed}`);
        references[ref.key] = r;
      } finally {
        await server.stop();
      }
    }
    const bareRun = references.bare_node_https!;
    const goRun = references.go_net_http!;
    const handler = handlerCpuMicros();
    console.log(`  handler (reviewNode, parsed): ${round(handler.perCallUs, 1)} µs CPU; with reading the 36 KB body (review-reader.ts): ${round(handler.withParseUs, 1)} µs`);
    const r1000 = runs['1000']!;
    const failures = Object.values(runs).reduce((n, r) => n + r.failed, 0);
    const overBare = r1000.p99 / bareRun.p99;
    const overGo = r1000.p99 / goRun.p99;
    return {
      name: 'webhook',
      summary: `p99 ${r1000.p99} ms at 1000 req/s; saturation ${Math.round(runs.saturation!.reqPerS)} req/s; handler ${round(handler.perCallUs, 1)} µs CPU`,
      figures: {
        body_bytes: readFileSync(bodyFile).length,
        ...Object.fromEntries(Object.entries(runs).flatMap(([k, r]) => [
          [`${k}_p50_ms`, r.p50], [`${k}_p99_ms`, r.p99], [`${k}_p99_9_ms`, r.p99_9],
          [`${k}_req_per_s`, Math.round(r.reqPerS)], [`${k}_gateway_cpu_us_per_request`, Math.round(r.cpuUsPerRequest)], [`${k}_oha_millicores`, r.generatorMillicores],
        ])),
        handler_cpu_us: round(handler.perCallUs, 1),
        handler_with_parse_cpu_us: round(handler.withParseUs, 1),
        failed_requests: failures,
        p99_over_bare_node_https: round(overBare, 2),
        p99_over_go_net_http: round(overGo, 2),
      },
      reference: Object.fromEntries(Object.entries(references).flatMap(([k, r]) => [
        [`${k}_1000_p50_ms`, r.p50], [`${k}_1000_p99_ms`, r.p99], [`${k}_1000_p99_9_ms`, r.p99_9], [`${k}_1000_req_per_s`, Math.round(r.reqPerS)], [`${k}_failed`, r.failed],
      ])),
      targets: [
        { name: 'webhook p99 <= 5 ms at 1000 req/s', measured: `${r1000.p99} ms`, met: r1000.p99 <= 5 },
        { name: 'handler CPU <= 100 µs per request', measured: `${round(handler.perCallUs, 1)} µs`, met: handler.perCallUs <= 100 },
        { name: 'no failed requests', measured: String(failures), met: failures === 0 },
        { name: 'webhook p99 within 1.5x of a bare node:https server\'s at 1000 req/s, same run', measured: `${round(overBare, 2)}x (${r1000.p99} ms against ${bareRun.p99} ms; ${round(overGo, 2)}x a Go net/http server's ${goRun.p99} ms)`, met: overBare <= 1.5 },
      ],
      notes: [
        `load generator: oha ${OHA_VERSION} in its own process, HTTPS keep-alive, 50 connections; 500 and 1000 req/s with -q (requests due at evenly spaced times, an open model) and --latency-correction (each timed from when it was due, so a stall is not hidden by the generator waiting); saturation: no rate limit`,
        `body: the ${Math.round(readFileSync(bodyFile).length / 1024)} KB kubelet-shaped nodes/status review (50 images, object and oldObject, cloud labels and annotations)`,
        'gateway CPU µs/request is the whole gateway process (TLS, HTTP, JSON parse, handler) divided by requests served',
        'load generator and gateway share the same 2 cores',
        'references: bench/bare-webhook.ts, a bare node:https server, and bench/loadgen bare-webhook, a Go net/http server (HTTP/1.1, as the node one), each in its own process with the gateway\'s certificate, reading the whole body and answering one fixed AdmissionReview; the same oha load at 1000 req/s, right after the gateway\'s runs',
      ],
    };
  } finally {
    sim.kill('SIGTERM');
    await gw.stop();
  }
}

runIfMain(import.meta.url, run);
