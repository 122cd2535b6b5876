// HTTPS between the replicas of a sharded gateway, on their webhook port.
// Replicas share one serving certificate (one Secret), so each side proves it
// is a replica by presenting exactly that certificate: the caller checks the
// peer's, and the peer checks the caller's, offered as a client certificate
// (peer-plugin.ts). Holding the certificate's key is the credential; no CA is
// involved, since the certificate names the Service, not pod IPs.
import { X509Certificate } from 'node:crypto';
import type { ClientRequest, IncomingMessage } from 'node:http';
import * as https from 'node:https';
import type { TLSSocket } from 'node:tls';
import { splitHostPort } from './shard-members.js';

/** Set on each request from another replica: its name, for the peer's logs; a query so marked is answered from what the peer holds, never asked further. */
export const FORWARDED_BY = 'x-oversell-forwarded-by';

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

interface PeerAgents {
  cert: string;
  requests: https.Agent;
  streams: https.Agent;
}

/** A stream from a peer: paused while its reader is behind, closed by the reader. */
export interface PeerStream {
  pause(): void;
  resume(): void;
  close(): void;
}

export class PeerClient {
  readonly #credentials: PeerCredentials;
  readonly #fingerprint = new Fingerprint();
  /**
   * Per certificate (after a rotation new connections present the new one):
   * kept-alive connections for requests, and one connection per stream apart
   * from them, so watches never take the sockets queries and node inputs need.
   */
  #agents: PeerAgents | undefined;
  readonly #checked = new WeakSet<TLSSocket>();

  constructor(credentials: PeerCredentials) {
    this.#credentials = credentials;
  }

  /**
   * POSTs `body` to `hostPort`'s `path`; the answer's bytes if it is 200, else
   * an error saying why. `signal` ends the request early (another owner answered).
   */
  post(hostPort: string, path: string, body: Buffer, o: { timeoutMs: number; headers: Record<string, string>; signal?: AbortSignal }): Promise<Buffer> {
    return new Promise((resolve, reject) => {
      if (o.signal?.aborted) return reject(new Error('not needed any more'));
      const req = this.#request(hostPort, path, body, o.headers, o.timeoutMs, (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => {
          const answer = Buffer.concat(chunks);
          if (res.statusCode === 200) resolve(answer);
          else reject(new Error(`answered ${res.statusCode}${res.statusCode === 403 ? `: ${answer.toString().slice(0, 200)}` : ''}`));
        });
        res.on('error', reject);
      });
      const timer = setTimeout(() => req.destroy(new Error(`no answer within ${o.timeoutMs} ms`)), o.timeoutMs);
      const abort = () => req.destroy(new Error('not needed any more'));
      o.signal?.addEventListener('abort', abort, { once: true });
      req.on('close', () => {
        clearTimeout(timer);
        o.signal?.removeEventListener('abort', abort);
      });
      req.on('error', reject);
    });
  }

  /**
   * POSTs `body` and hands the 200 answer's bytes to `onData` as they come,
   * for as long as the peer streams; `onEnd` once, with why when it was not
   * a clean end. No deadline here: a watch may stay quiet once synced, and
   * the caller bounds how long it waits for the SYNCED (peer-queries.ts).
   */
  stream(hostPort: string, path: string, body: Buffer, o: { headers: Record<string, string>; onData: (chunk: Buffer) => void; onEnd: (err?: Error) => void }): PeerStream {
    let ended = false;
    const end = (err?: Error) => {
      if (ended) return;
      ended = true;
      o.onEnd(err);
    };
    let response: IncomingMessage | undefined;
    const req = this.#request(hostPort, path, body, o.headers, 'streams', (res) => {
      response = res;
      if (res.statusCode !== 200) {
        res.resume();
        return req.destroy(new Error(`answered ${res.statusCode}`));
      }
      res.on('data', (c: Buffer) => o.onData(c));
      res.on('end', () => end(new Error('the peer ended the stream')));
      res.on('error', end);
    });
    req.on('error', end);
    req.on('close', () => end(new Error('the connection closed')));
    return {
      pause: () => response?.pause(),
      resume: () => response?.resume(),
      close: () => {
        ended = true;
        req.destroy();
      },
    };
  }

  /** The request, sent; its socket is dropped unless the peer presents this gateway's certificate. */
  #request(hostPort: string, path: string, body: Buffer, headers: Record<string, string>, timeoutMs: number | 'streams', onResponse: (res: IncomingMessage) => void): ClientRequest {
    const { host, port } = splitHostPort(hostPort);
    const agents = this.#agentsNow();
    const fingerprint = this.#fingerprint.of(agents.cert);
    const req = https.request({
      host, port, path, method: 'POST', headers: { ...headers, 'content-length': body.length },
      ...(timeoutMs === 'streams' ? { agent: agents.streams } : { agent: agents.requests, timeout: timeoutMs }),
    }, onResponse);
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
    return req;
  }

  close(): void {
    this.#agents?.requests.destroy();
    this.#agents?.streams.destroy();
    this.#agents = undefined;
  }

  #agentsNow(): PeerAgents {
    const { cert, key } = this.#credentials();
    if (this.#agents?.cert !== cert) {
      // Connections of the old certificate end as they would (idle or closed by their peer); streams on them go on.
      // The chain is checked by the pin in #request(), not by a CA. No TLS session is resumed: a resumed
      // handshake carries no certificate, so a second connection to a peer (a stream opened again, a
      // request while another holds the kept-alive socket) would fail the pin.
      this.#agents = {
        cert,
        requests: new https.Agent({ keepAlive: true, maxSockets: 64, maxCachedSessions: 0, rejectUnauthorized: false, cert, key }),
        streams: new https.Agent({ keepAlive: false, maxCachedSessions: 0, rejectUnauthorized: false, cert, key }),
      };
    }
    return this.#agents;
  }
}
