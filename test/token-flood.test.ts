// A flood of bogus agent tokens against a real gateway (gRPC/TLS, agent streams
// on the ingest thread) while real agents log in. The API server's TokenReview
// is a table with 20 ms of latency that counts what it is sent. Measured: the
// reviews the flood cost, refusals by reason, and the real agents' login time.
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import * as grpc from '@grpc/grpc-js';
import { startAgent, type RunningAgent } from '../agent/agent.js';
import { noPodSource } from '../agent/requests/pod-source.js';
import { gatewayConnection } from '../agent/stream/gateway-connection.js';
import { agentAuthenticator } from '../gateway/auth/agent-authenticator.js';
import { CLAIM } from '../gateway/auth/agent-binding.js';
import { AuthError, type Identity } from '../gateway/auth/identity.js';
import { ReviewLimiter } from '../gateway/auth/review-limiter.js';
import { CachedTokenReviewer, type TokenReviewer } from '../gateway/auth/token-review.js';
import { createLogger } from '../lib/log.js';
import { oversellV1 } from '../proto/load.js';
import { copyFixtureHost } from './helpers/fake-host.js';
import { startTestGateway, type TestGateway } from './helpers/gateway.js';
import { scrapeMetric } from './helpers/metrics.js';
import { waitUntil } from '../scripts/harness/wait.js';

const AUD = 'oversell-gateway';
const SA = 'oversell/oversell-agent';
const LIMITS = { perSecond: 50, burst: 50, maxInFlight: 10 };
const FLOOD = { streams: 2000, batches: 20, everyMs: 100 };

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const b64 = (v: unknown) => Buffer.from(typeof v === 'string' ? v : JSON.stringify(v)).toString('base64url');
const jwt = (claims: Record<string, unknown>) => `${b64({ alg: 'RS256', kid: 'k' })}.${b64(claims)}.${b64(randomUUID())}`;
const inAnHour = () => Math.floor(Date.now() / 1000) + 3600;
/** What a projected token of the agent ServiceAccount bound to this pod claims. */
const agentClaims = (podUid: string, exp = inAnHour()) => ({
  aud: [AUD], exp, iat: exp - 3600, jti: randomUUID(), sub: 'system:serviceaccount:oversell:oversell-agent',
  'kubernetes.io': { namespace: 'oversell', pod: { name: `oversell-agent-${podUid}`, uid: podUid }, serviceaccount: { name: 'oversell-agent', uid: 'sa-uid' } },
});

/** The API server's TokenReview: accepts the tokens it issued, after 20 ms, and counts. */
class FakeTokenReview implements TokenReviewer {
  readonly issued = new Map<string, Identity>();
  readonly sentAt: number[] = [];
  inFlight = 0;
  maxInFlight = 0;

  issue(podUid: string, node: string): string {
    const claims = agentClaims(podUid);
    const token = jwt(claims);
    this.issued.set(token, {
      username: 'system:serviceaccount:oversell:oversell-agent', uid: 'sa-uid', groups: ['system:serviceaccounts'],
      extra: { [CLAIM.nodeName]: [node], [CLAIM.podName]: [`oversell-agent-${podUid}`], [CLAIM.podUid]: [podUid] }, expiresAtMs: claims.exp * 1000,
    });
    return token;
  }

  async review(token: string): Promise<Identity> {
    this.sentAt.push(Date.now());
    this.inFlight += 1;
    this.maxInFlight = Math.max(this.maxInFlight, this.inFlight);
    try {
      await sleep(20);
      const identity = this.issued.get(token);
      if (!identity) throw new AuthError('unauthenticated', 'token not accepted: invalid signature');
      return identity;
    } finally {
      this.inFlight -= 1;
    }
  }

  /** Most reviews sent within any one second. */
  maxPerSecond(): number {
    let most = 0;
    for (let i = 0, j = 0; j < this.sentAt.length; j++) {
      while (this.sentAt[j]! - this.sentAt[i]! >= 1000) i++;
      most = Math.max(most, j - i + 1);
    }
    return most;
  }
}

/** The kinds of bogus token in every batch of 100, and the reason each is refused for. */
const MIX: Array<{ n: number; token: () => string; refused: string }> = [
  { n: 70, token: () => jwt(agentClaims(randomUUID())), refused: 'unauthenticated or throttled' }, // well-formed, claims the agent SA, bad signature
  { n: 10, token: () => jwt({ ...agentClaims(randomUUID()), aud: ['https://kubernetes.default.svc'] }), refused: 'wrong-audience' },
  { n: 10, token: () => jwt(agentClaims(randomUUID(), Math.floor(Date.now() / 1000) - 600)), refused: 'token-expired' },
  { n: 5, token: () => `opaque-${randomUUID()}`, refused: 'token-malformed' },
  { n: 5, token: () => jwt({ ...agentClaims(randomUUID()), pad: 'x'.repeat(5000) }), refused: 'token-too-long' },
];

