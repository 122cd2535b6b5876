// The kubelet's raw allocatable, from what can be verified only. Two sources:
//
// - the incoming allocatable on a write by the node's own kubelet (its
//   strategic merge patch sets allocatable whenever the stored value differs
//   from what it computed, so on its writes the object carries its own number);
// - our own earlier record, when the object still carries the grant we signed
//   (a reinvocation, or a kubelet patch computed from a cache that already held
//   the raw value, which leaves our grant in place).
//
// Annotations alone prove nothing: a record is used only when its MAC
// verifies (grant-proof.ts). Whatever cannot be established leaves the write
// untouched: no grant is computed from an unverified number.
import { parseBytes, parseMilli } from '../../lib/quantity.js';
import { MAX_INT64, type Allocatable, type PreviousGrant } from './policy.js';
import type { GrantProof, ProofCheck } from './grant-proof.js';

export const ANNOTATION = {
  rawCpu: 'oversell.io/raw-allocatable-cpu',
  rawMemory: 'oversell.io/raw-allocatable-memory',
  grantedCpu: 'oversell.io/granted-allocatable-cpu',
  grantedMemory: 'oversell.io/granted-allocatable-memory',
  dryRunCpu: 'oversell.io/dry-run-allocatable-cpu',
  dryRunMemory: 'oversell.io/dry-run-allocatable-memory',
  reason: 'oversell.io/reason',
  /** MAC over node, capacity, raw and granted (grant-proof.ts). */
  proof: 'oversell.io/grant-proof',
} as const;

/** Why raw could not be established; the write then passes unchanged. */
export type Unverified =
  | 'no-proof' // not the kubelet's own write, and no valid record of ours
  | 'above-capacity' // allocatable above status.capacity: not a number the kubelet computes
  | 'no-capacity' // a kubelet write always carries capacity
  | 'not-positive'
  | 'beyond-int64';

export interface NodeObjectFacts {
  name: string;
  incoming: Allocatable;
  capacity: Partial<Allocatable>;
  annotations: Record<string, unknown> | undefined;
}

/** Our own earlier record, when its MAC verified. */
export type SignedGrant = PreviousGrant;

export type TrustedRaw =
  | { raw: Allocatable; proof: ProofCheck; signed: SignedGrant | undefined; unverified?: undefined }
  | { unverified: Unverified; proof: ProofCheck; detail: string };

function annotated(annotations: Record<string, unknown> | undefined, key: string, parse: (v: unknown, f: string) => bigint): bigint | undefined {
  const v = annotations?.[key];
  if (typeof v !== 'string') return undefined;
  try {
    return parse(v, key);
  } catch {
    return undefined;
  }
}

/** The record our annotations claim, or undefined when any part is missing or unparsable. */
export function recordedGrant(facts: NodeObjectFacts): { raw: Allocatable; granted: Allocatable; wouldGrant: Allocatable | undefined } | undefined {
  const a = facts.annotations;
  const rawCpu = annotated(a, ANNOTATION.rawCpu, parseMilli);
  const rawMemory = annotated(a, ANNOTATION.rawMemory, parseBytes);
  const grantedCpu = annotated(a, ANNOTATION.grantedCpu, parseMilli);
  const grantedMemory = annotated(a, ANNOTATION.grantedMemory, parseBytes);
  if (rawCpu === undefined || rawMemory === undefined || grantedCpu === undefined || grantedMemory === undefined) return undefined;
  const wouldCpu = annotated(a, ANNOTATION.dryRunCpu, parseMilli);
  const wouldMemory = annotated(a, ANNOTATION.dryRunMemory, parseBytes);
  return {
    raw: { cpuMillicores: rawCpu, memoryBytes: rawMemory },
    granted: { cpuMillicores: grantedCpu, memoryBytes: grantedMemory },
    wouldGrant: wouldCpu !== undefined && wouldMemory !== undefined ? { cpuMillicores: wouldCpu, memoryBytes: wouldMemory } : undefined,
  };
}

/**
 * Raw allocatable of a node object. `fromKubelet`: the write is by
 * system:node:<this node> (the webhook checks that); false for an object read
 * back from the API server, which anyone with nodes/status may have written.
 */
export function trustedRaw(facts: NodeObjectFacts, fromKubelet: boolean, proof: GrantProof): TrustedRaw {
  const { incoming, capacity } = facts;
  const record = recordedGrant(facts);
  const check = record
    ? proof.check({ node: facts.name, capacity, ...record }, facts.annotations?.[ANNOTATION.proof])
    : facts.annotations?.[ANNOTATION.proof] === undefined ? 'absent' : 'malformed';
  const signed = check === 'valid' ? record : undefined;

  // Per resource: our own output where the object still carries our signed grant, else the kubelet's number.
  const pick = (field: keyof Allocatable): bigint | undefined => {
    if (signed && incoming[field] === signed.granted[field]) return signed.raw[field];
    return fromKubelet ? incoming[field] : undefined;
  };
  const cpu = pick('cpuMillicores');
  const memory = pick('memoryBytes');
  if (cpu === undefined || memory === undefined) {
    return { unverified: 'no-proof', proof: check, detail: `allocatable is not the kubelet's own write and carries no valid grant record of ours (proof ${check})` };
  }
  const raw = { cpuMillicores: cpu, memoryBytes: memory };
  if (raw.cpuMillicores <= 0n || raw.memoryBytes <= 0n) return { unverified: 'not-positive', proof: check, detail: 'raw allocatable is not positive' };
  if (raw.cpuMillicores > MAX_INT64 || raw.memoryBytes > MAX_INT64) {
    return { unverified: 'beyond-int64', proof: check, detail: 'raw allocatable is beyond int64 in its unit' };
  }
  if (capacity.cpuMillicores === undefined || capacity.memoryBytes === undefined) {
    return { unverified: 'no-capacity', proof: check, detail: 'status.capacity lacks cpu or memory' };
  }
  if (raw.cpuMillicores > capacity.cpuMillicores || raw.memoryBytes > capacity.memoryBytes) {
    return { unverified: 'above-capacity', proof: check, detail: `raw allocatable ${raw.cpuMillicores}m/${raw.memoryBytes} is above capacity ${capacity.cpuMillicores}m/${capacity.memoryBytes}` };
  }
  return { raw, proof: check, signed: signed && { granted: signed.granted, wouldGrant: signed.wouldGrant } };
}
