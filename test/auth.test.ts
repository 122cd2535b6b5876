// Who may talk to the gateway: agents bound to their node by their token, query
// callers by access review, the webhook by client certificate. The pure parts
// alone; then the real gateway over real gRPC/TLS and HTTPS, with the API
// server's two answers (TokenReview, SubjectAccessReview) played by tables.
// test/e2e/auth.e2e.test.ts asks a real kube-apiserver instead.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import * as grpc from '@grpc/grpc-js';
import { startAgent, type RunningAgent } from '../agent/agent.js';
import { noPodSource } from '../agent/requests/pod-source.js';
import { gatewayConnection } from '../agent/stream/gateway-connection.js';
import { agentAuthenticator } from '../gateway/auth/agent-authenticator.js';
import { agentBinding, CLAIM } from '../gateway/auth/agent-binding.js';
import { AuthError, bearerToken, jwtExpiry, type Identity } from '../gateway/auth/identity.js';
import { queryAuthorizer } from '../gateway/auth/query-authorizer.js';
import { CachedTokenReviewer, type TokenReviewer } from '../gateway/auth/token-review.js';
import { ReviewLimiter } from '../gateway/auth/review-limiter.js';
import { precheckToken, type PrecheckOptions } from '../gateway/auth/token-precheck.js';
import { generateCa, issueServingCertificate } from '../gateway/tls/self-signed.js';
import type { GatewayMessage__Output } from '../proto/gen/oversell/v1/GatewayMessage.js';
import type { NodeUsageClient } from '../proto/gen/oversell/v1/NodeUsage.js';
import { oversellV1 } from '../proto/load.js';
import { createLogger } from '../lib/log.js';
import { postHttps, startTestGateway, type TestGateway } from './helpers/gateway.js';
import { copyFixtureHost } from './helpers/fake-host.js';
import { scrapeMetric } from './helpers/metrics.js';
import { waitUntil } from '../scripts/harness/wait.js';

const SA = 'oversell/oversell-agent';
const agentIdentity = (extra: Record<string, string[]>, expiresAtMs?: number): Identity => ({
  username: 'system:serviceaccount:oversell:oversell-agent', uid: 'u1', groups: ['system:serviceaccounts'], extra, expiresAtMs,
});
/** A JWT-shaped token whose exp claim is expSeconds (the signature is the API server's business, played by the table). */
const jwt = (sub: string, expSeconds: number) =>
  `${Buffer.from('{"alg":"RS256"}').toString('base64url')}.${Buffer.from(JSON.stringify({ sub, exp: expSeconds })).toString('base64url')}.sig`;

function deny(failure: 'unauthenticated' | 'unavailable', message: string = failure): never {
  throw new AuthError(failure, message);
}

describe('agent binding (pure)', () => {
  it('binds to the node-name claim of a bound token', () => {
    assert.deepEqual(agentBinding(agentIdentity({ [CLAIM.nodeName]: ['node-a'], [CLAIM.podName]: ['agent-x'] }), [SA]), { node: 'node-a', subject: SA });
  });
  it('without a node claim, names the pod to look the node up from', () => {
    assert.deepEqual(agentBinding(agentIdentity({ [CLAIM.podName]: ['agent-x'], [CLAIM.podUid]: ['uid-1'] }), [SA]), {
      pod: { namespace: 'oversell', name: 'agent-x', uid: 'uid-1' }, subject: SA,
    });
  });
  it('refuses other ServiceAccounts, users, and tokens bound to no pod', () => {
    assert.throws(() => agentBinding(agentIdentity({ [CLAIM.nodeName]: ['n'] }), ['oversell/other']), (e: AuthError) => e.failure === 'permission-denied' && /may not report/.test(e.message));
    assert.throws(() => agentBinding({ ...agentIdentity({}), username: 'alice' }, [SA]), (e: AuthError) => e.failure === 'permission-denied' && /not a ServiceAccount/.test(e.message));
    assert.throws(() => agentBinding(agentIdentity({}), [SA]), (e: AuthError) => e.failure === 'permission-denied' && /not bound to a pod/.test(e.message));
  });
  it('reads bearer tokens and JWT expiry', () => {
    assert.equal(bearerToken('Bearer abc.def'), 'abc.def');
    assert.equal(bearerToken('Basic abc'), undefined);
    assert.equal(bearerToken(undefined), undefined);
    assert.equal(jwtExpiry(jwt('x', 1234)), 1_234_000);
    assert.equal(jwtExpiry('not-a-jwt'), undefined);
    assert.equal(jwtExpiry('a.!!!.c'), undefined);
  });
});

