// One gateway replica at a time writes node and policy status: the holder of a
// coordination.k8s.io Lease. Every replica keeps answering the webhook and the
// query API; only the writes are single-writer, so two replicas never race to
// patch the same node.
//
// Leadership is kept on the local clock, as client-go's leaderelection does:
// a round that has not renewed within renewDeadline of its start ends this
// replica's lead, whatever the request is still doing. Other replicas take an
// unrenewed lease after leaseDuration, which is longer, so a hung renew can
// never leave two leaders.
import { CoordinationV1Api, type KubeConfig, type V1Lease } from '@kubernetes/client-node';
import type { Logger } from '../../lib/log.js';

export interface LeaderLeaseOptions {
  namespace: string;
  name: string;
  identity: string;
  leaseDurationSeconds?: number;
  renewEveryMs?: number;
  /** A lead not renewed within this long of its last successful round's start ends locally; below leaseDurationSeconds. */
  renewDeadlineMs?: number;
  log: Logger;
}

const statusOf = (err: unknown): number | undefined => (err as { code?: number }).code;

/**
 * Lease times are MicroTime: the API server parses exactly six fractional
 * digits, and client-node serializes a Date with three. This Date says six.
 */
class MicroTime extends Date {
  override toISOString(): string {
    return super.toISOString().replace(/\.(\d{3})Z$/, '.$1000Z');
  }
  override toJSON(): string {
    return this.toISOString();
  }
}

export class LeaderLease {
  readonly #api: CoordinationV1Api;
  readonly #o: Required<Omit<LeaderLeaseOptions, 'log'>> & { log: Logger };
  #leader = false;
  #timer: NodeJS.Timeout | undefined;
  /** Ends the lead when no round renews it in time. */
  #deadline: NodeJS.Timeout | undefined;
  /** Rounds started; a round's result counts only while it is the newest. */
  #round = 0;
  #listeners: Array<(leader: boolean) => void> = [];

  constructor(kubeConfig: KubeConfig, options: LeaderLeaseOptions) {
    this.#api = kubeConfig.makeApiClient(CoordinationV1Api);
    this.#o = { leaseDurationSeconds: 15, renewEveryMs: 5000, renewDeadlineMs: 10_000, ...options };
    if (this.#o.renewDeadlineMs >= this.#o.leaseDurationSeconds * 1000) {
      throw new Error(`the lease renew deadline (${this.#o.renewDeadlineMs} ms) must be shorter than the lease duration (${this.#o.leaseDurationSeconds} s), or two replicas could lead at once`);
    }
  }

  get isLeader(): boolean {
    return this.#leader;
  }

  onChange(listener: (leader: boolean) => void): void {
    this.#listeners.push(listener);
  }

