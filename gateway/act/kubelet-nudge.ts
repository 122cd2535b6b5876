// Why a node can sit uninflated for 5 minutes, and the nudge that makes it
// about 10 s.
//
// The kubelet writes its status every nodeStatusUpdateFrequency (10 s) only if
// what it reads back differs from what it computes; otherwise every
// nodeStatusReportFrequency (5 min). A kubelet write that passed the webhook
// unpatched (the webhook timed out or was unreachable, it fails open; or the
// node was labelled after the kubelet's last write) stores the kubelet's own
// number, carries no valid record of ours, and the gateway trusts no raw from
// such an object (trusted-raw.ts). So nothing changes until the 5-min write.
//
// The nudge: one byte less memory allocatable. The kubelet then reads back a
// number it did not compute and writes its own within 10 s, through the
// webhook, which records raw and grants as on any kubelet write. The gateway
// learns nothing from the nudge and decides nothing with it; one byte for up
// to 10 s is nothing the scheduler could notice. The ValidatingAdmissionPolicy
// oversell-gateway-node-status allows exactly this write besides lowering
// (deploy/base/gateway-policy.yaml).
import { parseBytes } from '../../lib/quantity.js';
import type { Unverified } from '../decide/trusted-raw.js';

/**
 * A node is nudged again only after this long: the kubelet answers within its
 * nodeStatusUpdateFrequency (10 s by default), and a webhook that keeps
 * failing open must not turn every node into a write every sweep.
 */
export const NUDGE_EVERY_MS = 30_000;

export interface NudgeFacts {
  /** Why the stored object gave no trusted raw. */
  unverified: Unverified;
  /** A valid policy governs the node, and its usage data is fresh enough to decide on. */
  decidable: boolean;
  /** When this replica last nudged the node. */
  lastNudgeAt: number | undefined;
  now: number;
}

/**
 * Whether to nudge: the object carries no valid record of ours (the only case
 * in which the kubelet may stay silent for 5 min; an object that is not raw
 * is rewritten by the kubelet every 10 s anyway), the webhook would decide on
 * the kubelet's next write, and the last nudge had its time to work.
 */
export function shouldNudge(f: NudgeFacts): boolean {
  return f.unverified === 'no-proof' && f.decidable && (f.lastNudgeAt === undefined || f.now - f.lastNudgeAt >= NUDGE_EVERY_MS);
}

/**
 * The nudge as a JSONPatch on nodes/status, pinned to the memory it was
 * computed from: a kubelet write in between makes it fail, harmlessly.
 */
export function nudgePatch(heldMemory: string): Array<{ op: 'test' | 'replace'; path: string; value: string }> {
  const bytes = parseBytes(heldMemory, 'allocatable memory');
  return [
    { op: 'test', path: '/status/allocatable/memory', value: heldMemory },
    { op: 'replace', path: '/status/allocatable/memory', value: String(bytes - 1n) },
  ];
}
