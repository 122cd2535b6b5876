// The webhook builds only the fields NODE_REVIEW_FIELDS names (review-reader.ts);
// a field reviewNode() reads that is not named there would silently read as
// absent behind HTTPS while every test that passes whole objects still passed.
// Here reviewNode() runs on whole reviews wrapped in a proxy that records every
// path it touches, over the kinds of write it handles, and each path must be
// one the reader declares.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { describe, it } from 'node:test';
import { reviewNode, type NodeReviewDeps } from '../../../gateway/admit/node-review.js';
import { NODE_REVIEW_FIELDS, type Fields } from '../../../gateway/admit/review-reader.js';
import { GrantProof } from '../../../gateway/decide/grant-proof.js';
import { DEFAULT_POLICY } from '../../../gateway/decide/policy.js';
import { flagsPolicySource } from '../../../gateway/policies/policy-source.js';
import { NodeStore } from '../../../gateway/store/node-store.js';
import { applied, kubeletReview, nodeSample, patchOf, type NodeReview } from '../../helpers/node-reviews.js';
import { storeSample } from '../../helpers/store-sample.js';

/** `value` behind proxies that add every property path read (get, has, own keys) to `paths`. */
function recording<T>(value: T, paths: Set<string>, at = ''): T {
  if (typeof value !== 'object' || value === null) return value;
  const path = (key: string | symbol) => (at ? `${at}.${String(key)}` : String(key));
  return new Proxy(value as object, {
    get(target, key, receiver) {
      const v = Reflect.get(target, key, receiver) as unknown;
      if (typeof key === 'symbol' || (Array.isArray(target) && /^\d+$|^length$/.test(key))) return recording(v, paths, at);
      paths.add(path(key));
      return recording(v, paths, path(key));
    },
    has(target, key) {
      if (typeof key !== 'symbol') paths.add(path(key));
      return Reflect.has(target, key);
    },
    getOwnPropertyDescriptor(target, key) {
      if (typeof key !== 'symbol') paths.add(path(key));
      return Reflect.getOwnPropertyDescriptor(target, key);
    },
    ownKeys(target) {
      // Listing a whole object's keys reads all of it: only allowed where the reader keeps the whole value.
      paths.add(`${at}.*`);
      return Reflect.ownKeys(target);
    },
  }) as T;
}

/** The paths the Fields tree does not build: a path is built when a prefix of it is kept whole (true). */
function undeclared(paths: Iterable<string>, fields: Fields): string[] {
  const out: string[] = [];
  for (const p of paths) {
    let f: true | Fields | undefined = fields;
    for (const key of p.split('.')) {
      if (f === true) break;
      f = key === '*' ? undefined : f?.[key];
      if (f === undefined) break;
    }
    if (f === undefined) out.push(p);
  }
  return out.sort();
}

describe('the fields reviewNode() reads are the fields the webhook\'s reader builds', () => {
  const proof = new GrantProof(randomBytes(32));
  const store = new NodeStore({ retainMs: 60_000, forgetAfterMs: 60_000 });
  const policies = flagsPolicySource(DEFAULT_POLICY);
  const deps: NodeReviewDeps = { usage: (n) => store.usage(n, 1_000_000), policyFor: (l) => policies.select(l), proof, boundRequests: () => ({ cpuMillicores: 6000, memoryBytes: 20 * 1024 ** 3 }) };
  store.attach('ip-10-0-17-42.eu-west-1.compute.internal', 'i', null, 1);
  storeSample(store, 'ip-10-0-17-42.eu-west-1.compute.internal', 1, nodeSample(1_000_000), 1_000_000);

  /** Every kind of review: patched, our own output again, dry run, registration, another writer, unverified, no data, not a node. */
  function reviews(): Array<[string, NodeReview]> {
    const first = kubeletReview();
    const out = applied(first.request.object, patchOf(reviewNode(structuredClone(first), deps).review));
    const again = kubeletReview();
    again.request.object = out;
    const dry = kubeletReview();
    dry.request.dryRun = true;
    const create = kubeletReview();
    create.request.operation = 'CREATE';
    delete create.request.subResource;
    const other = kubeletReview();
    other.request.userInfo = { username: 'system:serviceaccount:kube-system:x' };
    const above = kubeletReview();
    above.request.object.status.allocatable.cpu = '1000';
    const unknown = kubeletReview('never-reported');
    const pod = kubeletReview();
    pod.request.kind = { kind: 'Pod' };
    return [['kubelet write', first], ['our own output', again], ['dry run', dry], ['registration', create], ['another writer', other], ['unverified raw', above], ['no agent data', unknown], ['not a node', pod]];
  }

  for (const [what, review] of reviews()) {
    it(`${what}: every path read is declared`, () => {
      const paths = new Set<string>();
      reviewNode(recording(structuredClone(review), paths), deps);
      assert.ok(paths.size > 0);
      assert.deepEqual(undeclared(paths, NODE_REVIEW_FIELDS), []);
    });
  }

  it('the check fails when the reader leaves out a field reviewNode() reads', () => {
    const paths = new Set<string>();
    const dry = reviews()[2]![1];
    reviewNode(recording(structuredClone(dry), paths), deps);
    const request = NODE_REVIEW_FIELDS.request as Fields;
    const { dryRun: _dropped, ...withoutDryRun } = request;
    assert.deepEqual(undeclared(paths, { ...NODE_REVIEW_FIELDS, request: withoutDryRun }), ['request.dryRun']);
  });
});
