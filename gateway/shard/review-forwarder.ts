// A review for a node whose data another replica holds (a sharded gateway)
// goes to that replica's webhook as it came, and its answer back as it went:
// the owner decides with the node's data, this replica only relays. Owners
// are asked best first within one deadline, inside the API server's 2 s
// webhook timeout, each with a share of it before the next is asked too
// (hedged.ts): an owner that is listed but does not answer costs that share,
// not the review. When none answers, the caller decides here. The answer
// becomes a patch of a node's status, so only a peer presenting this
// gateway's own serving certificate is believed (peer-client.ts).
import { firstAnswer } from './hedged.js';
import type { PeerClient } from './peer-client.js';
import type { ShardMember } from './shard-view.js';

/** Set on a request from another replica: its receiver answers from what it holds, never asks further. */
export const FORWARDED_BY = 'x-oversell-forwarded-by';

/** The owner's answer, or why none came; either way, each owner asked that did not answer, and why. */
export type Forwarded = ({ answer: Buffer; to: string } | { failed: string }) & { unanswered: Array<{ webhook: string; why: string }> };

export class ReviewForwarder {
  constructor(
    private readonly peers: PeerClient,
    /** This replica's name, in the forwarded request's FORWARDED_BY header. */
    private readonly identity: string,
    private readonly path = '/mutate/nodes',
  ) {}

  /** Posts `body` to the targets, best first, hedged, until one answers 200, all within `deadlineMs`. */
  async forward(targets: readonly ShardMember[], body: Buffer, deadlineMs: number): Promise<Forwarded> {
    const headers = { 'content-type': 'application/json', [FORWARDED_BY]: this.identity };
    const { answer, failed } = await firstAnswer(targets, (target, o) => this.peers.post(target.webhook, this.path, body, { ...o, headers }), deadlineMs);
    const unanswered = failed.map((f) => ({ webhook: f.target.webhook, why: f.why }));
    if (answer) return { answer: answer.value, to: answer.from.webhook, unanswered };
    return { failed: unanswered.length > 0 ? unanswered.map((u) => `${u.webhook}: ${u.why}`).join('; ') : `no owner answered within ${deadlineMs} ms`, unanswered };
  }
}
