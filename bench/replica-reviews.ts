// Reviews sent to several gateway replicas the way the kube-apiserver sends
// them to a webhook Service, for bench/replicas.ts. Open loop: the k-th review
// is due at start + k/rate and measured from then (no coordinated omission);
// each goes to the next endpoint the Service lists (round-robin), over HTTPS
// keep-alive, with the webhook's timeout.
//
// Failures are handled exactly as the API server's webhook client handles
// them (k8s.io/apiserver .../webhook/mutating/dispatcher.go calls
// client.Post().Body(review).Do(ctx) once: no WithExponentialBackoff, which
// only the generic authn/authz/audit webhooks use; client-go's rest.Request
// retries a transport error only for GET, and a response only when it is a
// 429 or 5xx carrying Retry-After; under it Go's net/http Transport re-sends
// a request on a new connection only when the failed one was a reused
// keep-alive connection and nothing of the request had been written to it).
// So a refused connection, a reset after the review was written, or a
// timeout is a review left unanswered (failurePolicy Ignore: the status write
// passes unchanged). A reused connection that fails before any byte of the
// review went out is retried on a new one, to whichever endpoint the Service
// then picks. Beside that, each unanswered review is also tried once more on
// another listed endpoint, only to report what a retrying client would have
// got (whatIf); it never counts as answered.
//
//   node --import tsx bench/replica-reviews.ts '<config JSON>'
// stdin: `remove <endpoint>` (the Service no longer lists it), `mark` (the
// kill: later reviews are "after"). stdout: `started`, then `result <json>`.
import { Agent, request } from 'node:https';
import { readFileSync } from 'node:fs';
import { createInterface } from 'node:readline';
import { percentile, round } from './result.js';

export interface ReplicaReviewsConfig {
  endpoints: Array<{ name: string; url: string; ca: string }>;
  rate: number;
  warmupS: number;
  durationS: number;
  /** Nodes are <prefix>-0 .. <prefix>-(count-1), named in a permutation. */
  prefix: string;
  count: number;
  timeoutMs: number;
  /** An AdmissionReview JSON body with nodePlaceholder and uidPlaceholder in it. */
  template: string;
  nodePlaceholder: string;
  uidPlaceholder: string;
}

export interface PhaseResult {
  sent: number;
  ok: number;
  errors: Record<string, number>;
  latencyMs: { p50: number; p99: number; max: number };
}

export interface Failure {
  /** Due time after the mark (negative: before it), ms. */
  atMs: number;
  endpoint: string;
  kind: string;
  /** A retrying client's second try on another endpoint: answered in this many ms from due, or null. */
  whatIfMs: number | null;
}

export interface ReplicaReviewsResult {
  before: PhaseResult;
  after: PhaseResult;
  /** Reviews the Go transport would have re-sent on a new connection (a reused one failed before anything was written). */
  transparentRetries: number;
  failures: Failure[];
  /** Per endpoint: reviews answered. */
  answeredBy: Record<string, number>;
  requestBytes: number;
  answerBytes: number;
  cpuMs: number;
  /** The latest any review was sent after it was due: a client that fell behind says so. */
  dispatchLagMaxMs: number;
  /** Per second of the run (warm-up included), by due time: [answered, unanswered]. */
  perSecond: Array<[number, number]>;
  /** Reviews left unanswered, and of them: on each endpoint, answered by the what-if retry (and its slowest), the last one's due time after the mark. */
  unanswered: number;
  unansweredOn: Record<string, number>;
  whatIfAnswered: number;
  whatIfMaxMs: number | null;
  lastFailureAtMs: number | null;
}
/** Failures kept with their details in the result: the rest are only counted. */
const FAILURE_DETAILS = 200;

type Outcome = { kind: ''; answer: string } | { kind: string; reused: boolean; nothingWritten: boolean };

const errorKind = (err: NodeJS.ErrnoException): string =>
  err.message === 'timeout' ? 'timeout' : err.code === 'ECONNREFUSED' ? 'refused' : err.code === 'ECONNRESET' || err.code === 'EPIPE' ? 'reset' : (err.code ?? 'transport');

