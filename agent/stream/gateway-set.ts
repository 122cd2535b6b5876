// High availability without a shared store: the agent streams every sample to
// every gateway replica, so each replica answers every webhook call with full
// data and losing one loses nothing. The set of replicas is a fixed list
// (--gateway a,b) or follows the gateway's EndpointSlices.
import type { Sample__Output } from '../../proto/gen/oversell/v1/Sample.js';
import type { Logger } from '../../lib/log.js';
import { ReportStream, type ReportStreamOptions } from './report-stream.js';

export type StreamFactory = (address: string) => ReportStream;

export class GatewaySet {
  readonly #streams = new Map<string, ReportStream>();
  #stopped = false;

  constructor(
    private readonly create: StreamFactory,
    private readonly log: Logger,
  ) {}

  static withOptions(base: Omit<ReportStreamOptions, 'gatewayAddress'>, log: Logger): GatewaySet {
    return new GatewaySet((gatewayAddress) => new ReportStream({ ...base, gatewayAddress }), log);
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

  /** Opens streams to new addresses and closes those no longer listed. */
  set(addresses: Iterable<string>): void {
    if (this.#stopped) return;
    const wanted = new Set(addresses);
    for (const [address, stream] of this.#streams) {
      if (!wanted.has(address)) {
        this.#streams.delete(address);
        void stream.stop();
        this.log.info({ gateway: address }, 'gateway replica gone: stream closed');
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
