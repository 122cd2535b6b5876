// Protected pods this replica let bind, until its pod watch shows them bound.
// The scheduler binds several pods at once; without this, two protected pods
// bound to one node within the watch's delay would each be checked against
// the room the other is about to take. Kept in memory, by pod uid, for a
// short time: a binding the API server then refused, or one the watch never
// shows, stops counting after the time-to-live.
import { NO_ROOM, addRoom, type Room } from '../decide/protected-room.js';

interface Reservation {
  node: string;
  room: Room;
  atMs: number;
}

export class RoomReservations {
  readonly #byUid = new Map<string, Reservation>();

  constructor(
    private readonly ttlMs = 30_000,
    private readonly now: () => number = Date.now,
  ) {}

  reserve(uid: string, node: string, room: Room): void {
    this.#byUid.set(uid, { node, room, atMs: this.now() });
  }

  /** What bindings to `node` hold that its bound pods (`seen`, by uid) do not show yet. */
  pendingOn(node: string, seen: (uid: string) => boolean): Room {
    const t = this.now();
    let sum = NO_ROOM;
    for (const [uid, r] of this.#byUid) {
      if (seen(uid) || t - r.atMs >= this.ttlMs) {
        this.#byUid.delete(uid);
        continue;
      }
      if (r.node === node) sum = addRoom(sum, r.room);
    }
    return sum;
  }

  get size(): number {
    return this.#byUid.size;
  }
}
