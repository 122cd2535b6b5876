// The benchmarks' nodes/status review: the 36 KB kubelet-shaped body every
// webhook benchmark posts, and the store and policy reviewNode() decides it
// from when a benchmark runs the review outside the gateway.
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { NodeReviewDeps } from '../gateway/admit/node-review.js';
import { GrantProof } from '../gateway/decide/grant-proof.js';
import { DEFAULT_POLICY } from '../gateway/decide/policy.js';
import { flagsPolicySource } from '../gateway/policies/policy-source.js';
import { NodeStore } from '../gateway/store/node-store.js';
import { storeSample } from '../test/helpers/store-sample.js';
import { REPO } from './processes.js';

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
 * What reviewNode() decides from in the benchmarks: a store of `nodes` nodes
 * named bench-<i> with 60 samples each (usage read as of when they were
 * stored), the default policy and a random signing key.
 */
export function benchReviewDeps(nodes = 1): NodeReviewDeps {
  const store = new NodeStore({ retainMs: 60_000, forgetAfterMs: 600_000 });
  const now = Date.now();
  for (let i = 0; i < nodes; i++) {
    const name = `bench-${i}`;
    store.attach(name, 'i', null, i + 1);
    for (let s = 1; s <= 60; s++) {
      storeSample(store, name, i + 1, {
        seq: s, timestampMs: now - (60 - s) * 1000, cpuUsageMillicores: 500 + (s % 5) * 50, memoryWorkingSetBytes: 4 * 2 ** 30, rootCgroupMemoryWorkingSetBytes: 0, cpuManager: null,
        capacity: { cpuMillicores: 8000, memoryBytes: 32 * 2 ** 30 }, pressure: null,
        requests: { cpuMillicores: 6000, memoryBytes: 20 * 2 ** 30, podCount: 30, known: true }, summaries: [], onBeat: false, podNamesAsBefore: false, podsIncluded: false, pods: [],
      }, now);
    }
  }
  const policies = flagsPolicySource(DEFAULT_POLICY);
  return {
    usage: (n: string) => store.usage(n, now),
    policyFor: (labels: Record<string, string>) => policies.select(labels),
    proof: new GrantProof(randomBytes(32)),
  };
}
