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
import { decide, type Allocatable, type Decision, type Policy, type UsageInput } from '../decide/policy.js';
import { allow, isObject, parseAdmissionReview, pointerEscape, type AdmissionReviewResponse, type JsonPatchOp } from './admission-review.js';

export const ANNOTATION = {
  rawCpu: 'oversell.io/raw-allocatable-cpu',
  rawMemory: 'oversell.io/raw-allocatable-memory',
  grantedCpu: 'oversell.io/granted-allocatable-cpu',
  grantedMemory: 'oversell.io/granted-allocatable-memory',
  reason: 'oversell.io/reason',
} as const;

export interface NodeReviewDeps {
  usage(node: string): UsageInput | undefined;
  observeRaw(node: string, raw: Allocatable): void;
  policy: Policy;
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
    incoming = {
      cpuMillicores: parseMilli(allocatable.cpu, 'status.allocatable.cpu'),
      memoryBytes: parseBytes(allocatable.memory, 'status.allocatable.memory'),
    };
    raw = {
      cpuMillicores: rawValue(incoming.cpuMillicores, annotations, ANNOTATION.grantedCpu, ANNOTATION.rawCpu, parseMilli),
      memoryBytes: rawValue(incoming.memoryBytes, annotations, ANNOTATION.grantedMemory, ANNOTATION.rawMemory, parseBytes),
    };
  } catch (err) {
    if (err instanceof QuantityError) return { ...skip(err.message), node: name };
    throw err;
  }
  if (raw.cpuMillicores <= 0n || raw.memoryBytes <= 0n) return { ...skip('raw allocatable is not positive'), node: name };

  deps.observeRaw(name, raw);
  const decision = decide(raw, deps.usage(name), deps.policy);
  if (decision.cpu.bound === 'no-data') {
    return { review: allow(req.uid), outcome: 'no-data', node: name, decision };
  }

  const patch = buildPatch(incoming, annotations, raw, decision);
  return { review: allow(req.uid, patch), outcome: patch.length > 0 ? 'patched' : 'unchanged', node: name, decision };
}

function rawValue(
  incoming: bigint,
  annotations: Record<string, unknown> | undefined,
  grantedKey: string,
  rawKey: string,
  parse: (v: unknown, field: string) => bigint,
): bigint {
  const granted = annotations?.[grantedKey];
  const raw = annotations?.[rawKey];
  if (typeof granted !== 'string' || typeof raw !== 'string') return incoming;
  try {
    return parse(granted, grantedKey) === incoming ? parse(raw, rawKey) : incoming;
  } catch {
    // Someone wrote garbage into our annotations: trust what the writer sent.
    return incoming;
  }
}

function buildPatch(
  incoming: Allocatable,
  annotations: Record<string, unknown> | undefined,
  raw: Allocatable,
  decision: Decision,
): JsonPatchOp[] {
  const wanted: Record<string, string> = {
    [ANNOTATION.rawCpu]: formatMilli(raw.cpuMillicores),
    [ANNOTATION.rawMemory]: formatBytes(raw.memoryBytes),
    [ANNOTATION.grantedCpu]: formatMilli(decision.cpu.granted),
    [ANNOTATION.grantedMemory]: formatBytes(decision.memory.granted),
    [ANNOTATION.reason]: decision.reason,
  };
  const ops: JsonPatchOp[] = [];
  if (!annotations) {
    ops.push({ op: 'add', path: '/metadata/annotations', value: wanted });
  } else {
    for (const [key, value] of Object.entries(wanted)) {
      if (annotations[key] !== value) ops.push({ op: 'add', path: `/metadata/annotations/${pointerEscape(key)}`, value });
    }
  }
  // Untouched when equal in value, so the kubelet's own spelling survives.
  if (decision.cpu.granted !== incoming.cpuMillicores) {
    ops.push({ op: 'replace', path: '/status/allocatable/cpu', value: formatMilli(decision.cpu.granted) });
  }
  if (decision.memory.granted !== incoming.memoryBytes) {
    ops.push({ op: 'replace', path: '/status/allocatable/memory', value: formatBytes(decision.memory.granted) });
  }
  return ops;
}