describe('a flood of bogus agent tokens', () => {
  const work = mkdtempSync(join(tmpdir(), 'oversell-flood-'));
  const log = createLogger('test-agent', process.env.TEST_LOG_LEVEL ?? 'silent');
  const apiServer = new FakeTokenReview();
  const limiter = new ReviewLimiter(LIMITS);
  const agents: RunningAgent[] = [];
  const latest = new Map<string, RunningAgent>();
  let gw: TestGateway;
  const address = () => `127.0.0.1:${gw.ports.agent}`;
  const refusals = (reason: string) => scrapeMetric(gw.ports.metrics, 'oversell_auth_refusals_total', `{api="agent-stream",reason="${reason}"}`).then((n) => (Number.isNaN(n) ? 0 : n));

  function agent(node: string, token: string): RunningAgent {
    const tokenFile = join(work, `${node}.token`);
    writeFileSync(tokenFile, token);
    const a = startAgent({
      nodeName: node, gatewayAddresses: [address()], ...copyFixtureHost(join(work, node)), intervalMs: 100, podReportEvery: 10, pods: noPodSource(), log,
      backoffInitialMs: 50, backoffMaxMs: 200,
      connection: gatewayConnection({ caFile: join(work, 'ca.crt'), serverName: 'localhost', tokenFile }),
    });
    agents.push(a);
    latest.set(node, a);
    return a;
  }
  /** Starts an agent and resolves with the ms until its stream is live. */
  async function login(node: string, token: string, timeoutMs: number): Promise<number> {
    const started = Date.now();
    const a = agent(node, token);
    await waitUntil(`${node} logged in`, () => (a.gateways.stream(address())?.live ? true : undefined), timeoutMs, 10);
    return Date.now() - started;
  }

  /** Sends the batches as agent streams (each batch shuffled, 10 streams every 10 ms); resolves once every stream has ended. */
  async function flood(batches: string[][]): Promise<{ codes: Map<string, number>; ms: number }> {
    const started = Date.now();
    const channel = new (oversellV1().AgentStream)(address(), grpc.credentials.createSsl(Buffer.from(gw.ca)), { 'grpc.ssl_target_name_override': 'localhost' });
    const codes = new Map<string, number>();
    const ended: Array<Promise<void>> = [];
    let n = 0;
    // Steady: no quiet gap leaves the budget to the real agents.
    for (const batch of batches) {
      batch.sort(() => Math.random() - 0.5);
      for (let i = 0; i < batch.length; i += 10) {
        for (const token of batch.slice(i, i + 10)) {
          const md = new grpc.Metadata();
          md.set('authorization', `Bearer ${token}`);
          const call = channel.Report(md);
          ended.push(new Promise((resolve) => {
            call.on('data', () => {});
            call.on('error', (e: grpc.ServiceError) => {
              const code = grpc.status[e.code] ?? String(e.code);
              codes.set(code, (codes.get(code) ?? 0) + 1);
              resolve();
            });
            call.write({ hello: { nodeName: `flood-${n++}`, instanceId: 'x', agentVersion: 'flood' } });
          }));
        }
        await sleep(FLOOD.everyMs / 10);
      }
    }
    await Promise.all(ended);
    channel.close();
    return { codes, ms: Date.now() - started };
  }

  before(async () => {
    const reviewer = new CachedTokenReviewer(apiServer, {
      ttlMs: 60_000, negativeTtlMs: 5_000, maxEntries: 1000, limiter, precheck: { audience: AUD, acceptOpaque: false, maxBytes: 4096 },
    });
    gw = await startTestGateway({
      grpcTls: true,
      auth: { agents: agentAuthenticator(reviewer, [SA], async () => { throw new AuthError('permission-denied', 'no pod lookup in this test'); }), reviews: limiter },
    });
    writeFileSync(join(work, 'ca.crt'), gw.ca);
  });
  after(async () => {
    for (const a of agents) await a.stop();
    await gw?.close();
    rmSync(work, { recursive: true, force: true });
  });

  it(`${FLOOD.streams} bogus tokens cost the API server at most the review budget; agents with cached, rotated and new tokens still log in`, { timeout: 60_000 }, async () => {
    // Before the flood: two agents log in, so their tokens are cached and their pods known.
    const tokenA = apiServer.issue('pod-a', 'node-a');
    const a = agent('node-a', tokenA);
    await login('node-b', apiServer.issue('pod-b', 'node-b'), 5000);
    await waitUntil('node-a logged in', () => (a.gateways.stream(address())?.live ? true : undefined), 5000);
    const reviewsBefore = apiServer.sentAt.length;

    const floodStarted = Date.now();
    const flooding = flood(Array.from({ length: FLOOD.batches }, () => MIX.flatMap((kind) => Array.from({ length: kind.n }, kind.token))));

    // Mid-flood: agent A reconnects with its cached token, B's kubelet rotated its token, C is a new pod.
    await sleep(500);
    await latest.get('node-a')!.stop();
    const [cached, rotated, fresh] = await Promise.all([
      login('node-a', tokenA, 10_000),
      (async () => {
        await latest.get('node-b')!.stop();
        return login('node-b', apiServer.issue('pod-b', 'node-b'), 10_000);
      })(),
      login('node-c', apiServer.issue('pod-c', 'node-c'), 15_000).then((ms) => ({ ms, floodRunning: Date.now() < floodStarted + FLOOD.batches * FLOOD.everyMs })),
    ]);
    const { codes, ms: floodMs } = await flooding;

    // The ingest thread hands its counts to the main thread every few ms.
    const reasons = ['unauthenticated', 'throttled', 'wrong-audience', 'token-expired', 'token-malformed', 'token-too-long'];
    const counted = await waitUntil('every refusal counted', async () => {
      const byReason = Object.fromEntries(await Promise.all(reasons.map(async (r) => [r, await refusals(r)] as const)));
      return Object.values(byReason).reduce((s, n) => s + n, 0) >= FLOOD.streams ? byReason : undefined;
    }, 5000);
    const floodReviews = apiServer.sentAt.length - reviewsBefore;
    const figures = {
      floodStreams: FLOOD.streams, floodMs, reviewsSentDuringFlood: floodReviews, maxReviewsInOneSecond: apiServer.maxPerSecond(), maxReviewsInFlight: apiServer.maxInFlight,
      refusals: counted, statusCodes: Object.fromEntries(codes), loginMs: { cachedToken: cached, rotatedToken: rotated, newPod: fresh.ms, newPodInFlood: fresh.floodRunning },
    };
    console.log(`flood figures: ${JSON.stringify(figures)}`);

    assert.equal(codes.size <= 2 && [...codes.keys()].every((c) => c === 'UNAUTHENTICATED' || c === 'UNAVAILABLE'), true, JSON.stringify(Object.fromEntries(codes)));
    assert.ok(apiServer.maxInFlight <= LIMITS.maxInFlight, `${apiServer.maxInFlight} reviews in flight`);
    assert.ok(apiServer.maxPerSecond() <= LIMITS.burst + LIMITS.perSecond, `${apiServer.maxPerSecond()} reviews in one second`);
    assert.ok(floodReviews <= LIMITS.burst + (LIMITS.perSecond * floodMs) / 1000 + 1, `${floodReviews} reviews in ${floodMs} ms`);
    // Everything decidable locally never reached the API server.
    assert.equal(counted['wrong-audience'], 200);
    assert.equal(counted['token-expired'], 200);
    assert.equal(counted['token-malformed'], 100);
    assert.equal(counted['token-too-long'], 100);
    assert.ok((counted.throttled ?? 0) > 0, 'the budget turned part of the flood away');
    // The real agents: a cached token and a rotated one are not held up by the flood; a new pod gets through.
    assert.ok(cached < 2000, `cached token login took ${cached} ms`);
    assert.ok(rotated < 2000, `rotated token login took ${rotated} ms`);
    for (const node of ['node-a', 'node-b', 'node-c']) assert.ok(gw.store.get(node)?.latest, `${node} reports`);
    assert.equal(gw.store.list().filter((r) => r.name.startsWith('flood-')).length, 0, 'nothing of the flood stored');
    assert.ok((await scrapeMetric(gw.ports.metrics, 'oversell_token_reviews_sent_total')) >= floodReviews);
  });

  it('the hard case, a flood naming a known agent pod: the API server still gets no more than the budget, a cached agent is untouched', { timeout: 60_000 }, async () => {
    const reviewsBefore = apiServer.sentAt.length;
    const started = Date.now();
    // 1,000 well-formed tokens claiming to be pod-b's (its uid is no secret from whoever may get pods), over a second.
    const flooding = flood(Array.from({ length: 10 }, () => Array.from({ length: 100 }, () => jwt(agentClaims('pod-b')))));
    await sleep(300);
    await latest.get('node-a')!.stop(); // its token is still cached
    const [cached, rotated] = await Promise.all([
      login('node-a', readFileSync(join(work, 'node-a.token'), 'utf8'), 10_000),
      (async () => {
        await latest.get('node-b')!.stop(); // the pod the flood names
        return login('node-b', apiServer.issue('pod-b', 'node-b'), 15_000);
      })(),
    ]);
    const { ms } = await flooding;
    const reviews = apiServer.sentAt.length - reviewsBefore;
    console.log(`known-pod flood figures: ${JSON.stringify({ floodStreams: 1000, floodMs: ms, reviewsSent: reviews, maxReviewsInFlight: apiServer.maxInFlight, loginMs: { cachedToken: cached, rotatedTokenOfTheNamedPod: rotated } })}`);
    assert.ok(reviews <= LIMITS.burst + (LIMITS.perSecond * (Date.now() - started)) / 1000 + 1, `${reviews} reviews`);
    assert.ok(apiServer.maxInFlight <= LIMITS.maxInFlight);
    assert.ok(cached < 2000, `cached token login took ${cached} ms`);
  });
});
