// Node AdmissionReviews as a kubelet sends them, and reviewNode() with the
// dependencies the gateway gives it (gateway/gateway.ts), without a gateway:
// a NodeStore on the test's clock, a GrantProof, a PolicySource. The body goes
// through the same field reader the webhook plugin uses, so what the pure
// function sees is what it sees behind HTTPS.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import jsonpatch from 'fast-json-patch';
import type { Sample__Output } from '../../proto/gen/oversell/v1/Sample.js';
import { reviewNode, type NodeReviewDeps, type NodeReviewResult } from '../../gateway/admit/node-review.js';
import { NODE_REVIEW_FIELDS, readJsonFields } from '../../gateway/admit/review-reader.js';
import { GATEWAY_DEFAULTS } from '../../gateway/config/defaults.js';
import { GrantProof } from '../../gateway/decide/grant-proof.js';
import { DEFAULT_POLICY } from '../../gateway/decide/policy.js';
import { flagsPolicySource, type PolicySource } from '../../gateway/policies/policy-source.js';
import { NodeStore } from '../../gateway/store/node-store.js';
import { storeSample } from './store-sample.js';

export interface NodeObject {
  metadata: { name: string; labels?: Record<string, string>; annotations?: Record<string, string>; [k: string]: unknown };
  status: { allocatable: Record<string, string>; capacity: Record<string, string>; [k: string]: unknown };
  [k: string]: unknown;
}

export interface NodeReview {
  apiVersion: string;
  kind: string;
  request: {
    uid: string; name: string; operation: string; subResource?: string; kind: { kind: string }; resource: { resource: string };
    object: NodeObject; oldObject?: unknown; userInfo: { username: string }; dryRun?: boolean;
  };
}

export const NODE_FIXTURE = readFileSync(new URL('../fixtures/admission/node-status-update.json', import.meta.url), 'utf8');
/** The node of the fixture: 8 cores (7910m allocatable), 32386744Ki (31369912Ki allocatable). */
export const FIXTURE_NODE = 'ip-10-0-17-42.eu-west-1.compute.internal';

/** The fixture as the kubelet of `name` would send it (object, request name and userInfo agree). */
export function kubeletReview(name = FIXTURE_NODE): NodeReview {
  const r = JSON.parse(NODE_FIXTURE) as NodeReview;
  r.request.name = name;
  r.request.object.metadata.name = name;
  r.request.userInfo = { username: `system:node:${name}` };
  return r;
}

/** An agent sample for the fixture's node: 8 cores, 600m used, 6000m requested (6 GiB used, 20 GiB requested). */
export function nodeSample(timestampMs: number, over: Partial<Sample__Output> = {}): Sample__Output {
  return {
    seq: timestampMs,
    timestampMs,
    cpuUsageMillicores: 600,
    memoryWorkingSetBytes: 6 * 1024 ** 3,
    rootCgroupMemoryWorkingSetBytes: 0, cpuManager: null,
    capacity: { cpuMillicores: 8000, memoryBytes: 32386744 * 1024 },
    pressure: null,
    requests: { cpuMillicores: 6000, memoryBytes: 20 * 1024 ** 3, podCount: 12, known: true },
    podsIncluded: false,
    summaries: [], onBeat: false, podNamesAsBefore: false,
    pods: [],
    ...over,
  };
}

export interface ReviewBench {
  store: NodeStore;
  proof: GrantProof;
  deps: NodeReviewDeps;
  /** Puts one agent sample for `node` into the store, received now. */
  report(node: string, sample: Sample__Output): void;
  /** reviewNode() on the review as the webhook plugin's body parser would hand it over. */
  review(r: unknown): NodeReviewResult;
}

/** reviewNode()'s dependencies wired as startGateway() wires them. */
export function reviewBench(options: { now: () => number; policies?: PolicySource; proofKey?: Buffer }): ReviewBench {
  const { now } = options;
  const policies = options.policies ?? flagsPolicySource(DEFAULT_POLICY);
  const store = new NodeStore({ retainMs: policies.retainMs(), forgetAfterMs: GATEWAY_DEFAULTS.forgetAfterMs });
  const proof = new GrantProof(options.proofKey ?? randomBytes(32));
  const deps: NodeReviewDeps = {
    usage: (name) => store.usage(name, now()),
    policyFor: (labels) => policies.select(labels),
    proof,
  };
  let streamId = 0;
  return {
    store,
    proof,
    deps,
    report(node, sample) {
      streamId += 1;
      store.attach(node, 'instance-a', null, streamId);
      storeSample(store, node, streamId, sample, now());
    },
    review: (r) => reviewNode(readJsonFields(Buffer.from(JSON.stringify(r)), NODE_REVIEW_FIELDS), deps),
  };
}

/** The JSONPatch of an answer, decoded; [] without one (and then no patchType either). */
export function patchOf(answer: { response: { patch?: string; patchType?: string } }): jsonpatch.Operation[] {
  assert.equal(answer.response.patch === undefined, answer.response.patchType === undefined, 'patch and patchType go together');
  return answer.response.patch ? (JSON.parse(Buffer.from(answer.response.patch, 'base64').toString()) as jsonpatch.Operation[]) : [];
}

/** The object with the patch applied, every op validated (a bad path throws), as the API server would. */
export function applied<T>(object: T, patch: jsonpatch.Operation[]): T {
  return jsonpatch.applyPatch(structuredClone(object), patch, true, false).newDocument;
}
