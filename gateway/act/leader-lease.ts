// One gateway replica at a time writes node and policy status: the holder of a
// coordination.k8s.io Lease. Every replica keeps answering the webhook and the
// query API; only the writes are single-writer, so two replicas never race to
// patch the same node.
import { CoordinationV1Api, type KubeConfig, type V1Lease } from '@kubernetes/client-node';
import type { Logger } from '../../lib/log.js';

export interface LeaderLeaseOptions {
  namespace: string;
  name: string;
  identity: string;
  leaseDurationSeconds?: number;
  renewEveryMs?: number;
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
  #listeners: Array<(leader: boolean) => void> = [];

  constructor(kubeConfig: KubeConfig, options: LeaderLeaseOptions) {
    this.#api = kubeConfig.makeApiClient(CoordinationV1Api);
    this.#o = { leaseDurationSeconds: 15, renewEveryMs: 5000, ...options };
  }

  get isLeader(): boolean {
    return this.#leader;
  }

  onChange(listener: (leader: boolean) => void): void {
    this.#listeners.push(listener);
  }

  start(): void {
    const loop = () => {
      this.tryAcquireOrRenew()
        .catch((err: unknown) => {
          this.#set(false);
          this.#o.log.warn({ err: String(err), lease: `${this.#o.namespace}/${this.#o.name}` }, 'leader lease not renewed; status writes pause until it is');
        })
        .finally(() => {
          this.#timer = setTimeout(loop, this.#o.renewEveryMs);
          this.#timer.unref();
        });
    };
    loop();
  }

  async stop(): Promise<void> {
    clearTimeout(this.#timer);
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

  /** One round of the election; resolves to whether this replica now leads. */
  async tryAcquireOrRenew(at = new Date()): Promise<boolean> {
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
      this.#set(true);
      return true;
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
