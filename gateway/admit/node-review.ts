// Answers nodes/status UPDATE and node CREATE reviews: reads the kubelet's raw
// allocatable, asks the policy, and returns a JSONPatch that sets allocatable
// cpu/memory and records the raw values and the reason in annotations.
//
// Idempotent: when the incoming allocatable equals the value we granted last
// time (our annotation), it is our own earlier output, not the kubelet's, so the
// raw value is taken from the annotation. A second pass over an inflated object
// therefore gives the same result, and other status writers that do not touch
// allocatable cannot make us compound the inflation.
import { formatBytes, formatMilli, parseBytes, parseMilli, QuantityError } from '../../lib/quantity.js';
import { decide, type Allocatable, type Decision, type UsageInput } from '../decide/policy.js';
import { nodeMaxRatio, type PolicyEntry } from '../decide/select-policy.js';
import { allow, isObject, parseAdmissionReview, pointerEscape, type AdmissionReviewResponse, type JsonPatchOp } from './admission-review.js';

export const ANNOTATION = {
  rawCpu: 'oversell.io/raw-allocatable-cpu',
  rawMemory: 'oversell.io/raw-allocatable-memory',
  grantedCpu: 'oversell.io/granted-allocatable-cpu',
  grantedMemory: 'oversell.io/granted-allocatable-memory',
  dryRunCpu: 'oversell.io/dry-run-allocatable-cpu',
  dryRunMemory: 'oversell.io/dry-run-allocatable-memory',
  reason: 'oversell.io/reason',
} as const;

export interface NodeReviewDeps {
  usage(node: string): UsageInput | undefined;
  observe(node: string, raw: Allocatable, labels: Record<string, string>): void;
  policyFor(labels: Record<string, string>): PolicyEntry | undefined;
}

/** patched: allocatable or annotations changed; unchanged: already right; no-data; skipped: not ours to touch. */
export type Outcome = 'patched' | 'unchanged' | 'no-data' | 'skipped';

export interface NodeReviewResult {
  review: AdmissionReviewResponse;
  outcome: Outcome;
  node?: string;
  decision?: Decision;
  /** Why a review was skipped, for the debug log. */
  detail?: string;
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
  const allocatable = node.status.allocatable;
  if (!isObject(allocatable) || allocatable.cpu === undefined || allocatable.memory === undefined) {
    return { ...skip('status.allocatable lacks cpu or memory'), node: name };
  }
  const annotations = isObject(node.metadata.annotations) ? node.metadata.annotations : undefined;

  let raw: Allocatable;
  let incoming: Allocatable;
  try {
    ({ incoming, raw } = readAllocatable(allocatable, annotations));
  } catch (err) {
    if (err instanceof QuantityError) return { ...skip(err.message), node: name };
    throw err;
  }
  if (raw.cpuMillicores <= 0n || raw.memoryBytes <= 0n) return { ...skip('raw allocatable is not positive'), node: name };

  const labels = stringMap(node.metadata.labels);
  deps.observe(name, raw, labels);
  const decision = decideForNode(raw, annotations, deps.usage(name), deps.policyFor(labels));
  if (decision.cpu.bound === 'no-data') {
    return { review: allow(req.uid), outcome: 'no-data', node: name, decision };
  }

  const patch = nodePatch(incoming, annotations, raw, decision);
  return { review: allow(req.uid, patch), outcome: patch.length > 0 ? 'patched' : 'unchanged', node: name, decision };
}

function stringMap(v: unknown): Record<string, string> {
  if (!isObject(v)) return {};
  const out: Record<string, string> = {};
  for (const [k, x] of Object.entries(v)) if (typeof x === 'string') out[k] = x;
  return out;
}

function annotated(annotations: Record<string, unknown> | undefined, key: string, parse: (v: unknown, f: string) => bigint): bigint | undefined {
  const v = annotations?.[key];
  if (typeof v !== 'string') return undefined;
  try {
    return parse(v, key);
  } catch {
    return undefined;
  }
}

