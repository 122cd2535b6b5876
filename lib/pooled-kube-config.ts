// A KubeConfig whose API calls share kept-alive connections. @kubernetes/client-node
// 1.x gives every request a new https.Agent, so every TokenReview and
// SubjectAccessReview paid a TCP connect, a TLS handshake and a new
// SecureContext (parsing the CA, key and certificate): about 4 ms of the
// gateway's main thread each, 40 s of it for 10,000 agents connecting after a
// restart. Here the agent a request was given is swapped for a kept-alive one
// with the same TLS options, made once.
import { createHash } from 'node:crypto';
import { Agent } from 'node:https';
import { KubeConfig } from '@kubernetes/client-node';

type RequestContext = Parameters<KubeConfig['applySecurityAuthentication']>[0];

/** The TLS options that make two agents interchangeable. */
const TLS_KEYS = ['ca', 'cert', 'key', 'pfx', 'passphrase', 'servername', 'rejectUnauthorized'] as const;
/** Kept agents: one per credential set; a rotated client certificate makes a new one. */
const MAX_AGENTS = 4;

export class PooledKubeConfig extends KubeConfig {
  readonly #agents = new Map<string, Agent>();
  /** Sockets kept open per agent (per API server), idle or not. */
  constructor(private readonly maxSockets = 32) {
    super();
  }

  override async applySecurityAuthentication(context: RequestContext): Promise<void> {
    await super.applySecurityAuthentication(context);
    const given = context.getAgent();
    // Proxy agents and plain HTTP keep what client-node made.
    if (!given || given.constructor !== Agent) return;
    const options = (given as Agent & { options: Record<string, unknown> }).options;
    const hash = createHash('sha256');
    for (const k of TLS_KEYS) hash.update(`${k}\0${String(options[k] ?? '')}\0`);
    const key = hash.digest('base64');
    let agent = this.#agents.get(key);
    if (!agent) {
      agent = new Agent({ ...options, keepAlive: true, maxSockets: this.maxSockets });
      this.#agents.set(key, agent);
      for (const [old, a] of this.#agents) {
        if (this.#agents.size <= MAX_AGENTS) break;
        this.#agents.delete(old);
        a.destroy();
      }
    }
    given.destroy();
    context.setAgent(agent);
  }

  /** Closes the kept connections (the gateway's stop). */
  closeConnections(): void {
    for (const a of this.#agents.values()) a.destroy();
    this.#agents.clear();
  }
}
