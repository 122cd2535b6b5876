// A grant the gateway wrote is signed, so a later review can tell our own
// earlier output from a number someone else wrote. Anyone with `nodes` patch
// can write annotations; only the gateway replicas hold the key.
//
// The MAC covers everything a replayed or edited record could move: the node's
// name (no copying a record between nodes), its capacity (a resized node's old
// record no longer applies), the kubelet's raw allocatable and the grant. Raw
// is never above the grant, so a replayed record of the same node can only
// make raw look smaller, never larger: it cannot lift a grant past cap x raw.
import { createHash, createHmac, timingSafeEqual } from 'node:crypto';
import type { Allocatable } from './policy.js';

export const PROOF_VERSION = 'v1';

/** What one signed record says about a node. */
export interface GrantRecord {
  node: string;
  /** status.capacity as parsed; undefined when the object carries none. */
  capacity: Partial<Allocatable>;
  raw: Allocatable;
  granted: Allocatable;
  /** Under a DryRun policy: what would have been granted. */
  wouldGrant?: Allocatable | undefined;
  /** Values the kubelet left in place that may be its raw (trusted-raw.ts). */
  unconfirmed?: Partial<Allocatable> | undefined;
}

export type ProofCheck = 'valid' | 'absent' | 'malformed' | 'unknown-key' | 'forged';

/** Records remembered with their proof: a node's kubelet sends the same record every 10 s. */
const MAX_KNOWN = 50_000;

export class GrantProof {
  readonly keyId: string;
  readonly #key: Buffer;
  /**
   * Message -> our proof of it. In the steady state every review verifies the
   * record the last one signed and signs the same record again: a lookup
   * instead of two HMACs.
   */
  readonly #known = new Map<string, string>();

  /** `key`: at least 32 bytes shared by every replica (docs/security.md). */
  constructor(key: Buffer) {
    if (key.length < 32) throw new Error(`the grant proof key must be at least 32 bytes, got ${key.length}`);
    this.#key = Buffer.from(key);
    // Names the key without revealing it, so a record signed before a key change reads as "unknown-key", not "forged".
    this.keyId = createHash('sha256').update(key).digest('hex').slice(0, 8);
  }

  sign(record: GrantRecord): string {
    return this.#proofOf(message(record));
  }

  check(record: GrantRecord, proof: unknown): ProofCheck {
    if (proof === undefined) return 'absent';
    if (typeof proof !== 'string' || proof.length > 128) return 'malformed';
    const [version, keyId, mac, ...rest] = proof.split('.');
    if (version !== PROOF_VERSION || !keyId || !mac || rest.length > 0) return 'malformed';
    if (keyId !== this.keyId) return 'unknown-key';
    const given = Buffer.from(proof);
    const wanted = Buffer.from(this.#proofOf(message(record)));
    return given.length === wanted.length && timingSafeEqual(given, wanted) ? 'valid' : 'forged';
  }

  #proofOf(m: string): string {
    let proof = this.#known.get(m);
    if (proof === undefined) {
      proof = `${PROOF_VERSION}.${this.keyId}.${createHmac('sha256', this.#key).update(m).digest('base64url')}`;
      if (this.#known.size >= MAX_KNOWN) this.#known.clear();
      this.#known.set(m, proof);
    }
    return proof;
  }
}

function message(r: GrantRecord): string {
  const n = (v: bigint | undefined) => (v === undefined ? '-' : v.toString());
  // One field a line: a node name cannot contain a newline, so no two records share a message.
  const fields = [
    `oversell-grant-${PROOF_VERSION}`, r.node,
    n(r.capacity.cpuMillicores), n(r.capacity.memoryBytes),
    n(r.raw.cpuMillicores), n(r.raw.memoryBytes),
    n(r.granted.cpuMillicores), n(r.granted.memoryBytes),
    n(r.wouldGrant?.cpuMillicores), n(r.wouldGrant?.memoryBytes),
  ];
  // Only when present, so records signed before these fields existed still verify.
  if (r.unconfirmed) fields.push('unconfirmed', n(r.unconfirmed.cpuMillicores), n(r.unconfirmed.memoryBytes));
  return fields.join('\n');
}
