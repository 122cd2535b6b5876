// The agent's end of AgentStream.Report: one long-lived stream that survives
// gateway restarts. Every sample carries a sequence number scoped to this
// process (instance id); unacknowledged samples are kept in a bounded buffer and
// replayed after a reconnect from the gateway's last stored seq, so the gateway
// neither misses the gap nor counts a sample twice.
import * as grpc from '@grpc/grpc-js';
import type { AgentStreamClient } from '../../proto/gen/oversell/v1/AgentStream.js';
import type { GatewayMessage__Output } from '../../proto/gen/oversell/v1/GatewayMessage.js';
import type { Hello__Output } from '../../proto/gen/oversell/v1/Hello.js';
import type { Sample__Output } from '../../proto/gen/oversell/v1/Sample.js';
import type { Settings__Output } from '../../proto/gen/oversell/v1/Settings.js';
import { oversellV1 } from '../../proto/load.js';
import type { Logger } from '../../lib/log.js';
import { Backoff } from '../../lib/backoff.js';
import type { GatewayConnection } from './gateway-connection.js';

export interface ReportStreamOptions {
  gatewayAddress: string;
  hello: Hello__Output;
  log: Logger;
  /** Samples kept for replay while the gateway is away. */
  bufferSize?: number;
  backoffInitialMs?: number;
  backoffMaxMs?: number;
  /** Reconnect when the gateway has said nothing (no ack) for this long. */
  silenceTimeoutMs?: number;
  onSettings?: (settings: Settings__Output) => void;
  /** TLS and token; plain gRPC without it. */
  connection?: GatewayConnection;
}

type Call = grpc.ClientDuplexStream<unknown, GatewayMessage__Output>;

export class ReportStream {
  readonly #options: Required<Omit<ReportStreamOptions, 'onSettings' | 'connection'>> & Pick<ReportStreamOptions, 'onSettings' | 'connection'>;
  readonly #client: AgentStreamClient;
  readonly #backoff: Backoff;
  readonly #buffer: Sample__Output[] = [];
  #call: Call | undefined;
  #live = false;
  #stopped = false;
  #retryTimer: NodeJS.Timeout | undefined;
  #silenceTimer: NodeJS.Timeout | undefined;
  #connects = 0;
  reconnects = 0;
  ackedSeq = 0;

  constructor(options: ReportStreamOptions) {
    this.#options = {
      bufferSize: 120,
      backoffInitialMs: 500,
      backoffMaxMs: 30_000,
      silenceTimeoutMs: 30_000,
      ...options,
    };
    const V1 = oversellV1();
    const c = options.connection;
    this.#client = new V1.AgentStream(options.gatewayAddress, c?.credentials ?? grpc.credentials.createInsecure(), c?.channelOptions ?? {});
    this.#backoff = new Backoff({ initialMs: this.#options.backoffInitialMs, maxMs: this.#options.backoffMaxMs });
  }

  /** True once the gateway welcomed this stream and live samples flow. */
  get live(): boolean {
    return this.#live;
  }

  get buffered(): number {
    return this.#buffer.length;
  }

  start(): void {
    this.#connect();
  }

  push(sample: Sample__Output): void {
    this.#buffer.push(sample);
    if (this.#buffer.length > this.#options.bufferSize) this.#buffer.shift();
    if (this.#live) this.#call?.write({ sample });
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    clearTimeout(this.#retryTimer);
    clearTimeout(this.#silenceTimer);
    const call = this.#call;
    this.#call = undefined;
    this.#live = false;
    call?.end();
    call?.cancel();
    this.#client.close();
  }

  #connect(): void {
    if (this.#stopped) return;
    this.#connects += 1;
    if (this.#connects > 1) this.reconnects += 1;
    const metadata = new grpc.Metadata();
    try {
      const token = this.#options.connection?.token?.();
      if (token) metadata.set('authorization', `Bearer ${token}`);
    } catch (err) {
      this.#options.log.error({ err: (err as Error).message }, 'no token for the gateway; retrying');
      this.#retryTimer = setTimeout(() => this.#connect(), this.#backoff.next());
      return;
    }
    const call = this.#client.Report(metadata) as Call;
    this.#call = call;
    this.#armSilenceTimer(call);
    call.on('data', (msg: GatewayMessage__Output) => this.#onMessage(call, msg));
    call.on('error', (err: grpc.ServiceError) => this.#onBroken(call, `${grpc.status[err.code] ?? err.code}: ${err.details || err.message}`));
    call.on('end', () => this.#onBroken(call, 'gateway closed the stream'));
    call.write({ hello: this.#options.hello });
  }

  #onMessage(call: Call, msg: GatewayMessage__Output): void {
    if (call !== this.#call) return;
    this.#armSilenceTimer(call);
    if (msg.welcome) {
      const lastSeq = msg.welcome.lastSeq;
      this.#dropUpTo(lastSeq);
      this.#live = true;
      this.#backoff.reset();
      this.#options.log.info(
        { gateway: this.#options.gatewayAddress, gatewayLastSeq: lastSeq, replaying: this.#buffer.length },
        'connected to gateway',
      );
      for (const sample of this.#buffer) call.write({ sample });
      if (msg.welcome.settings) this.#options.onSettings?.(msg.welcome.settings);
    } else if (msg.ack) {
      this.#dropUpTo(msg.ack.lastSeq);
    } else if (msg.settings) {
      this.#options.onSettings?.(msg.settings);
    }
  }

  #dropUpTo(seq: number): void {
    this.ackedSeq = Math.max(this.ackedSeq, seq);
    while (this.#buffer.length > 0 && (this.#buffer[0]?.seq ?? Infinity) <= seq) this.#buffer.shift();
  }

  #onBroken(call: Call, why: string): void {
    if (call !== this.#call || this.#stopped) return;
    this.#call = undefined;
    this.#live = false;
    clearTimeout(this.#silenceTimer);
    call.cancel();
    const delay = this.#backoff.next();
    this.#options.log.warn(
      { gateway: this.#options.gatewayAddress, reason: why, retryInMs: delay, buffered: this.#buffer.length },
      'gateway stream lost; samples are buffered and will be replayed on reconnect',
    );
    this.#retryTimer = setTimeout(() => this.#connect(), delay);
  }

  #armSilenceTimer(call: Call): void {
    clearTimeout(this.#silenceTimer);
    this.#silenceTimer = setTimeout(
      () => this.#onBroken(call, `no message from the gateway for ${this.#options.silenceTimeoutMs} ms`),
      this.#options.silenceTimeoutMs,
    );
  }
}