/**
 * The decision for a node object: the webhook and the gateway's own status
 * writer both call this, so they can never disagree.
 */
export function decideForNode(
  raw: Allocatable,
  annotations: Record<string, unknown> | undefined,
  usage: UsageInput | undefined,
  entry: PolicyEntry | undefined,
): Decision {
  const dryRun = entry?.policy?.mode === 'DryRun';
  const previous = {
    cpuMillicores: annotated(annotations, dryRun ? ANNOTATION.dryRunCpu : ANNOTATION.grantedCpu, parseMilli),
    memoryBytes: annotated(annotations, dryRun ? ANNOTATION.dryRunMemory : ANNOTATION.grantedMemory, parseBytes),
  };
  const decision = decide({
    raw,
    usage,
    policy: entry?.policy,
    previous,
    nodeMaxRatio: nodeMaxRatio(annotations),
  });
  if (entry?.error && decision.cpu.bound !== 'no-data') {
    return { ...decision, reason: `OversellPolicy ${entry.name} is invalid (${entry.error}); ${decision.reason}` };
  }
  return decision;
}

/**
 * The allocatable an object carries, and the kubelet's raw value behind it.
 * Throws QuantityError when cpu or memory does not parse.
 */
export function readAllocatable(
  allocatable: { cpu?: unknown; memory?: unknown },
  annotations: Record<string, unknown> | undefined,
): { incoming: Allocatable; raw: Allocatable } {
  const incoming = {
    cpuMillicores: parseMilli(allocatable.cpu, 'status.allocatable.cpu'),
    memoryBytes: parseBytes(allocatable.memory, 'status.allocatable.memory'),
  };
  const raw = {
    cpuMillicores: rawValue(incoming.cpuMillicores, annotations, ANNOTATION.grantedCpu, ANNOTATION.rawCpu, parseMilli),
    memoryBytes: rawValue(incoming.memoryBytes, annotations, ANNOTATION.grantedMemory, ANNOTATION.rawMemory, parseBytes),
  };
  return { incoming, raw };
}

/** The kubelet's raw value: the incoming one, unless it is our own earlier output. */
function rawValue(
  incoming: bigint,
  annotations: Record<string, unknown> | undefined,
  grantedKey: string,
  rawKey: string,
  parse: (v: unknown, field: string) => bigint,
): bigint {
  const granted = annotated(annotations, grantedKey, parse);
  const raw = annotated(annotations, rawKey, parse);
  return granted !== undefined && raw !== undefined && granted === incoming ? raw : incoming;
}

/** JSONPatch ops that make the object carry the decision; empty when it already does. */
export function nodePatch(
  incoming: Allocatable,
  annotations: Record<string, unknown> | undefined,
  raw: Allocatable,
  decision: Decision,
): JsonPatchOp[] {
  const wanted: Record<string, string | undefined> = {
    [ANNOTATION.rawCpu]: formatMilli(raw.cpuMillicores),
    [ANNOTATION.rawMemory]: formatBytes(raw.memoryBytes),
    [ANNOTATION.grantedCpu]: formatMilli(decision.cpu.applied),
    [ANNOTATION.grantedMemory]: formatBytes(decision.memory.applied),
    [ANNOTATION.dryRunCpu]: decision.dryRun ? formatMilli(decision.cpu.granted) : undefined,
    [ANNOTATION.dryRunMemory]: decision.dryRun ? formatBytes(decision.memory.granted) : undefined,
    [ANNOTATION.reason]: decision.reason,
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
  if (decision.cpu.applied !== incoming.cpuMillicores) {
    ops.push({ op: 'replace', path: '/status/allocatable/cpu', value: formatMilli(decision.cpu.applied) });
  }
  if (decision.memory.applied !== incoming.memoryBytes) {
    ops.push({ op: 'replace', path: '/status/allocatable/memory', value: formatBytes(decision.memory.applied) });
  }
  return ops;
}
