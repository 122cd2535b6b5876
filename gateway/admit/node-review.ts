// Answers nodes/status UPDATE and node CREATE reviews: establishes the
// kubelet's raw allocatable (trusted-raw.ts), asks the policy, and returns a
// JSONPatch that sets allocatable cpu/memory and records raw, grant, reason and
// the grant's proof in annotations.
//
// Only the node's own kubelet is inflated (userInfo system:node:<name>); every
// other writer passes untouched, whatever the webhook configuration sends.
// Idempotent: on a second pass over our own output the signed record gives the
// same raw, so a reinvocation never compounds the inflation.
import { formatBytes, formatMilli, QuantityError } from '../../lib/quantity.js';
import { decideForNode, nodeInputs, type NodeInputs } from '../decide/node-decision.js';
import type { Allocatable, Decision, NodeObservation, PreviousGrant, UsageInput } from '../decide/policy.js';
import type { PolicyEntry } from '../decide/select-policy.js';
import { isObject, pointerEscape, type JsonPatchOp } from '../../lib/json.js';
import { allow, parseAdmissionReview, type AdmissionReviewResponse } from './admission-review.js';
import type { GrantProof } from '../decide/grant-proof.js';
import { ANNOTATION, type NodeObjectFacts, type Unverified } from '../decide/trusted-raw.js';

export { ANNOTATION } from '../decide/trusted-raw.js';

export interface NodeReviewDeps {
  usage(node: string): UsageInput | undefined;
  policyFor(labels: Record<string, string>): PolicyEntry | undefined;
  proof: GrantProof;
  /** Requests of the pods the API server has bound to the node (gateway's own watch); absent or undefined without it. */
  boundRequests?(node: string): { cpuMillicores: number; memoryBytes: number } | undefined;
}

/**
 * patched: allocatable or annotations changed; unchanged: already right; no-data;
 * skipped: not a node status write we handle; not-kubelet: written by someone
 * other than the node's own kubelet; unverified: raw could not be established.
 * The last three pass untouched.
 */
export type Outcome = 'patched' | 'unchanged' | 'no-data' | 'skipped' | 'not-kubelet' | 'unverified';

export interface NodeReviewResult {
  review: AdmissionReviewResponse;
  outcome: Outcome;
  node?: string;
  decision?: Decision;
  /** Why a review was skipped, for the debug log. */
  detail?: string;
  /** With outcome unverified: which check failed. */
  unverified?: Unverified;
  dryRun?: boolean;
  /** What the node object said that a decision needs; the caller keeps it, unless this was a dry run. */
  observed?: NodeObservation;
}

/** Throws BadReviewError when the body is not an AdmissionReview at all. */
export function reviewNode(body: unknown, deps: NodeReviewDeps): NodeReviewResult {
  const req = parseAdmissionReview(body);
  const skip = (detail: string): NodeReviewResult => ({ review: allow(req.uid), outcome: 'skipped', detail });

  if (req.kind?.kind !== 'Node' || req.resource?.resource !== 'nodes') return skip(`not a node: ${req.kind?.kind ?? 'no kind'}`);
  const statusUpdate = req.operation === 'UPDATE' && req.subResource === 'status';
  const registration = req.operation === 'CREATE' && !req.subResource;
  if (!statusUpdate && !registration) return skip(`operation ${req.operation} ${req.subResource ?? ''} is not handled`);

  const node = req.object;
  if (!isObject(node) || !isObject(node.metadata) || !isObject(node.status)) return skip('object has no metadata or status');
  const name = typeof node.metadata.name === 'string' ? node.metadata.name : req.name;
  if (!name) return skip('node has no name');
  if (req.name !== undefined && req.name !== name) return skip(`request names node ${JSON.stringify(req.name)} but the object is ${JSON.stringify(name)}`);
  // Labels and annotations are writable by anyone with nodes patch; allocatable by the kubelet alone.
  const writer = req.userInfo?.username;
  if (writer !== `system:node:${name}`) {
    return { ...skip(`written by ${JSON.stringify(writer ?? '')}, not by the node's own kubelet`), outcome: 'not-kubelet', node: name };
  }
  let inputs: NodeInputs;
  try {
    inputs = nodeInputs(name, node.metadata, node.status, true, deps.proof);
  } catch (err) {
    if (err instanceof QuantityError) return { ...skip(err.message), node: name };
    throw err;
  }
  const { facts, trusted, labels, nodeMaxRatio: maxRatio } = inputs;
  if (trusted.unverified) {
    return { review: allow(req.uid), outcome: 'unverified', node: name, detail: trusted.detail, unverified: trusted.unverified };
  }
  const raw = trusted.raw;
  const dryRun = req.dryRun === true;
  const decision = decideForNode({ raw, signed: trusted.signed, nodeMaxRatio: maxRatio, usage: deps.usage(name), entry: deps.policyFor(labels), boundRequests: deps.boundRequests?.(name) });
  const observed = (lastGrant: PreviousGrant | undefined): NodeObservation => ({ raw, labels, nodeMaxRatio: maxRatio, lastGrant });
  if (decision.cpu.decidedBy === 'no-data') {
    return { review: allow(req.uid), outcome: 'no-data', node: name, decision, dryRun, observed: observed(trusted.signed) };
  }

  const unconfirmed = trusted.signed?.unconfirmed;
  const patch = nodePatch(facts, raw, decision, deps.proof, unconfirmed);
  return {
    review: allow(req.uid, patch), outcome: patch.length > 0 ? 'patched' : 'unchanged', node: name, decision, dryRun,
    observed: observed({ granted: { cpuMillicores: decision.cpu.applied, memoryBytes: decision.memory.applied }, wouldGrant: wouldGrant(decision), unconfirmed }),
  };
}

