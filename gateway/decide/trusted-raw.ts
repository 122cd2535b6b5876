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
//
// One kubelet write is ambiguous: allocatable equal to our signed grant can
// be our grant left in place (a patch computed from a cache that held raw)
// or the kubelet's raw having risen to exactly that value (it omits an
// allocatable equal to what is stored). Raw is then read from the record,
// which never lets the cap follow a number we wrote, and the value is kept
// as `unconfirmed`: no grant is written at it (policy.ts moves one unit off),
// so the stored value differs from both readings and the kubelet's next
// write carries its number.
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
  /** A value the kubelet left in place that may be its raw (signed with the record). */
  unconfirmedCpu: 'oversell.io/unconfirmed-raw-cpu',
  unconfirmedMemory: 'oversell.io/unconfirmed-raw-memory',
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
export function recordedGrant(facts: NodeObjectFacts): { raw: Allocatable; granted: Allocatable; wouldGrant: Allocatable | undefined; unconfirmed: Partial<Allocatable> | undefined } | undefined {
  const a = facts.annotations;
  const rawCpu = annotated(a, ANNOTATION.rawCpu, parseMilli);
  const rawMemory = annotated(a, ANNOTATION.rawMemory, parseBytes);
  const grantedCpu = annotated(a, ANNOTATION.grantedCpu, parseMilli);
  const grantedMemory = annotated(a, ANNOTATION.grantedMemory, parseBytes);
  if (rawCpu === undefined || rawMemory === undefined || grantedCpu === undefined || grantedMemory === undefined) return undefined;
  const wouldCpu = annotated(a, ANNOTATION.dryRunCpu, parseMilli);
  const wouldMemory = annotated(a, ANNOTATION.dryRunMemory, parseBytes);
  const unconfirmedCpu = annotated(a, ANNOTATION.unconfirmedCpu, parseMilli);
  const unconfirmedMemory = annotated(a, ANNOTATION.unconfirmedMemory, parseBytes);
  return {
    raw: { cpuMillicores: rawCpu, memoryBytes: rawMemory },
    granted: { cpuMillicores: grantedCpu, memoryBytes: grantedMemory },
    wouldGrant: wouldCpu !== undefined && wouldMemory !== undefined ? { cpuMillicores: wouldCpu, memoryBytes: wouldMemory } : undefined,
    unconfirmed: unconfirmedOf(unconfirmedCpu, unconfirmedMemory),
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
  const unconfirmed: Partial<Allocatable> = {};
  const pick = (field: keyof Allocatable): bigint | undefined => {
    if (signed && incoming[field] === signed.granted[field]) {
      // Still unconfirmed from before, or newly so: the kubelet's own write left a grant above the recorded raw in place.
      const u = signed.unconfirmed?.[field] ?? (fromKubelet && signed.raw[field] < signed.granted[field] ? incoming[field] : undefined);
      if (u !== undefined) unconfirmed[field] = u;
      return signed.raw[field];
    }
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
  return { raw, proof: check, signed: signed && { granted: signed.granted, wouldGrant: signed.wouldGrant, unconfirmed: unconfirmedOf(unconfirmed.cpuMillicores, unconfirmed.memoryBytes) } };
}

function unconfirmedOf(cpuMillicores: bigint | undefined, memoryBytes: bigint | undefined): Partial<Allocatable> | undefined {
  if (cpuMillicores === undefined && memoryBytes === undefined) return undefined;
  return { ...(cpuMillicores !== undefined && { cpuMillicores }), ...(memoryBytes !== undefined && { memoryBytes }) };
}
