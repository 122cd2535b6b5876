// A review for a node whose data another replica holds (a sharded gateway)
// goes to that replica's webhook as it came, and its answer back as it went:
// the owner decides with the node's data, this replica only relays. Owners
// are tried best first within one deadline, inside the API server's 2 s
// webhook timeout; when none answers, the caller decides here.
//
// Peers are replicas of this gateway, so they present its serving
// certificate (the same Secret): a peer is accepted only if its certificate
// is exactly that one. Its answer becomes a patch of a node's status, so an
// address that answers with another certificate is never believed.
import { X509Certificate } from 'node:crypto';
import * as https from 'node:https';
import type { TLSSocket } from 'node:tls';
import { splitHostPort } from './shard-members.js';
import type { ShardMember } from './shard-view.js';

/** Set on a forwarded review: its receiver decides it, never forwards it again. */
export const FORWARDED_BY = 'x-oversell-forwarded-by';

export interface ReviewForwarderOptions {
  /** The serving certificate (PEM) this replica presents now; peers must present the same. */
  certificate: () => string;
  /** This replica's name, in the forwarded request's FORWARDED_BY header. */
  identity: string;
  path?: string;
}

export type Forwarded = { answer: Buffer; to: string } | { failed: string };

export class ReviewForwarder {
  readonly #o: ReviewForwarderOptions;
  // The chain is checked by the pin below, not by a CA: replicas' certificates name the Service, not pod IPs.
  readonly #agent = new https.Agent({ keepAlive: true, maxSockets: 64, rejectUnauthorized: false });
  readonly #checked = new WeakSet<TLSSocket>();
  #pin: { pem: string; fingerprint: string } | undefined;

  constructor(options: ReviewForwarderOptions) {
    this.#o = options;
  }

  /** Posts `body` to each target in turn until one answers 200, all within `deadlineMs`. */
  async forward(targets: readonly ShardMember[], body: Buffer, deadlineMs: number): Promise<Forwarded> {
    const until = Date.now() + deadlineMs;
    const failures: string[] = [];
    for (const target of targets) {
      const left = until - Date.now();
      if (left <= 0) break;
      try {
        return { answer: await this.#post(target.webhook, body, left), to: target.webhook };
      } catch (err) {
        failures.push(`${target.webhook}: ${(err as Error).message}`);
      }
    }
    return { failed: failures.length > 0 ? failures.join('; ') : `no owner answered within ${deadlineMs} ms` };
  }

  close(): void {
    this.#agent.destroy();
  }

  #fingerprint(): string {
    const pem = this.#o.certificate();
    if (this.#pin?.pem !== pem) this.#pin = { pem, fingerprint: new X509Certificate(pem).fingerprint256 };
    return this.#pin.fingerprint;
  }

  #post(webhook: string, body: Buffer, timeoutMs: number): Promise<Buffer> {
    const { host, port } = splitHostPort(webhook);
    const fingerprint = this.#fingerprint();
    return new Promise((resolve, reject) => {
      const req = https.request(
        {
          host, port, path: this.#o.path ?? '/mutate/nodes', method: 'POST', agent: this.#agent, timeout: timeoutMs,
          headers: { 'content-type': 'application/json', 'content-length': body.length, [FORWARDED_BY]: this.#o.identity },
        },
        (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (c: Buffer) => chunks.push(c));
          res.on('end', () => (res.statusCode === 200 ? resolve(Buffer.concat(chunks)) : reject(new Error(`answered ${res.statusCode}`))));
          res.on('error', reject);
        },
      );
      const timer = setTimeout(() => req.destroy(new Error(`no answer within ${timeoutMs} ms`)), timeoutMs);
      req.on('close', () => clearTimeout(timer));
      req.on('error', reject);
      req.on('socket', (socket) => {
        const tls = socket as TLSSocket;
        if (this.#checked.has(tls)) return;
        const check = () => {
          if (tls.getPeerCertificate().fingerprint256 === fingerprint) this.#checked.add(tls);
          else req.destroy(new Error('the peer does not present this gateway\'s serving certificate'));
        };
        if (tls.encrypted && !tls.connecting && tls.getPeerCertificate().fingerprint256) check();
        else tls.once('secureConnect', check);
      });
      req.end(body);
    });
  }
}