describe('token review cache', () => {
  it('asks once per token within the TTL, never past the token exp, and remembers refusals briefly', async () => {
    let t = 1_000_000;
    let asked = 0;
    const inner: TokenReviewer = {
      review: async (token) => {
        asked += 1;
        if (token === 'bad') deny('unauthenticated');
        if (token === 'down') deny('unavailable');
        return agentIdentity({}, token === 'short' ? t + 2_000 : undefined);
      },
    };
    const cache = new CachedTokenReviewer(inner, { ttlMs: 60_000, negativeTtlMs: 5_000, maxEntries: 100, now: () => t });
    await Promise.all([cache.review('good'), cache.review('good'), cache.review('good')]);
    assert.equal(asked, 1, 'concurrent reviews of one token share one request');
    t += 59_000;
    await cache.review('good');
    assert.equal(asked, 1);
    t += 2_000;
    await cache.review('good');
    assert.equal(asked, 2, 'asked again after the TTL');

    await cache.review('short');
    t += 2_500;
    await cache.review('short');
    assert.equal(asked, 4, 'a token is not trusted past its own exp');

    await assert.rejects(cache.review('bad'), /unauthenticated/);
    await assert.rejects(cache.review('bad'), /unauthenticated/);
    assert.equal(asked, 5, 'a refusal is remembered');
    await assert.rejects(cache.review('down'));
    await assert.rejects(cache.review('down'));
    assert.equal(asked, 7, 'an unreachable API server is not remembered as a refusal');
  });
});

/** A JWT-shaped token with these claims; the signature is the API server's business. */
const jwtWith = (claims: Record<string, unknown>) =>
  `${Buffer.from('{"alg":"RS256"}').toString('base64url')}.${Buffer.from(JSON.stringify(claims)).toString('base64url')}.sig`;

describe('token pre-check (pure): refused before any TokenReview', () => {
  const now = 1_700_000_000_000;
  const exp = now / 1000 + 600;
  const agents = { audience: 'oversell-gateway', acceptOpaque: false, now: () => now };
  const refused = (token: string, options: PrecheckOptions, reason: string) =>
    assert.throws(() => precheckToken(token, options), (e: AuthError) => e.failure === reason, reason);

  it('refuses what is too long, not a JWT, not JSON, without exp, expired past the skew, or for another audience', () => {
    refused('x'.repeat(16 * 1024 + 1), agents, 'token-too-long');
    refused('opaque-token', agents, 'token-malformed');
    refused('a.b', agents, 'token-malformed');
    refused(`a.${Buffer.from('[1]').toString('base64url')}.c`, agents, 'token-malformed');
    refused('a.!!notjson.c', agents, 'token-malformed');
    refused(jwtWith({ aud: ['oversell-gateway'] }), agents, 'token-malformed');
    refused(jwtWith({ aud: ['oversell-gateway'], exp: now / 1000 - 31 }), agents, 'token-expired');
    refused(jwtWith({ aud: ['https://kubernetes.default.svc'], exp }), agents, 'wrong-audience');
    refused(jwtWith({ exp }), agents, 'wrong-audience');
  });

  it('passes a well-formed token (aud as a list or a string, exp within the skew) and names the pod it claims', () => {
    const claims = { aud: ['oversell-gateway'], exp, sub: 'system:serviceaccount:oversell:oversell-agent', 'kubernetes.io': { namespace: 'oversell', pod: { name: 'agent-x', uid: 'uid-x' } } };
    assert.deepEqual(precheckToken(jwtWith(claims), agents), { expiresAtMs: exp * 1000, caller: 'pod:uid-x' });
    assert.deepEqual(precheckToken(jwtWith({ aud: 'oversell-gateway', exp: now / 1000 - 20, sub: 'alice' }), agents), { expiresAtMs: now - 20_000, caller: 'sub:alice' });
  });

  it('query callers: opaque tokens and JWTs without exp go on to the TokenReview, any audience; JWTs are still checked for shape and expiry', () => {
    const query = { acceptOpaque: true, now: () => now };
    assert.equal(precheckToken('static-token-abc', query), undefined);
    assert.ok(precheckToken(jwtWith({ aud: ['https://kubernetes.default.svc'], exp }), query));
    assert.deepEqual(precheckToken(jwtWith({ sub: 'system:serviceaccount:ci:viewer' }), query), { expiresAtMs: undefined, caller: 'sub:system:serviceaccount:ci:viewer' }, 'a legacy ServiceAccount token has no exp');
    refused(jwtWith({ exp: 'tomorrow' }), query, 'token-malformed');
    refused(jwtWith({ exp: now / 1000 - 3600 }), query, 'token-expired');
    refused('a.b.c.d', query, 'token-malformed');
  });
});

