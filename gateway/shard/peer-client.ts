// HTTPS between the replicas of a sharded gateway, on their webhook port.
// Replicas share one serving certificate (one Secret), so each side proves it
// is a replica by presenting exactly that certificate: the caller checks the
// peer's, and the peer checks the caller's, offered as a client certificate
// (peer-plugin.ts). Holding the certificate's key is the credential; no CA is
// involved, since the certificate names the Service, not pod IPs.
import { X509Certificate } from 'node:crypto';
import * as https from 'node:https';
import type { TLSSocket } from 'node:tls';
import { splitHostPort } from './shard-members.js';

/** The serving certificate and key this replica presents now. */
export type PeerCredentials = () => { cert: string; key: string };

/** The SHA-256 fingerprint of a PEM certificate, as node:tls reports a peer's (`fingerprint256`). */
export class Fingerprint {
  #pem = '';
  #fingerprint = '';
  of(pem: string): string {
    if (pem !== this.#pem) {
      this.#fingerprint = new X509Certificate(pem).fingerprint256;
      this.#pem = pem;
    }
    return this.#fingerprint;
  }
}

export class PeerClient {
  readonly #credentials: PeerCredentials;
  readonly #fingerprint = new Fingerprint();
  /** One connection pool per certificate: after a rotation new connections present the new one. */
  #agent: { cert: string; agent: https.Agent } | undefined;
  readonly #checked = new WeakSet<TLSSocket>();

  constructor(credentials: PeerCredentials) {
    this.#credentials = credentials;
  }

  /** POSTs `body` to `hostPort`'s `path`; the answer's bytes if it is 200, else an error saying why. */
  post(hostPort: string, path: string, body: Buffer, o: { timeoutMs: number; headers: Record<string, string> }): Promise<Buffer> {
    const { host, port } = splitHostPort(hostPort);
    const { agent, cert } = this.#agentNow();
    const fingerprint = this.#fingerprint.of(cert);
    return new Promise((resolve, reject) => {
      const req = https.request(
        { host, port, path, method: 'POST', agent, timeout: o.timeoutMs, headers: { ...o.headers, 'content-length': body.length } },
        (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (c: Buffer) => chunks.push(c));
          res.on('end', () => {
            const answer = Buffer.concat(chunks);
            if (res.statusCode === 200) resolve(answer);
            else reject(new Error(`answered ${res.statusCode}${res.statusCode === 403 ? `: ${answer.toString().slice(0, 200)}` : ''}`));
          });
          res.on('error', reject);
        },
      );
      const timer = setTimeout(() => req.destroy(new Error(`no answer within ${o.timeoutMs} ms`)), o.timeoutMs);
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

  close(): void {
    this.#agent?.agent.destroy();
    this.#agent = undefined;
  }

  #agentNow(): { agent: https.Agent; cert: string } {
    const { cert, key } = this.#credentials();
    if (this.#agent?.cert !== cert) {
      this.#agent?.agent.destroy();
      // The chain is checked by the pin in post(), not by a CA.
      this.#agent = { cert, agent: new https.Agent({ keepAlive: true, maxSockets: 64, rejectUnauthorized: false, cert, key }) };
    }
    return this.#agent;
  }
}
