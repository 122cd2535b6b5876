// Where a node's data is when the gateway shards (--shard-copies N): on the
// node's N owners among the replicas the agents' Service lists, by the same
// rendezvous hashing of the node name over the same "ip:port" strings the
// agents use to pick where to stream (agent/stream/gateway-set.ts). The view
// only keeps the member list and answers; the EndpointSlice watch fills it.
import { RendezvousOwners } from '../../lib/rendezvous.js';

export interface ShardMember {
  /** "ip:port" as the EndpointSlices list it for agents: the key nodes hash against. */
  key: string;
  /** host:port of the member's webhook, where node inputs are reported and queries for its nodes asked. */
  webhook: string;
}

export class ShardView {
  #owners: RendezvousOwners;
  #members = new Map<string, ShardMember>();
  readonly #listeners = new Set<() => void>();

  constructor(
    readonly copies: number,
    /** Whether a member key is this replica (its own address and agent port). */
    private readonly isSelf: (key: string) => boolean,
  ) {
    if (!Number.isInteger(copies) || copies < 1) throw new RangeError(`shard copies must be a whole number of 1 or more, got ${copies}`);
    this.#owners = new RendezvousOwners([], copies);
  }

  /** The members now listed (the Service's ready endpoints). */
  set(members: readonly ShardMember[]): void {
    this.#members = new Map(members.map((m) => [m.key, m]));
    this.#owners = new RendezvousOwners([...this.#members.keys()], this.copies);
    for (const listener of this.#listeners) listener();
  }

  /** Calls `listener` after each set(); returns how to stop. */
  onChange(listener: () => void): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  get members(): number {
    return this.#members.size;
  }

  /** Every member other than this replica: where the rest of the nodes' usage is. */
  others(): ShardMember[] {
    return [...this.#members.values()].filter((m) => !this.isSelf(m.key));
  }

  /**
   * Whether this replica is the one to stream the node in a watch, so that
   * each node comes from one replica: its first owner, or any replica while
   * no member is listed.
   */
  streams(node: string): boolean {
    return this.#members.size === 0 || this.isFirstOwner(node);
  }

  /**
   * Whether this replica streams the node in a watch in place of replicas the
   * watching one cannot reach (`unreachable`, member keys): the node's first
   * owner is one of them, and this replica is its first owner that is not.
   */
  standsIn(node: string, unreachable: ReadonlySet<string>): boolean {
    const owners = this.#owners.of(node);
    if (owners[0] === undefined || !unreachable.has(owners[0])) return false;
    const stand = owners.find((k) => !unreachable.has(k));
    return stand !== undefined && this.isSelf(stand);
  }

  /** Whether this replica is the node's first owner: the one that lowers it and keeps its history. */
  isFirstOwner(node: string): boolean {
    const first = this.#owners.of(node)[0];
    return first !== undefined && this.isSelf(first);
  }

  /**
   * The owners of `node` other than this replica, best first: where its data
   * is when this replica holds none (it does not own the node, or just came
   * to own it and the agent has not moved yet). Empty when no other member
   * owns it, or none is listed.
   */
  forwardTo(node: string): ShardMember[] {
    return this.#owners.of(node).filter((k) => !this.isSelf(k)).map((k) => this.#members.get(k)!);
  }
}