describe('TokenReview budget (pure)', () => {
  it('spends at most the rate after the burst; known callers have a reserve a flood of newcomers cannot spend', async () => {
    let t = 0;
    const limiter = new ReviewLimiter({ perSecond: 10, burst: 10, maxInFlight: 100, reserved: 0.2, now: () => t });
    const ok = async () => 'ok';
    limiter.remember('pod:known');
    const results = [];
    for (let i = 0; i < 20; i++) results.push(await limiter.run(`pod:new-${i}`, ok).catch((e: AuthError) => e.failure));
    assert.deepEqual(results.filter((r) => r === 'ok').length, 8, 'newcomers get the open part of the burst only');
    assert.ok(results.slice(8).every((r) => r === 'throttled'));
    assert.equal(await limiter.run('pod:known', ok), 'ok', 'a known caller gets through from the reserve');
    assert.equal(await limiter.run('pod:known', ok), 'ok');
    await assert.rejects(limiter.run('pod:known', ok), (e: AuthError) => e.failure === 'throttled' && /retry/.test(e.message), 'then both parts are spent');
    t += 1000;
    let sent = 0;
    for (let i = 0; i < 20; i++) if ((await limiter.run(`pod:more-${i}`, ok).catch(() => 'no')) === 'ok') sent += 1;
    assert.equal(sent, 8, 'a second later: the open part refilled at 8/s');
    assert.equal(limiter.sent, 8 + 2 + 8);
  });

  it('caps reviews in flight, keeping slots for known callers', async () => {
    const limiter = new ReviewLimiter({ perSecond: 1000, burst: 1000, maxInFlight: 5, reserved: 0.2 });
    limiter.remember('pod:known');
    const gates: Array<() => void> = [];
    const slow = () => new Promise<string>((resolve) => gates.push(() => resolve('ok')));
    const running = [0, 1, 2, 3].map((i) => limiter.run(`pod:new-${i}`, slow));
    await assert.rejects(limiter.run('pod:new-x', slow), (e: AuthError) => e.failure === 'throttled' && /4 token reviews are already waiting/.test(e.message));
    const known = limiter.run('pod:known', slow);
    assert.equal(limiter.inFlight, 5);
    await assert.rejects(limiter.run('pod:known', slow), (e: AuthError) => e.failure === 'throttled');
    for (const g of gates) g();
    assert.deepEqual(await Promise.all([...running, known]), ['ok', 'ok', 'ok', 'ok', 'ok']);
    assert.equal(limiter.inFlight, 0);
  });
});