/** Under a DryRun policy, what would have been granted. */
function wouldGrant(decision: Decision): Allocatable | undefined {
  return decision.dryRun ? { cpuMillicores: decision.cpu.granted, memoryBytes: decision.memory.granted } : undefined;
}

/**
 * JSONPatch ops that make the object carry the decision, signed; empty when it
 * already does. `unconfirmed`: values that may be the kubelet's raw
 * (trusted-raw.ts), kept in the record until the kubelet's own number arrives.
 */
export function nodePatch(facts: NodeObjectFacts, raw: Allocatable, decision: Decision, proof: GrantProof, unconfirmed?: Partial<Allocatable>): JsonPatchOp[] {
  const { incoming, annotations } = facts;
  const granted = { cpuMillicores: decision.cpu.applied, memoryBytes: decision.memory.applied };
  const wanted: Record<string, string | undefined> = {
    [ANNOTATION.rawCpu]: formatMilli(raw.cpuMillicores),
    [ANNOTATION.rawMemory]: formatBytes(raw.memoryBytes),
    [ANNOTATION.grantedCpu]: formatMilli(granted.cpuMillicores),
    [ANNOTATION.grantedMemory]: formatBytes(granted.memoryBytes),
    [ANNOTATION.dryRunCpu]: decision.dryRun ? formatMilli(decision.cpu.granted) : undefined,
    [ANNOTATION.dryRunMemory]: decision.dryRun ? formatBytes(decision.memory.granted) : undefined,
    [ANNOTATION.reason]: decision.reason,
    [ANNOTATION.unconfirmedCpu]: unconfirmed?.cpuMillicores === undefined ? undefined : formatMilli(unconfirmed.cpuMillicores),
    [ANNOTATION.unconfirmedMemory]: unconfirmed?.memoryBytes === undefined ? undefined : formatBytes(unconfirmed.memoryBytes),
    [ANNOTATION.proof]: proof.sign({ node: facts.name, capacity: facts.capacity, raw, granted, wouldGrant: wouldGrant(decision), unconfirmed }),
  };
  const ops: JsonPatchOp[] = [];
  if (!annotations) {
    const present = Object.fromEntries(Object.entries(wanted).filter(([, v]) => v !== undefined));
    ops.push({ op: 'add', path: '/metadata/annotations', value: present });
  } else {
    for (const [key, value] of Object.entries(wanted)) {
      const path = `/metadata/annotations/${pointerEscape(key)}`;
      if (value === undefined) {
        if (Object.hasOwn(annotations, key)) ops.push({ op: 'remove', path });
      } else if (annotations[key] !== value) {
        ops.push({ op: 'add', path, value });
      }
    }
  }
  // Untouched when equal in value, so the kubelet's own spelling survives.
  if (granted.cpuMillicores !== incoming.cpuMillicores) {
    ops.push({ op: 'replace', path: '/status/allocatable/cpu', value: formatMilli(granted.cpuMillicores) });
  }
  if (granted.memoryBytes !== incoming.memoryBytes) {
    ops.push({ op: 'replace', path: '/status/allocatable/memory', value: formatBytes(granted.memoryBytes) });
  }
  return ops;
}
