// Which replicas own a node: rendezvous (highest-random-weight) hashing. The
// `copies` owners of a key are the members whose weight with it is highest.
// Every replica computes the same owners from the same member list (the
// Service's EndpointSlices); a member that joins takes about copies/R of the
// keys and moves nothing else, one that leaves hands each of its keys to one
// other member, and there is no ring or virtual-node count to tune.

/** 32-bit FNV-1a of the UTF-16 code units of `s`. */
function fnv1a(s: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < s.length; i++) h = Math.imul(h ^ s.charCodeAt(i), 0x01000193);
  return h >>> 0;
}

/** murmur3's 32-bit finalizer: every input bit moves every output bit. */
function fmix32(h: number): number {
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return h >>> 0;
}

/** A member's weight for a key, from their hashes: each hashed once, not once per pair. */
const weight = (memberHash: number, keyHash: number) => fmix32(memberHash ^ fmix32(Math.imul(keyHash, 0x9e3779b1) ^ 0x5bd1e995));

/** The owners of keys among one set of members (duplicates dropped; their order does not matter). */
export class RendezvousOwners {
  readonly #members: ReadonlyArray<{ member: string; hash: number }>;
  readonly #copies: number;

  constructor(members: readonly string[], copies: number) {
    if (!Number.isInteger(copies) || copies < 1) throw new RangeError(`copies must be a whole number of 1 or more, got ${copies}`);
    this.#members = [...new Set(members)].map((member) => ({ member, hash: fnv1a(member) }));
    this.#copies = copies;
  }

  /** min(copies, members) owners of `key`, highest weight first; equal weights go to the member that sorts first. */
  of(key: string): string[] {
    const k = fnv1a(key);
    // The best `copies` so far, best first: a selection, not a sort of every member (this runs per review).
    const best: Array<{ member: string; w: number }> = [];
    for (const { member, hash } of this.#members) {
      const w = weight(hash, k);
      let at = best.length;
      while (at > 0 && outranks(w, member, best[at - 1]!)) at -= 1;
      if (at < this.#copies) {
        best.splice(at, 0, { member, w });
        if (best.length > this.#copies) best.pop();
      }
    }
    return best.map((b) => b.member);
  }
}

const outranks = (w: number, member: string, than: { member: string; w: number }) => w > than.w || (w === than.w && member < than.member);

/** The owners of one key (RendezvousOwners.of, for a one-off). */
export function owners(key: string, members: readonly string[], copies: number): string[] {
  return new RendezvousOwners(members, copies).of(key);
}

/** How many keys each member owns (a plan's heaviest replica is the max of it). */
export function ownedCounts(keys: Iterable<string>, members: readonly string[], copies: number): Map<string, number> {
  const ring = new RendezvousOwners(members, copies);
  const counts = new Map<string, number>([...new Set(members)].map((m) => [m, 0]));
  for (const key of keys) for (const m of ring.of(key)) counts.set(m, counts.get(m)! + 1);
  return counts;
}
