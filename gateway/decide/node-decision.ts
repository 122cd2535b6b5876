// The decision for one node, from a node object: every reader calls this.
// The webhook (on the kubelet's write), the leader's status writer (on the
// stored object), and the query API and CLI (on what the store observed)
// read raw, the previous grant, per-node caps and labels the same way and ask
// decide() with them, so they cannot disagree.
import { isObject } from '../../lib/json.js';
import { parseBytes, parseMilli, QuantityError } from '../../lib/quantity.js';
import type { GrantProof } from './grant-proof.js';
import { decide, type Allocatable, type Decision, type DecisionInput, type NodeObservation, type UsageInput } from './policy.js';
import { nodeMaxRatio, type PolicyEntry } from './select-policy.js';
import { trustedRaw, type NodeObjectFacts, type SignedGrant, type TrustedRaw } from './trusted-raw.js';

export interface NodeDecisionInput {
  raw: Allocatable;
  /** Our own record on the object, when it verified: the previous grant. */
  signed?: SignedGrant | undefined;
  /** Per-node caps from the object's annotations (they only lower). */
  nodeMaxRatio?: { cpu?: number; memory?: number } | undefined;
  usage: UsageInput | undefined;
  entry: PolicyEntryWithHarm | undefined;
  /** From the gateway's own watch of bound pods; undefined without it. */
  boundRequests?: DecisionInput['boundRequests'];
}

/** A pool's entry with the harm its nodes took and their typical predicted peak, when the gateway knows them (pool-harm.ts, pool-load.ts; policies/with-pool-harm.ts). */
export type PolicyEntryWithHarm = PolicyEntry & { harm?: DecisionInput['poolHarm']; poolLoad?: DecisionInput['poolLoad'] };

export function decideForNode(input: NodeDecisionInput): Decision {
  const { raw, signed, usage, boundRequests } = input;
  const entry = input.entry;
  // The previous grant (hysteresis) only from our own signed record: an annotation could hold any number.
  const previous = entry?.policy?.mode === 'DryRun' ? signed?.wouldGrant : signed?.granted;
  const decision = decide({
    raw,
    usage,
    policy: entry?.policy,
    previous,
    nodeMaxRatio: input.nodeMaxRatio ?? {},
    boundRequests,
    avoid: signed?.unconfirmed,
    poolHarm: entry?.harm,
    poolLoad: entry?.poolLoad,
  });
  if (entry?.error && decision.cpu.decidedBy !== 'no-data') {
    return { ...decision, reason: `OversellPolicy ${entry.name} is invalid (${entry.error}); ${decision.reason}` };
  }
  return decision;
}

/**
 * The decision the kubelet's next write gets, from what its node object says
 * (the store's record, or the node watch's observation of the stored object):
 * the query API and the node gauges decide with this.
 */
export function decideObserved(
  raw: Allocatable,
  observed: Pick<NodeObservation, 'lastGrant' | 'nodeMaxRatio'>,
  context: Pick<NodeDecisionInput, 'usage' | 'entry' | 'boundRequests'>,
): Decision {
  return decideForNode({ raw, signed: observed.lastGrant, nodeMaxRatio: observed.nodeMaxRatio, usage: context.usage, entry: context.entry, boundRequests: context.boundRequests });
}

/**
 * What a node object says about its allocatable: the incoming values, capacity
 * (absent parts undefined) and annotations. Throws QuantityError when
 * allocatable cpu or memory is missing or does not parse.
 */
export function readNodeFacts(name: string, status: Record<string, unknown>, annotations: Record<string, unknown> | undefined): NodeObjectFacts {
  const allocatable = isObject(status.allocatable) ? status.allocatable : {};
  if (allocatable.cpu === undefined || allocatable.memory === undefined) throw new QuantityError('status.allocatable lacks cpu or memory');
  const capacity = isObject(status.capacity) ? status.capacity : {};
  return {
    name,
    incoming: {
      cpuMillicores: parseMilli(allocatable.cpu, 'status.allocatable.cpu'),
      memoryBytes: parseBytes(allocatable.memory, 'status.allocatable.memory'),
    },
    capacity: {
      ...(capacity.cpu !== undefined && { cpuMillicores: parseMilli(capacity.cpu, 'status.capacity.cpu') }),
      ...(capacity.memory !== undefined && { memoryBytes: parseBytes(capacity.memory, 'status.capacity.memory') }),
    },
    annotations,
  };
}

/** The labels of a node object, string values only. */
export function nodeLabels(v: unknown): Record<string, string> {
  if (!isObject(v)) return {};
  const out: Record<string, string> = {};
  for (const [k, x] of Object.entries(v)) if (typeof x === 'string') out[k] = x;
  return out;
}

/** A node object as a decision reads it: established raw (or why not), caps and labels. */
export interface NodeInputs {
  facts: NodeObjectFacts;
  trusted: TrustedRaw;
  labels: Record<string, string>;
  nodeMaxRatio: { cpu?: number; memory?: number };
}

/**
 * Reads a node object (metadata and status as the API server has them).
 * fromKubelet: the object is the node's own kubelet's write, so its incoming
 * allocatable is raw; otherwise raw comes only from our own signed record.
 * Throws QuantityError when allocatable does not parse.
 */
export function nodeInputs(name: string, metadata: { labels?: unknown; annotations?: unknown }, status: Record<string, unknown>, fromKubelet: boolean, proof: GrantProof): NodeInputs {
  const annotations = isObject(metadata.annotations) ? metadata.annotations : undefined;
  const facts = readNodeFacts(name, status, annotations);
  return { facts, trusted: trustedRaw(facts, fromKubelet, proof), labels: nodeLabels(metadata.labels), nodeMaxRatio: nodeMaxRatio(annotations) };
}

/**
 * What the query API decides from for a stored node object: what the
 * kubelet's next write will be decided from. raw is undefined when the object
 * carries no verified record of ours (then there is nothing to decide from
 * until the kubelet writes and the webhook signs one).
 */
export function observeStoredNode(name: string, metadata: { labels?: unknown; annotations?: unknown }, status: Record<string, unknown>, proof: GrantProof): StoredNodeObservation {
  const labels = nodeLabels(metadata.labels);
  const annotations = isObject(metadata.annotations) ? metadata.annotations : undefined;
  let trusted: TrustedRaw;
  try {
    trusted = trustedRaw(readNodeFacts(name, status, annotations), false, proof);
  } catch (err) {
    if (err instanceof QuantityError) return { raw: undefined, labels, nodeMaxRatio: nodeMaxRatio(annotations), lastGrant: undefined };
    throw err;
  }
  return trusted.unverified
    ? { raw: undefined, labels, nodeMaxRatio: nodeMaxRatio(annotations), lastGrant: undefined }
    : { raw: trusted.raw, labels, nodeMaxRatio: nodeMaxRatio(annotations), lastGrant: trusted.signed };
}

/** A NodeObservation whose raw may be unknown (a node object without a verified record). */
export type StoredNodeObservation = Omit<NodeObservation, 'raw'> & { raw: Allocatable | undefined };
