// Answers pods/binding CREATE reviews: the scheduler binding a pod to a node;
// and pods CREATE reviews of a pod that names its node itself (spec.nodeName:
// it skips the scheduler, and so the binding). A protected pod
// (decide/tiers.ts) is refused a node whose protected pods' requests, with its
// own, would not fit in raw allocatable (decide/protected-room.ts): the node's
// inflated allocatable let the scheduler pick it, or the kubelet would admit
// it against it, but that room is oversold. Every other pod passes, and so
// does one this replica cannot judge (the pod or the node's pods not known):
// the webhook fails open, as its failurePolicy does.
import type { QosClass } from '../../lib/pod-qos.js';
import { isObject } from '../../lib/json.js';
import { addRoom, protectedRoom, type Room } from '../decide/protected-room.js';
import type { ProtectPolicy, Tier } from '../decide/tiers.js';
import type { RoomReservations } from '../store/room-reservations.js';
import { allow, deny, parseAdmissionReview, type AdmissionReviewDenial, type AdmissionReviewResponse } from './admission-review.js';

/** An opted-in node, as its stored object and policy say. */
export interface BindingNode {
  /** The kubelet's raw allocatable, verified. */
  raw: Room;
  /** Stored allocatable above raw in either resource: only then can a pod be placed on oversold room. */
  inflated: boolean;
  protect: ProtectPolicy;
}

/** What the tier and the room of the pod being bound are told from. */
export interface BindingPod {
  uid: string;
  namespace: string;
  requests: Room;
  qos: QosClass;
  exclusiveCpus: number;
  priority: number;
}

export interface BindingReviewDeps {
  /** undefined: not an opted-in node with a policy and a verified raw allocatable. */
  node(name: string): BindingNode | undefined;
  /** The pod as the API server has it; undefined when it cannot be read. */
  pod(namespace: string, name: string): Promise<BindingPod | undefined>;
  /** A pod being created in the namespace, from the review's object (which may leave its namespace out); undefined when its requests cannot be read. */
  podOf(object: unknown, namespace: string): BindingPod | undefined;
  tier(pod: BindingPod, protect: ProtectPolicy): Promise<Tier>;
  /** The node's bound protected pods: their requests summed, and whether a uid is among them; undefined until the pods are listed. */
  protectedBound(node: string, protect: ProtectPolicy): Promise<{ room: Room; has(uid: string): boolean } | undefined>;
  reservations: RoomReservations;
}

/**
 * allowed: protected, and it fits; denied: protected, and it does not;
 * unprotected: any room will do; skipped: not a binding to an oversold node;
 * unknown: could not be judged (the pod or the node's pods unreadable), allowed.
 */
export type BindingOutcome = 'allowed' | 'denied' | 'unprotected' | 'skipped' | 'unknown';

export interface BindingReviewResult {
  review: AdmissionReviewResponse | AdmissionReviewDenial;
  outcome: BindingOutcome;
  node?: string;
  pod?: string;
  detail?: string;
}

function targetNode(object: unknown): string | undefined {
  const target = isObject(object) ? object.target : undefined;
  if (!isObject(target) || typeof target.name !== 'string' || target.name === '') return undefined;
  return target.kind === undefined || target.kind === 'Node' ? target.name : undefined;
}

/** The kubelet's mirror of a static pod: the pod runs whatever the API server says, so it is not judged. */
const MIRROR = 'kubernetes.io/config.mirror';

/** A pod created with spec.nodeName, not a mirror pod: its node. */
function directNode(object: unknown): string | undefined {
  if (!isObject(object) || !isObject(object.spec) || typeof object.spec.nodeName !== 'string' || object.spec.nodeName === '') return undefined;
  const annotations = isObject(object.metadata) && isObject(object.metadata.annotations) ? object.metadata.annotations : {};
  return MIRROR in annotations ? undefined : object.spec.nodeName;
}

/** Throws BadReviewError when the body is not an AdmissionReview at all. */
export async function reviewBinding(body: unknown, deps: BindingReviewDeps): Promise<BindingReviewResult> {
  const req = parseAdmissionReview(body);
  const pass = (outcome: BindingOutcome, detail: string, more: Partial<BindingReviewResult> = {}): BindingReviewResult => ({ review: allow(req.uid), outcome, detail, ...more });
  const binding = req.resource?.resource === 'pods' && req.subResource === 'binding' && req.operation === 'CREATE';
  const create = req.resource?.resource === 'pods' && !req.subResource && req.operation === 'CREATE';
  if (!binding && !create) {
    return pass('skipped', `not a pod binding or creation: ${req.operation} ${req.resource?.resource ?? '?'}/${req.subResource ?? ''}`);
  }
  const nodeName = binding ? targetNode(req.object) : directNode(req.object);
  const name = req.name ?? (isObject(req.object) && isObject(req.object.metadata) ? req.object.metadata.name : undefined);
  if (!nodeName || typeof name !== 'string' || !req.namespace) return pass('skipped', binding ? 'the binding names no node or no pod' : 'a pod the scheduler will place (no spec.nodeName), or a mirror pod');
  const at = { node: nodeName, pod: `${req.namespace}/${name}` };
  const node = deps.node(nodeName);
  if (!node) return pass('skipped', 'not an opted-in node with a verified raw allocatable', at);
  if (!node.inflated) return pass('skipped', 'allocatable is raw: the scheduler already kept every pod within it', at);

  const pod = binding ? await deps.pod(req.namespace, name) : deps.podOf(req.object, req.namespace);
  if (!pod) return pass('unknown', 'the pod could not be read', at);
  const tier = await deps.tier(pod, node.protect);
  if (tier.tier !== 'protected') return pass('unprotected', 'unprotected: oversold room will do', at);
  const bound = await deps.protectedBound(nodeName, node.protect);
  if (!bound) return pass('unknown', 'the pods bound to nodes are not listed yet', at);

  const pending = deps.reservations.pendingOn(nodeName, bound.has);
  const verdict = protectedRoom({ node: nodeName, raw: node.raw, protectedBound: addRoom(bound.room, pending), pod: pod.requests, tier });
  if (!verdict.allowed) return { review: deny(req.uid, verdict.message), outcome: 'denied', detail: verdict.message, ...at };
  // A pod being created has no uid yet (mutating admission comes first): nothing to match its bound self with, so nothing is reserved;
  // the pod watch counts it within a moment, and two created at once may both pass.
  if (!req.dryRun && binding) deps.reservations.reserve(pod.uid, nodeName, pod.requests);
  return pass('allowed', `protected (${tier.because}), fits in raw allocatable`, at);
}
