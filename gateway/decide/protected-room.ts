// The protected-room invariant: on every node, the requests of its protected
// pods fit within its raw allocatable. Inflated allocatable is room that
// exists only while the node's pods use less than they asked for; a protected
// pod must never depend on it, so that relief can always give every protected
// pod its requests back by removing unprotected ones. The scheduler sees one
// allocatable for every pod, so the check is made where a pod is bound
// (admit/binding-review.ts). Pure: the node's raw allocatable, what its
// protected pods already hold, and the pod in; the verdict and why out.
import type { Tier } from './tiers.js';

/** CPU and memory requests, or room for them. */
export interface Room {
  cpuMillicores: number;
  memoryBytes: number;
}

export interface ProtectedRoomInput {
  node: string;
  /** The kubelet's raw allocatable, as verified (decide/trusted-raw.ts). */
  raw: Room;
  /** Requests of the protected pods bound to the node, bindings this replica allowed and has not yet seen bound included. */
  protectedBound: Room;
  /** The pod being bound: its requests and tier. */
  pod: Room;
  tier: Tier;
}

export type RoomVerdict =
  | { allowed: true; why: 'unprotected' | 'fits' }
  | { allowed: false; why: 'no-room'; message: string };

const mib = (b: number) => `${Math.ceil(b / 2 ** 20)}Mi`;

export function protectedRoom(i: ProtectedRoomInput): RoomVerdict {
  if (i.tier.tier !== 'protected') return { allowed: true, why: 'unprotected' };
  const cpu = i.protectedBound.cpuMillicores + i.pod.cpuMillicores;
  const memory = i.protectedBound.memoryBytes + i.pod.memoryBytes;
  const short: string[] = [];
  if (cpu > i.raw.cpuMillicores) short.push(`CPU ${cpu}m > ${i.raw.cpuMillicores}m`);
  if (memory > i.raw.memoryBytes) short.push(`memory ${mib(memory)} > ${mib(i.raw.memoryBytes)}`);
  if (short.length === 0) return { allowed: true, why: 'fits' };
  return {
    allowed: false,
    why: 'no-room',
    message:
      `oversell: node ${i.node} has no raw room for this protected pod (${i.tier.because}): ` +
      `protected requests would be ${short.join(', ')} (raw allocatable); the rest of its allocatable is oversold capacity, ` +
      'which a protected pod never depends on. The scheduler will try again and may pick another node; ' +
      'to place it here, lower the requests of protected pods on the node or turn off the rule that protects it (spec.protect).',
  };
}

/** a + b, per resource. */
export function addRoom(a: Room, b: Room): Room {
  return { cpuMillicores: a.cpuMillicores + b.cpuMillicores, memoryBytes: a.memoryBytes + b.memoryBytes };
}

export const NO_ROOM: Room = { cpuMillicores: 0, memoryBytes: 0 };