describe('token review cache with the pre-check and the budget', () => {
  const exp = () => Math.floor(Date.now() / 1000) + 600;
  const agentToken = (uid: string, n = 0) => jwtWith({ aud: ['oversell-gateway'], exp: exp() + n, 'kubernetes.io': { namespace: 'oversell', pod: { name: `agent-${uid}`, uid } } });

  it('refuses locally without asking; a flood of refused tokens cannot push accepted ones out; a spent budget is not remembered', async () => {
    const good = agentToken('good');
    let asked = 0;
    const inner: TokenReviewer = { review: async (token) => { asked += 1; return token === good ? agentIdentity({}) : deny('unauthenticated'); } };
    const limiter = new ReviewLimiter({ perSecond: 1, burst: 1000, maxInFlight: 10 });
    const cache = new CachedTokenReviewer(inner, { ttlMs: 60_000, negativeTtlMs: 5_000, maxEntries: 10, maxRefused: 10, limiter, precheck: { audience: 'oversell-gateway', acceptOpaque: false } });
    await assert.rejects(cache.review('opaque'), (e: AuthError) => e.failure === 'token-malformed');
    await assert.rejects(cache.review(jwtWith({ aud: ['other'], exp: exp() })), (e: AuthError) => e.failure === 'wrong-audience');
    assert.equal(asked, 0, 'nothing sent to the API server');
    await cache.review(good);
    for (let i = 0; i < 50; i++) await assert.rejects(cache.review(agentToken(`bogus-${i}`)), (e: AuthError) => e.failure === 'unauthenticated');
    assert.equal(asked, 51);
    await cache.review(good);
    assert.equal(asked, 51, 'the accepted token is still cached after 50 refused ones');

    const tight = new CachedTokenReviewer(inner, { ttlMs: 60_000, negativeTtlMs: 5_000, maxEntries: 10, limiter: new ReviewLimiter({ perSecond: 0.001, burst: 1, maxInFlight: 10, reserved: 0 }) });
    await tight.review(good);
    const fresh = agentToken('good', 1);
    await assert.rejects(tight.review(fresh), (e: AuthError) => e.failure === 'throttled');
    await assert.rejects(tight.review(fresh), (e: AuthError) => e.failure === 'throttled', 'asked again, not answered from a remembered refusal');
    await tight.review(good);
  });

  it('a token whose pod was accepted before goes through the reserve while newcomers are throttled', async () => {
    const limiter = new ReviewLimiter({ perSecond: 0.001, burst: 5, maxInFlight: 10, reserved: 0.2 });
    const inner: TokenReviewer = { review: async () => agentIdentity({}) };
    const cache = new CachedTokenReviewer(inner, { ttlMs: 60_000, negativeTtlMs: 5_000, maxEntries: 100, limiter, precheck: { audience: 'oversell-gateway', acceptOpaque: false } });
    await cache.review(agentToken('pod-1'));
    for (let i = 0; i < 3; i++) await cache.review(agentToken(`pod-new-${i}`));
    await assert.rejects(cache.review(agentToken('pod-newest')), (e: AuthError) => e.failure === 'throttled');
    await cache.review(agentToken('pod-1', 60)); // pod-1's rotated token
  });
});

describe('query authorizer (pure): SubjectAccessReviews asked', () => {
  const viewer: Identity = { username: 'alice', uid: 'a', groups: [], extra: {}, expiresAtMs: undefined };
  const reviewer: TokenReviewer = { review: async () => viewer };
  /** An RBAC stand-in: `rules` are verb or verb/name grants; every question is recorded. */
  function rbac(rules: Set<string>) {
    const asked: string[] = [];
    const review = async (_identity: Identity, verb: string, name: string | undefined) => {
      asked.push(name === undefined ? verb : `${verb}/${name}`);
      return { allowed: rules.has(verb) || (name !== undefined && rules.has(`${verb}/${name}`)), reason: 'no RBAC rule' };
    };
    return { asked, review };
  }

  it('a caller allowed every node is asked once for 1,000 different nodes, not once per node', async () => {
    const { asked, review } = rbac(new Set(['get']));
    const authorize = queryAuthorizer(reviewer, review);
    for (let i = 0; i < 1000; i++) await authorize('Bearer t', 'get', `node-${i}`);
    assert.deepEqual(asked, ['get']);
  });

  it('a caller limited to named nodes (resourceNames) gets those and no other; the refusal of every node is kept, of its own node not', async () => {
    const rules = new Set(['get/node-1']);
    const { asked, review } = rbac(rules);
    const authorize = queryAuthorizer(reviewer, review);
    await authorize('Bearer t', 'get', 'node-1');
    await assert.rejects(authorize('Bearer t', 'get', 'node-2'), (e: AuthError) => e.failure === 'permission-denied' && /alice may not get nodeusages.oversell.io node-2/.test(e.message));
    assert.deepEqual(asked, ['get', 'get/node-1', 'get/node-2'], 'every node refused once, then each node asked');
    rules.add('get/node-2'); // a new RoleBinding
    await authorize('Bearer t', 'get', 'node-2');
    assert.deepEqual(asked.slice(3), ['get/node-2'], 'the named refusal was not kept: the new binding counts at once');
  });

  it('a refused list is asked again on the next call, so a new binding counts at once', async () => {
    const rules = new Set<string>();
    const { asked, review } = rbac(rules);
    const authorize = queryAuthorizer(reviewer, review);
    await assert.rejects(authorize('Bearer t', 'list'), (e: AuthError) => e.failure === 'permission-denied');
    rules.add('list');
    await authorize('Bearer t', 'list');
    assert.deepEqual(asked, ['list', 'list']);
  });
});

