// High availability without a shared store: the agent streams every sample to
// every gateway replica, so each replica answers every webhook call with full
// data and losing one loses nothing. The set of replicas is a fixed list
// (--gateway a,b) or follows the gateway's EndpointSlices. A sharded gateway
// (Settings.shard_copies N > 0) takes each node's samples on its N owners
// only: the agent then streams to those, by the same rendezvous hashing the
// replicas use to find where a node's data is (lib/rendezvous.ts).
import type { Sample__Output } from '../../proto/gen/oversell/v1/Sample.js';
import type { Logger } from '../../lib/log.js';
import { owners } from '../../lib/rendezvous.js';
import { ReportStream, type ReportStreamOptions } from './report-stream.js';

export type StreamFactory = (address: string) => ReportStream;

export class GatewaySet {
  readonly #streams = new Map<string, ReportStream>();
  /** Every address listed; the streams are to all of them, or to the node's owners among them. */
  #listed: string[] = [];
  #copies = 0;
  #stopped = false;

  constructor(
    private readonly create: StreamFactory,
    private readonly log: Logger,
    /** The node whose owners to stream to once a gateway says it shards; without one, every replica. */
    private readonly nodeName?: string,
  ) {}

  static withOptions(base: Omit<ReportStreamOptions, 'gatewayAddress'>, log: Logger): GatewaySet {
    return new GatewaySet((gatewayAddress) => new ReportStream({ ...base, gatewayAddress }), log, base.hello.nodeName);
  }

  /** Settings.shard_copies, as a replica announced it: 0 streams to every replica, N to the node's N owners. */
  shardCopies(copies: number): void {
    if (copies === this.#copies || !this.nodeName) return;
    this.log.info({ from: this.#copies, to: copies }, copies > 0 ? `gateway shards: streaming to this node's ${copies} owners` : 'gateway does not shard: streaming to every replica');
    this.#copies = copies;
    this.#open();
  }

  get addresses(): string[] {
    return [...this.#streams.keys()].sort();
  }

  stream(address: string): ReportStream | undefined {
    return this.#streams.get(address);
  }

  /** True when at least one replica is receiving live samples. */
  get live(): boolean {
    return [...this.#streams.values()].some((s) => s.live);
  }

  get reconnects(): number {
    return [...this.#streams.values()].reduce((n, s) => n + s.reconnects, 0);
  }

  /** Opens streams to new addresses and closes those no longer listed (or, sharded, no longer owners). */
  set(addresses: Iterable<string>): void {
    this.#listed = [...new Set(addresses)];
    this.#open();
  }

  #open(): void {
    if (this.#stopped) return;
    const wanted = new Set(this.#copies > 0 && this.nodeName ? owners(this.nodeName, this.#listed, this.#copies) : this.#listed);
    for (const [address, stream] of this.#streams) {
      if (!wanted.has(address)) {
        this.#streams.delete(address);
        void stream.stop();
        this.log.info({ gateway: address }, this.#listed.includes(address) ? 'gateway replica is not one of this node\'s owners: stream closed' : 'gateway replica gone: stream closed');
      }
    }
    for (const address of wanted) {
      if (this.#streams.has(address)) continue;
      const stream = this.create(address);
      this.#streams.set(address, stream);
      stream.start();
      this.log.info({ gateway: address, replicas: this.#streams.size }, 'streaming to gateway replica');
    }
  }

  push(sample: Sample__Output): void {
    for (const s of this.#streams.values()) s.push(sample);
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    await Promise.all([...this.#streams.values()].map((s) => s.stop()));
    this.#streams.clear();
  }
}
