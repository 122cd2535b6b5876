// A review for a node whose data another replica holds (a sharded gateway)
// goes to that replica's webhook as it came, and its answer back as it went:
// the owner decides with the node's data, this replica only relays. Owners
// are tried best first within one deadline, inside the API server's 2 s
// webhook timeout; when none answers, the caller decides here. The answer
// becomes a patch of a node's status, so only a peer presenting this
// gateway's own serving certificate is believed (peer-client.ts).
import type { PeerClient } from './peer-client.js';
import type { ShardMember } from './shard-view.js';

/** Set on a request from another replica: its receiver answers from what it holds, never asks further. */
export const FORWARDED_BY = 'x-oversell-forwarded-by';

export type Forwarded = { answer: Buffer; to: string } | { failed: string };

export class ReviewForwarder {
  constructor(
    private readonly peers: PeerClient,
    /** This replica's name, in the forwarded request's FORWARDED_BY header. */
    private readonly identity: string,
    private readonly path = '/mutate/nodes',
  ) {}

  /** Posts `body` to each target in turn until one answers 200, all within `deadlineMs`. */
  async forward(targets: readonly ShardMember[], body: Buffer, deadlineMs: number): Promise<Forwarded> {
    const until = Date.now() + deadlineMs;
    const failures: string[] = [];
    for (const target of targets) {
      const left = until - Date.now();
      if (left <= 0) break;
      try {
        const headers = { 'content-type': 'application/json', [FORWARDED_BY]: this.identity };
        return { answer: await this.peers.post(target.webhook, this.path, body, { timeoutMs: left, headers }), to: target.webhook };
      } catch (err) {
        failures.push(`${target.webhook}: ${(err as Error).message}`);
      }
    }
    return { failed: failures.length > 0 ? failures.join('; ') : `no owner answered within ${deadlineMs} ms` };
  }
}
