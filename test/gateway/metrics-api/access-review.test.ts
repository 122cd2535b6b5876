// SubjectAccessReviews for the metrics API (gateway/metrics-api/access-review.ts):
// what is asked of a real HTTP API server, what its answer means, and the
// cache (a few seconds, bounded, failures never kept, one review in flight per question).
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { describe, it } from 'node:test';
import { kubeConfigFor } from '../../helpers/fake-kube-api.js';
import { cachedAccessReview, kubernetesAccessReview, type AccessReview, type Attributes } from '../../../gateway/metrics-api/access-review.js';
import type { Caller } from '../../../gateway/metrics-api/front-proxy.js';

const alice: Caller = { username: 'alice', uid: '', groups: ['devs'], extra: { scopes: ['a'] } };
const list: Attributes = { verb: 'list', resource: 'pods', namespace: 'shop' };

describe('kubernetesAccessReview against an HTTP API server', () => {
  async function withSar(answer: (spec: Record<string, unknown>) => { code: number; status?: Record<string, unknown> }, run: (review: AccessReview, asked: unknown[]) => Promise<void>) {
    const asked: unknown[] = [];
    const server = createServer((req, res) => {
      let body = '';
      req.on('data', (c: Buffer) => (body += c));
      req.on('end', () => {
        const sar = JSON.parse(body) as { spec: Record<string, unknown> };
        asked.push({ path: req.url, method: req.method, spec: sar.spec });
        const a = answer(sar.spec);
        res.writeHead(a.code, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ ...sar, status: a.status }));
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const kc = kubeConfigFor(`http://127.0.0.1:${(server.address() as AddressInfo).port}`);
    try {
      await run(kubernetesAccessReview(kc), asked);
    } finally {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    }
  }

  it('asks about the caller and metrics.k8s.io pods in the namespace, and takes allowed', async () => {
    await withSar(() => ({ code: 201, status: { allowed: true } }), async (review, asked) => {
      assert.deepEqual(await review(alice, list), { allowed: true, reason: '' });
      assert.deepEqual(asked, [{
        path: '/apis/authorization.k8s.io/v1/subjectaccessreviews',
        method: 'POST',
        spec: { user: 'alice', groups: ['devs'], extra: { scopes: ['a'] }, resourceAttributes: { group: 'metrics.k8s.io', version: 'v1beta1', resource: 'pods', verb: 'list', namespace: 'shop' } },
      }]);
    });
  });

  const refusals: Array<[string, Record<string, unknown>]> = [
    ['allowed false', { allowed: false, reason: 'no RBAC policy matched' }],
    ['denied', { allowed: true, denied: true }],
    ['no status', {}],
  ];
  for (const [what, status] of refusals) {
    it(`${what}: not allowed`, async () => {
      await withSar(() => ({ code: 201, status }), async (review) => assert.equal((await review(alice, list)).allowed, false));
    });
  }

  it('the API server refusing the review (403: no system:auth-delegator) throws, saying what the gateway needs', async () => {
    await withSar(() => ({ code: 403 }), async (review) => {
      await assert.rejects(review(alice, list), /system:auth-delegator/);
    });
  });
});

describe('cachedAccessReview', () => {
  function counting(answers: Array<boolean | Error>) {
    let calls = 0;
    const review: AccessReview = async () => {
      const a = answers[Math.min(calls, answers.length - 1)];
      calls += 1;
      if (a instanceof Error) throw a;
      return { allowed: a ?? false, reason: '' };
    };
    return { review, calls: () => calls };
  }

  it('the same question within the TTL is one review; after it, asked again', async () => {
    let now = 0;
    const inner = counting([true, false]);
    const cached = cachedAccessReview(inner.review, { ttlMs: 10_000, now: () => now });
    assert.equal((await cached(alice, list)).allowed, true);
    now = 9_999;
    assert.equal((await cached({ ...alice, groups: ['devs'] }, list)).allowed, true);
    assert.equal(inner.calls(), 1);
    now = 10_001;
    assert.equal((await cached(alice, list)).allowed, false);
    assert.equal(inner.calls(), 2);
  });

  it('another verb, namespace, name, group or extra is another question', async () => {
    const inner = counting([true]);
    const cached = cachedAccessReview(inner.review, { now: () => 0 });
    await cached(alice, list);
    await cached(alice, { ...list, verb: 'get', name: 'web-1' });
    await cached(alice, { ...list, namespace: 'other' });
    await cached({ ...alice, groups: ['system:masters'] }, list);
    await cached({ ...alice, extra: { scopes: ['b'] } }, list);
    assert.equal(inner.calls(), 5);
  });

  it('a failed review is not kept: the next request asks again (and is never allowed meanwhile)', async () => {
    const inner = counting([new Error('connect ECONNREFUSED'), true]);
    const cached = cachedAccessReview(inner.review, { now: () => 0 });
    await assert.rejects(cached(alice, list), /ECONNREFUSED/);
    assert.equal((await cached(alice, list)).allowed, true);
    assert.equal(inner.calls(), 2);
  });

  it('questions in flight are shared', async () => {
    const inner = counting([true]);
    const cached = cachedAccessReview(inner.review, { now: () => 0 });
    await Promise.all([cached(alice, list), cached(alice, list), cached(alice, list)]);
    assert.equal(inner.calls(), 1);
  });

  it('bounded: past maxEntries the least recently used answer goes', async () => {
    const inner = counting([true]);
    const cached = cachedAccessReview(inner.review, { maxEntries: 2, now: () => 0 });
    const as = (username: string) => cached({ ...alice, username }, list);
    await as('a');
    await as('b');
    await as('a'); // a is now the most recently used
    await as('c'); // b goes
    assert.equal(inner.calls(), 3);
    await as('a');
    assert.equal(inner.calls(), 3, 'a was kept');
    await as('b');
    assert.equal(inner.calls(), 4, 'b was dropped');
  });
});