function post(agent: Agent, url: string, body: Buffer, deadline: number): Promise<Outcome> {
  return new Promise((resolve) => {
    let written = -1;
    let socketOf: { bytesWritten: number } | undefined;
    const req = request(url, { method: 'POST', agent, headers: { 'content-type': 'application/json', 'content-length': body.length } }, (res) => {
      const parts: Buffer[] = [];
      res.on('data', (c: Buffer) => parts.push(c));
      res.on('end', () => {
        clearTimeout(timer);
        const answer = Buffer.concat(parts).toString();
        resolve(res.statusCode === 200 ? { kind: '', answer } : { kind: `status-${res.statusCode}`, reused: req.reusedSocket, nothingWritten: false });
      });
      res.on('error', (err) => {
        clearTimeout(timer);
        resolve({ kind: errorKind(err), reused: req.reusedSocket, nothingWritten: false });
      });
    });
    req.on('socket', (s) => {
      socketOf = s;
      written = s.bytesWritten;
    });
    const timer = setTimeout(() => req.destroy(new Error('timeout')), Math.max(0, deadline - Date.now()));
    req.on('error', (err: NodeJS.ErrnoException) => {
      clearTimeout(timer);
      resolve({ kind: errorKind(err), reused: req.reusedSocket, nothingWritten: socketOf !== undefined && socketOf.bytesWritten === written });
    });
    req.end(body);
  });
}

function checkAnswer(answer: string, uid: string): string {
  try {
    const r = (JSON.parse(answer) as { response?: { uid?: string; allowed?: boolean } }).response;
    if (!r) return 'bad-json';
    if (r.uid !== uid) return 'uid-mismatch';
    return r.allowed ? '' : 'not-allowed';
  } catch {
    return 'bad-json';
  }
}

function coprimeStride(count: number): number {
  const gcd = (a: number, b: number): number => (b === 0 ? a : gcd(b, a % b));
  if (count <= 2) return 1;
  for (let s = Math.floor(count * 0.618); ; s++) if (gcd(s, count) === 1) return s;
}