  start(): void {
    const { renewDeadlineMs, renewEveryMs, log } = this.#o;
    const lease = `${this.#o.namespace}/${this.#o.name}`;
    const loop = () => {
      const round = ++this.#round;
      const started = performance.now();
      let timedOut: NodeJS.Timeout | undefined;
      // The request may never answer: the round ends at the deadline and the next one starts; a late answer is ignored.
      const late = new Promise<never>((_, reject) => {
        timedOut = setTimeout(() => reject(new Error(`no answer from the API server within ${renewDeadlineMs} ms`)), renewDeadlineMs);
        timedOut.unref();
      });
      Promise.race([this.tryAcquireOrRenew(undefined, () => round === this.#round && performance.now() - started < renewDeadlineMs), late])
        .then((leading) => {
          if (leading) this.#extend(started);
        })
        .catch((err: unknown) => {
          if (round !== this.#round) return;
          this.#set(false);
          log.warn({ err: String(err), lease }, 'leader lease not renewed; status writes pause until it is');
        })
        .finally(() => {
          clearTimeout(timedOut);
          if (round !== this.#round) return;
          this.#timer = setTimeout(loop, renewEveryMs);
          this.#timer.unref();
        });
    };
    loop();
  }

  /** A round that started at `startedMs` (performance.now()) renewed the lease: the lead holds until renewDeadline after it. */
  #extend(startedMs: number): void {
    clearTimeout(this.#deadline);
    const left = startedMs + this.#o.renewDeadlineMs - performance.now();
    this.#deadline = setTimeout(() => {
      if (!this.#leader) return;
      this.#set(false);
      this.#o.log.warn({ lease: `${this.#o.namespace}/${this.#o.name}`, renewDeadlineMs: this.#o.renewDeadlineMs }, 'leader lease not renewed within its deadline: stepping down before another replica may take it');
    }, Math.max(0, left));
    this.#deadline.unref();
  }

  async stop(): Promise<void> {
    this.#round += 1; // a round in flight no longer counts
    clearTimeout(this.#timer);
    clearTimeout(this.#deadline);
    if (!this.#leader) return;
    this.#set(false);
    // Let another replica take over at once instead of after the lease expires.
    try {
      const lease = await this.#api.readNamespacedLease({ name: this.#o.name, namespace: this.#o.namespace });
      if (lease.spec?.holderIdentity === this.#o.identity) {
        lease.spec.holderIdentity = undefined;
        if (lease.spec.renewTime) lease.spec.renewTime = new MicroTime(new Date(lease.spec.renewTime).getTime());
        if (lease.spec.acquireTime) lease.spec.acquireTime = new MicroTime(new Date(lease.spec.acquireTime).getTime());
        await this.#api.replaceNamespacedLease({ name: this.#o.name, namespace: this.#o.namespace, body: lease });
      }
    } catch {
      // Expiry hands it over anyway.
    }
  }

  /**
   * One round of the election; resolves to whether this replica now leads.
   * `inTime`: whether a success may still be claimed (a round past its
   * deadline has renewed a lease that may already be expiring elsewhere).
   */
  async tryAcquireOrRenew(at = new Date(), inTime: () => boolean = () => true): Promise<boolean> {
    const { namespace, name, identity, leaseDurationSeconds } = this.#o;
    const now = new MicroTime(at.getTime());
    let lease: V1Lease;
    try {
      lease = await this.#api.readNamespacedLease({ name, namespace });
    } catch (err) {
      if (statusOf(err) !== 404) throw err;
      await this.#api.createNamespacedLease({
        namespace,
        body: { metadata: { name, namespace }, spec: { holderIdentity: identity, leaseDurationSeconds, acquireTime: now, renewTime: now, leaseTransitions: 0 } },
      });
      return this.#claim(inTime());
    }
    const spec = lease.spec ?? {};
    const renewed = spec.renewTime ? new Date(spec.renewTime).getTime() : 0;
    const expired = renewed + (spec.leaseDurationSeconds ?? leaseDurationSeconds) * 1000 < now.getTime();
    const mine = spec.holderIdentity === identity;
    if (!mine && !expired && spec.holderIdentity) {
      this.#set(false);
      return false;
    }
    lease.spec = {
      ...spec,
      ...(spec.acquireTime && { acquireTime: new MicroTime(new Date(spec.acquireTime).getTime()) }),
      holderIdentity: identity,
      leaseDurationSeconds,
      renewTime: now,
      ...(!mine && { acquireTime: now, leaseTransitions: (spec.leaseTransitions ?? 0) + 1 }),
    };
    try {
      // resourceVersion in the body makes this a compare-and-swap.
      await this.#api.replaceNamespacedLease({ name, namespace, body: lease });
    } catch (err) {
      if (statusOf(err) === 409) {
        this.#set(false);
        return false;
      }
      throw err;
    }
    return this.#claim(inTime());
  }

  #claim(inTime: boolean): boolean {
    if (!inTime) throw new Error('the lease was renewed too late to count; the next round tries again');
    this.#set(true);
    return true;
  }

  #set(leader: boolean): void {
    if (leader === this.#leader) return;
    this.#leader = leader;
    this.#o.log.info({ identity: this.#o.identity, leader }, leader ? 'leading: this replica writes node and policy status' : 'no longer leading');
    for (const l of this.#listeners) l(leader);
  }
}