describe('authenticated gateway over gRPC/TLS', () => {
  const work = mkdtempSync(join(tmpdir(), 'oversell-auth-'));
  const agentAddress = () => `127.0.0.1:${gw.ports.agent}`;
  const log = createLogger('test-agent', process.env.TEST_LOG_LEVEL ?? 'silent');
  // The API server's answers: token -> identity; who may do what.
  const tokens = new Map<string, Identity>();
  const allowed = new Set<string>();
  let gw: TestGateway;
  const agents: RunningAgent[] = [];

  const refusals = (labels: string) => scrapeMetric(gw.ports.metrics, 'oversell_auth_refusals_total', labels);
  const client = (): NodeUsageClient => new (oversellV1().NodeUsage)(`127.0.0.1:${gw.ports.grpc}`, grpc.credentials.createSsl(Buffer.from(gw.ca)), { 'grpc.ssl_target_name_override': 'localhost', 'grpc.default_authority': 'localhost' });
  const md = (token?: string) => {
    const m = new grpc.Metadata();
    if (token) m.set('authorization', `Bearer ${token}`);
    return m;
  };
  const list = (c: NodeUsageClient, token?: string) =>
    new Promise<string[]>((resolve, reject) => c.ListNodes({}, md(token), (err, res) => (err ? reject(err) : resolve((res?.nodes ?? []).map((n) => n.name)))));

  function agent(nodeName: string, tokenFile: string): RunningAgent {
    const a = startAgent({
      nodeName, gatewayAddresses: [agentAddress()], ...copyFixtureHost(join(work, nodeName)), intervalMs: 50, podReportEvery: 10, pods: noPodSource(), log,
      backoffInitialMs: 50, backoffMaxMs: 200,
      connection: gatewayConnection({ caFile: join(work, 'ca.crt'), serverName: 'localhost', tokenFile }),
    });
    agents.push(a);
    return a;
  }
  /** A raw Report stream; resolves with the status it ended with. */
  function rawStream(nodeName: string, token?: string): Promise<grpc.ServiceError> {
    const c = new (oversellV1().AgentStream)(agentAddress(), grpc.credentials.createSsl(Buffer.from(gw.ca)), { 'grpc.ssl_target_name_override': 'localhost' });
    const call = c.Report(md(token));
    return new Promise((resolve) => {
      call.on('data', (_m: GatewayMessage__Output) => {});
      call.on('error', (e: grpc.ServiceError) => {
        c.close();
        resolve(e);
      });
      call.write({ hello: { nodeName, instanceId: 'raw-1', agentVersion: 'test' } });
      call.write({ sample: { seq: 1, timestampMs: Date.now(), cpuUsageMillicores: 1 } });
    });
  }

  before(async () => {
    const reviewer: TokenReviewer = { review: async (token) => tokens.get(token) ?? deny('unauthenticated', 'token not accepted') };
    gw = await startTestGateway({
      grpcTls: true,
      auth: {
        agents: agentAuthenticator(reviewer, [SA], async (pod) => (pod.name === 'agent-on-b' ? 'node-b' : deny('unauthenticated'))),
        query: queryAuthorizer(reviewer, async (identity, verb) => ({ allowed: allowed.has(`${identity.username}:${verb}`), reason: 'no RBAC rule' })),
      },
    });
    writeFileSync(join(work, 'ca.crt'), gw.ca);
    tokens.set('viewer', { username: 'alice', uid: 'a', groups: [], extra: {}, expiresAtMs: undefined });
    tokens.set('stranger', { username: 'mallory', uid: 'm', groups: [], extra: {}, expiresAtMs: undefined });
    allowed.add('alice:list');
  });
  after(async () => {
    for (const a of agents) await a.stop();
    await gw?.close();
    rmSync(work, { recursive: true, force: true });
  });

  it('an agent with a token bound to its node streams over TLS; the query API shows it to an allowed caller only', async () => {
    tokens.set('token-a', agentIdentity({ [CLAIM.nodeName]: ['node-a'] }));
    writeFileSync(join(work, 'token-a'), 'token-a\n');
    agent('node-a', join(work, 'token-a'));
    await waitUntil('node-a stored', () => (gw.store.get('node-a')?.latest ? true : undefined), 5000);
    const c = client();
    assert.deepEqual(await list(c, 'viewer'), ['node-a']);
    await assert.rejects(list(c), (e: grpc.ServiceError) => e.code === grpc.status.UNAUTHENTICATED && /bearer token/.test(e.details));
    await assert.rejects(list(c, 'stranger'), (e: grpc.ServiceError) => e.code === grpc.status.PERMISSION_DENIED && /mallory may not list nodeusages.oversell.io/.test(e.details));
    await assert.rejects(list(c, 'forged'), (e: grpc.ServiceError) => e.code === grpc.status.UNAUTHENTICATED);
    assert.equal(await refusals('{api="query",reason="permission-denied"}'), 1);
    // The summary of the same nodes is a list too: same check, same answers.
    const summaries = (token?: string) =>
      new Promise<string[]>((resolve, reject) => c.ListNodeSummaries({}, md(token), (err, res) => (err ? reject(err) : resolve(res?.name ?? []))));
    assert.deepEqual(await summaries('viewer'), ['node-a']);
    await assert.rejects(summaries(), (e: grpc.ServiceError) => e.code === grpc.status.UNAUTHENTICATED && /bearer token/.test(e.details));
    await assert.rejects(summaries('stranger'), (e: grpc.ServiceError) => e.code === grpc.status.PERMISSION_DENIED && /mallory may not list nodeusages.oversell.io/.test(e.details));
    assert.equal(await refusals('{api="query",reason="permission-denied"}'), 2);
    c.close();
  });

  it('the node comes from the pod when the token has no node claim', async () => {
    tokens.set('token-b', agentIdentity({ [CLAIM.podName]: ['agent-on-b'] }));
    writeFileSync(join(work, 'token-b'), 'token-b');
    agent('node-b', join(work, 'token-b'));
    await waitUntil('node-b stored', () => (gw.store.get('node-b')?.latest ? true : undefined), 5000);
  });

  it('a report for another node is refused with PERMISSION_DENIED and counted; nothing is stored', async () => {
    const before = await refusals('{api="agent-stream",reason="node-mismatch"}');
    const err = await rawStream('node-victim', 'token-a');
    assert.equal(err.code, grpc.status.PERMISSION_DENIED);
    assert.match(err.details, /runs on node node-a and may not report for node node-victim/);
    assert.equal(gw.store.get('node-victim'), undefined);
    // The ingest thread hands its counts over every few milliseconds: wait for them, then check exactly.
    const after = await waitUntil('the refusal counted', async () => ((await refusals('{api="agent-stream",reason="node-mismatch"}')) > before ? true : undefined), 2000);
    assert.ok(after);
    assert.equal(await refusals('{api="agent-stream",reason="node-mismatch"}'), before + 1);
  });

  it('no token or an unknown one: UNAUTHENTICATED; a plain-text client cannot talk to the TLS port', async () => {
    assert.equal((await rawStream('node-a')).code, grpc.status.UNAUTHENTICATED);
    assert.equal((await rawStream('node-a', 'forged')).code, grpc.status.UNAUTHENTICATED);
    const plain = new (oversellV1().NodeUsage)(`127.0.0.1:${gw.ports.grpc}`, grpc.credentials.createInsecure());
    await assert.rejects(
      new Promise((resolve, reject) => plain.ListNodes({}, md('viewer'), { deadline: Date.now() + 2000 }, (err, res) => (err ? reject(err) : resolve(res)))),
      (e: grpc.ServiceError) => e.code === grpc.status.UNAVAILABLE || e.code === grpc.status.DEADLINE_EXCEEDED,
    );
    plain.close();
  });

  it('a stream ends when its token expires, and the agent comes back with the refreshed token', async () => {
    const soon = jwt('c', Math.ceil(Date.now() / 1000) + 2);
    tokens.set(soon, agentIdentity({ [CLAIM.nodeName]: ['node-c'] }, jwtExpiry(soon)));
    writeFileSync(join(work, 'token-c'), soon);
    const a = agent('node-c', join(work, 'token-c'));
    await waitUntil('node-c live', () => (a.gateways.stream(agentAddress())?.live ? true : undefined), 5000);
    // The kubelet rotates the file before expiry; the next stream uses the new token.
    const later = jwt('c', Math.ceil(Date.now() / 1000) + 3600);
    tokens.set(later, agentIdentity({ [CLAIM.nodeName]: ['node-c'] }, jwtExpiry(later)));
    writeFileSync(join(work, 'token-c'), later);
    const stream = a.gateways.stream(agentAddress());
    await waitUntil('reconnected after expiry', () => ((stream?.reconnects ?? 0) >= 1 && stream?.live ? true : undefined), 8000);
    assert.ok((await refusals('{api="agent-stream",reason="expired"}')) >= 1);
    const seq = gw.store.get('node-c')?.lastSeq ?? 0;
    await waitUntil('samples flow again', () => ((gw.store.get('node-c')?.lastSeq ?? 0) > seq + 3 ? true : undefined), 5000);
  });

  it('a token expiring in 30 days keeps its stream (a timer past 2^31-1 ms would fire at once and end it)', async () => {
    const month = jwt('d', Math.ceil(Date.now() / 1000) + 30 * 86_400);
    tokens.set(month, agentIdentity({ [CLAIM.nodeName]: ['node-d'] }, jwtExpiry(month)));
    writeFileSync(join(work, 'token-d'), month);
    const a = agent('node-d', join(work, 'token-d'));
    await waitUntil('node-d live', () => (a.gateways.stream(agentAddress())?.live ? true : undefined), 5000);
    const seq = gw.store.get('node-d')?.lastSeq ?? 0;
    await waitUntil('samples flow on', () => ((gw.store.get('node-d')?.lastSeq ?? 0) > seq + 5 ? true : undefined), 5000);
    assert.equal(a.gateways.stream(agentAddress())?.reconnects ?? 0, 0, 'never ended as expired');
  });
});

describe('webhook client certificate', () => {
  let gw: TestGateway;
  let client: { cert: string; key: string };
  let stranger: { cert: string; key: string };
  before(async () => {
    const apiServerCa = await generateCa();
    client = await issueServingCertificate(apiServerCa, ['kube-apiserver'], new Date(), 1, 'clientAuth');
    stranger = await issueServingCertificate(await generateCa(), ['kube-apiserver'], new Date(), 1, 'clientAuth');
    gw = await startTestGateway({ webhookClientCa: apiServerCa.cert });
  });
  after(() => gw?.close());

  it('answers the holder of a client certificate from the configured CA, and nobody else', async () => {
    const body = JSON.stringify({ apiVersion: 'admission.k8s.io/v1', kind: 'AdmissionReview', request: { uid: 'u' } });
    const ok = await postHttps(gw, '/mutate/nodes', body, undefined, false, client);
    assert.equal(ok.status, 200);
    assert.equal((ok.json() as { response?: { uid?: string } }).response?.uid, 'u', 'the handler answered');
    await assert.rejects(postHttps(gw, '/mutate/nodes', body, undefined, false));
    await assert.rejects(postHttps(gw, '/mutate/nodes', body, undefined, false, stranger));
  });
});