export async function runReviews(c: ReplicaReviewsConfig, control: { onLine(fn: (line: string) => void): void }): Promise<ReplicaReviewsResult> {
  // No cap on connections, as Go's Transport under client-go has none (MaxConnsPerHost 0).
  const agents = new Map(c.endpoints.map((e) => [e.name, new Agent({ keepAlive: true, ca: readFileSync(e.ca) })] as const));
  const urls = new Map(c.endpoints.map((e) => [e.name, e.url] as const));
  let listed = c.endpoints.map((e) => e.name);
  let next = 0;
  /** The Service's next pick: round-robin over the endpoints it lists now. */
  const pick = () => (listed.length === 0 ? undefined : listed[next++ % listed.length]);
  /** Another listed endpoint than `not`, for the what-if retry (leaves the Service's rotation as it is). */
  const other = (not: string | undefined) => {
    const choices = listed.filter((n) => n !== not);
    return choices[Math.floor(Math.random() * choices.length)];
  };
  let markAt = Number.POSITIVE_INFINITY;
  control.onLine((line) => {
    const [verb, arg] = line.trim().split(/\s+/);
    if (verb === 'remove' && arg) listed = listed.filter((n) => n !== arg);
    if (verb === 'mark') markAt = Date.now();
  });

  // Each node's body built once, its uid written in place per review: the client's CPU is the TLS and HTTP, not string work.
  const UID_LENGTH = 36;
  const template = readFileSync(c.template, 'utf8').replace(c.uidPlaceholder, 'u'.repeat(UID_LENGTH));
  const bodies = new Map<string, { bytes: Buffer; uidAt: number }>();
  const bodyFor = (node: string, uid: string): Buffer => {
    let t = bodies.get(node);
    if (!t) {
      const bytes = Buffer.from(template.replaceAll(c.nodePlaceholder, node));
      t = { bytes, uidAt: bytes.indexOf('u'.repeat(UID_LENGTH)) };
      bodies.set(node, t);
    }
    const b = Buffer.from(t.bytes);
    b.write(uid, t.uidAt, 'latin1');
    return b;
  };
  const stride = coprimeStride(c.count);
  const phases = { before: { sent: 0, ok: 0, errors: {} as Record<string, number>, lat: [] as number[] }, after: { sent: 0, ok: 0, errors: {} as Record<string, number>, lat: [] as number[] } };
  const failures: Failure[] = [];
  const answeredBy: Record<string, number> = {};
  let transparentRetries = 0;
  let answerBytes = 0;
  let answers = 0;
  const runId = Math.random().toString(16).slice(2, 10);

  const one = async (k: number, due: number, measured: boolean) => {
    const node = `${c.prefix}-${(k * stride) % c.count}`;
    const uid = `${runId}-0000-4000-8000-${k.toString(16).padStart(12, '0')}`;
    const body = bodyFor(node, uid);
    const deadline = due + c.timeoutMs;
    let endpoint = pick();
    let kind = endpoint === undefined ? 'no-endpoint' : '';
    while (endpoint !== undefined) {
      const out = await post(agents.get(endpoint)!, urls.get(endpoint)!, body, deadline);
      if (out.kind === '' && 'answer' in out) {
        kind = checkAnswer(out.answer, uid);
        if (kind === '') {
          answeredBy[endpoint] = (answeredBy[endpoint] ?? 0) + 1;
          answerBytes += Buffer.byteLength(out.answer);
          answers += 1;
        }
        break;
      }
      kind = out.kind;
      // Go's Transport: a reused connection that took nothing of the request is retried on a new connection.
      if ('reused' in out && out.reused && out.nothingWritten && Date.now() < deadline) {
        transparentRetries += 1;
        endpoint = pick();
        continue;
      }
      break;
    }
    const second = Math.floor((due - start) / 1000);
    perSecond[second] ??= [0, 0];
    perSecond[second]![kind === '' ? 0 : 1] += 1;
    if (!measured) return;
    const phase = due < markAt ? phases.before : phases.after;
    phase.sent += 1;
    if (kind === '') {
      phase.ok += 1;
      phase.lat.push(Date.now() - due);
      return;
    }
    phase.errors[kind] = (phase.errors[kind] ?? 0) + 1;
    // What a client retrying on another endpoint would have got, within the same deadline.
    let whatIfMs: number | null = null;
    const elsewhere = other(endpoint);
    if (elsewhere !== undefined && Date.now() < deadline) {
      const again = await post(agents.get(elsewhere)!, urls.get(elsewhere)!, body, deadline);
      if (again.kind === '' && 'answer' in again && checkAnswer(again.answer, uid) === '') whatIfMs = Date.now() - due;
    }
    failures.push({ atMs: Number.isFinite(markAt) ? due - markAt : Number.NaN, endpoint: endpoint ?? '-', kind, whatIfMs });
  };

  let dispatchLagMaxMs = 0;
  const perSecond: Array<[number, number]> = [];
  const cpu0 = process.cpuUsage();
  const start = Date.now();
  const total = Math.floor((c.warmupS + c.durationS) * c.rate);
  const inFlight = new Set<Promise<void>>();
  process.stdout.write('started\n');
  for (let k = 0; k < total; k++) {
    const due = start + (k * 1000) / c.rate;
    const wait = due - Date.now();
    if (wait > 0) await new Promise((r) => setTimeout(r, wait));
    dispatchLagMaxMs = Math.max(dispatchLagMaxMs, Date.now() - due);
    const p = one(k, due, k >= c.warmupS * c.rate).finally(() => inFlight.delete(p));
    inFlight.add(p);
  }
  await Promise.all(inFlight);
  for (const a of agents.values()) a.destroy();
  const cpu = process.cpuUsage(cpu0);
  const summary = (p: typeof phases.before): PhaseResult => {
    const sorted = [...p.lat].sort((a, b) => a - b);
    return { sent: p.sent, ok: p.ok, errors: p.errors, latencyMs: { p50: round(percentile(sorted, 50), 1), p99: round(percentile(sorted, 99), 1), max: sorted.at(-1) ?? Number.NaN } };
  };
  const unansweredOn: Record<string, number> = {};
  for (const f of failures) unansweredOn[f.endpoint] = (unansweredOn[f.endpoint] ?? 0) + 1;
  const whatIf = failures.filter((f) => f.whatIfMs !== null).map((f) => f.whatIfMs!);
  const after = failures.filter((f) => Number.isFinite(f.atMs)).map((f) => f.atMs);
  return {
    before: summary(phases.before), after: summary(phases.after), transparentRetries, failures: failures.slice(0, FAILURE_DETAILS), answeredBy,
    requestBytes: Buffer.byteLength(template),
    perSecond, answerBytes: answers ? Math.round(answerBytes / answers) : Number.NaN,
    cpuMs: Math.round((cpu.user + cpu.system) / 1000), dispatchLagMaxMs,
    unanswered: failures.length, unansweredOn, whatIfAnswered: whatIf.length, whatIfMaxMs: whatIf.length ? Math.max(...whatIf) : null,
    lastFailureAtMs: after.length ? Math.round(Math.max(...after)) : null,
  };
}

if (process.argv[1]?.endsWith('replica-reviews.ts')) {
  const config = JSON.parse(process.argv[2] ?? '{}') as ReplicaReviewsConfig;
  const rl = createInterface({ input: process.stdin });
  runReviews(config, { onLine: (fn) => rl.on('line', fn) }).then(
    // Exit once the line is out: a pipe takes a large write in parts.
    (r) => process.stdout.write(`result ${JSON.stringify(r)}\n`, () => process.exit(0)),
    (err: unknown) => {
      console.error(err);
      process.exit(1);
    },
  );
}
