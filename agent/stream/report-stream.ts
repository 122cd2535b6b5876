// The agent's end of AgentStream.Report: one long-lived stream that survives
// gateway restarts. Every sample carries a sequence number scoped to this
// process (instance id); unacknowledged samples are kept in a bounded buffer and
// replayed after a reconnect from the gateway's last stored seq, so the gateway
// neither misses the gap nor counts a sample twice. To a gateway that asks for
// summaries (Settings.summary_plans) only the newest sample goes, carrying the
// agent's own window summarized: nothing waits to be replayed.
import * as grpc from '@grpc/grpc-js';
import type { AgentStreamClient } from '../../proto/gen/oversell/v1/AgentStream.js';
import type { GatewayMessage__Output } from '../../proto/gen/oversell/v1/GatewayMessage.js';
import type { Hello } from '../../proto/gen/oversell/v1/Hello.js';
import type { PodUsage__Output } from '../../proto/gen/oversell/v1/PodUsage.js';
import type { Sample__Output } from '../../proto/gen/oversell/v1/Sample.js';
import type { Settings__Output } from '../../proto/gen/oversell/v1/Settings.js';
import { oversellV1 } from '../../proto/load.js';
import type { Logger } from '../../lib/log.js';
import { Backoff } from '../../lib/backoff.js';
import type { GatewayConnection } from './gateway-connection.js';
import { cpuPressureOf } from '../../wire/cpu-pressure.js';
import { keptPlans, type KeptPlan, UsageSummarizer } from './usage-summarizer.js';
import { summarySilenceMs } from '../../wire/usage-summary.js';
import { podNames } from '../../wire/pod-figures.js';

export interface ReportStreamOptions {
  gatewayAddress: string;
  hello: Hello;
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
  /** How the current gateway takes samples (its welcome); undefined: one message per sample, at once. */
  #sending: Sending | undefined;
  /** The highest seq written on the current call, and the sample it carried. */
  #sentSeq = 0;
  #lastSent: Sample__Output | undefined;
  /** The node's own window, kept always: what a gateway asking for summaries reads. */
  readonly #window = new UsageSummarizer();
  /** The plans the current gateway asked summaries for (its Settings); undefined: it takes samples. */
  #summarizing: Summarizing | undefined;
  /** The current gateway takes pod reports without names (Settings.takes_pod_names_as_before). */
  #takesNamesAsBefore = false;
  /** The names of the last report on the current call that named its pods, and reports sent without since. */
  #namedPods: string | undefined;
  #unnamedSince = 0;
  reconnects = 0;
  ackedSeq = 0;
  /** Messages written (samples or batches), for the agent's metrics. */
  messagesSent = 0;

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
    this.#window.add(sample);
    if (this.#summarizing) {
      this.#pushSummarized(sample);
      return;
    }
    this.#buffer.push(sample);
    if (this.#buffer.length > this.#options.bufferSize) this.#buffer.shift();
    if (!this.#live) return;
    const sending = this.#sending;
    const first = this.#firstUnsent();
    const oldest = this.#buffer[first];
    if (!sending || sendsAtOnce(sample, this.#lastSent) || (oldest !== undefined && sample.timestampMs - oldest.timestampMs >= sending.sendEveryMs) || this.#buffer.length - first >= sending.maxBatchSamples) {
      this.#flush();
    }
  }

  /**
   * With summaries, only the newest sample goes, carrying the window: the
   * samples before it are in the summary, so none waits to be replayed. It
   * goes every summaryEveryMs and at once on what a batch would send at once.
   */
  #pushSummarized(sample: Sample__Output): void {
    const s = this.#summarizing!;
    this.#buffer.length = 0;
    this.#buffer.push(sample);
    if (!this.#live) return;
    const last = this.#lastSent;
    if (!last || sendsAtOnce(sample, last)) this.#flush();
    else if (sample.timestampMs - last.timestampMs >= s.everyMs) this.#flush(true);
  }

  /** Index of the first buffered sample not yet written on the current call: they are the buffer's tail (seq ascending). */
  #firstUnsent(): number {
    let i = this.#buffer.length;
    while (i > 0 && this.#buffer[i - 1]!.seq > this.#sentSeq) i -= 1;
    return i;
  }

  /**
   * Writes every buffered sample not yet sent: one message each, or batches
   * when the gateway takes them. onBeat: a summary sent only because the beat
   * came (the gateway may hand it over later than one sent at once).
   */
  #flush(onBeat = false): void {
    const call = this.#call;
    if (!call) return;
    const summarizing = this.#summarizing;
    if (summarizing) {
      const newest = this.#buffer[this.#buffer.length - 1];
      if (!newest || newest.seq <= this.#sentSeq) return;
      call.write({ sample: { ...this.#onWire(newest), onBeat, summaries: this.#window.summaries(summarizing.plans, newest.capacity?.memoryBytes ?? 0) } });
      this.messagesSent += 1;
      this.#sentSeq = newest.seq;
      this.#lastSent = newest;
      this.#buffer.length = 0;
      return;
    }
    const unsent = this.#buffer.slice(this.#firstUnsent());
    const size = this.#sending?.maxBatchSamples ?? 1;
    for (let i = 0; i < unsent.length; i += size) {
      const chunk = unsent.slice(i, i + size);
      call.write(chunk.length === 1 ? { sample: this.#onWire(chunk[0]!) } : { batch: { samples: chunk.map((c) => this.#onWire(c)) } });
      this.messagesSent += 1;
    }
    const last = unsent[unsent.length - 1];
    if (last) {
      this.#sentSeq = last.seq;
      this.#lastSent = last;
    }
  }

  /**
   * The sample as it goes on the current call: a pod report whose pods and
   * containers are the last named report's goes without their names, to a
   * gateway that takes that, except every NAMES_AGAIN_EVERY-th report.
   */
  #onWire(sample: Sample__Output): Sample__Output {
    if (!sample.podsIncluded || sample.pods.length === 0) return sample;
    const names = podNames(sample.pods);
    if (this.#takesNamesAsBefore && names === this.#namedPods && this.#unnamedSince < NAMES_AGAIN_EVERY - 1) {
      this.#unnamedSince += 1;
      return { ...sample, podNamesAsBefore: true, pods: sample.pods.map(withoutNames) };
    }
    this.#namedPods = names;
    this.#unnamedSince = 0;
    return sample;
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
      this.#sending = sendingOf(msg.welcome.settings);
      this.#summarizing = summarizingOf(msg.welcome.settings);
      this.#sentSeq = lastSeq;
      this.#lastSent = undefined;
      this.#takesNamesAsBefore = msg.welcome.settings?.takesPodNamesAsBefore ?? false;
      // A new stream knows no names yet: its first report names them.
      this.#namedPods = undefined;
      this.#options.log.info(
        {
          gateway: this.#options.gatewayAddress, gatewayLastSeq: lastSeq, replaying: this.#summarizing ? 0 : this.#buffer.length,
          batches: this.#sending?.maxBatchSamples ?? 0, sendEveryMs: this.#sending?.sendEveryMs ?? 0, summaryPlans: this.#summarizing?.plans.length ?? 0,
        },
        'connected to gateway',
      );
      this.#flush();
      if (msg.welcome.settings) this.#options.onSettings?.(msg.welcome.settings);
    } else if (msg.ack) {
      this.#dropUpTo(msg.ack.lastSeq);
    } else if (msg.settings) {
      if (msg.settings.maxBatchSamples > 0) this.#sending = sendingOf(msg.settings);
      // Every Settings of a gateway that asks for summaries names its plans: none named, samples again.
      this.#summarizing = summarizingOf(msg.settings);
      this.#takesNamesAsBefore = msg.settings.takesPodNamesAsBefore;
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
    // A gateway acknowledges summarized samples by time (the interval its settings say, with the next sample): wait for that.
    const s = this.#summarizing;
    const silenceMs = s ? Math.max(this.#options.silenceTimeoutMs, summarySilenceMs(s.ackEveryMs, s.everyMs)) : this.#options.silenceTimeoutMs;
    clearTimeout(this.#silenceTimer);
    this.#silenceTimer = setTimeout(
      () => this.#onBroken(call, `no message from the gateway for ${silenceMs} ms`),
      silenceMs,
    );
  }
}

/**
 * A gateway that takes pod reports without names still gets them named this
 * often (every 15th report: 5 minutes at a report every 20 s), so one that
 * could not place a report without names (docs/architecture.md) has them again.
 */
export const NAMES_AGAIN_EVERY = 15;

function withoutNames(p: PodUsage__Output): PodUsage__Output {
  return { ...p, uid: '', qosClass: '', containers: p.containers.map((c) => ({ ...c, containerId: '' })) };
}

interface Sending {
  maxBatchSamples: number;
  sendEveryMs: number;
}

interface Summarizing {
  plans: KeptPlan[];
  everyMs: number;
  /** Settings.summary_ack_every_ms: 0 from a gateway older than it. */
  ackEveryMs: number;
}

/** The plans a gateway's settings ask summaries for; undefined when it names none this agent can keep (an older gateway names none). */
function summarizingOf(settings: Settings__Output | null | undefined): Summarizing | undefined {
  const plans = keptPlans(settings?.summaryPlans ?? []);
  if (plans.length === 0) return undefined;
  return { plans, everyMs: Math.max(1000, settings!.sendEveryMs || 10_000), ackEveryMs: settings!.summaryAckEveryMs ?? 0 };
}

/** What a gateway's settings say about batches; undefined from a gateway that takes none (an older one says nothing). */
function sendingOf(settings: Settings__Output | null | undefined): Sending | undefined {
  if (!settings || !(settings.maxBatchSamples > 1)) return undefined;
  return { maxBatchSamples: Math.min(settings.maxBatchSamples, 256), sendEveryMs: Math.max(0, settings.sendEveryMs) };
}

// A change the gateway must see at once: a rise lowers allocatable, and a fall
// this large moves the grant. Below these, the sample waits for the next send.
const CPU_CHANGE = { share: 0.1, millicores: 50 };
const MEMORY_CHANGE = { share: 0.02, bytes: 16 * 1024 * 1024 };
/** PSI avg10 points: any rise of pressure by this much is sent at once. */
const PRESSURE_RISE = 1;

/** Whether a sample goes out at once rather than with the next batch. */
export function sendsAtOnce(s: Sample__Output, last: Sample__Output | undefined): boolean {
  if (!last || s.podsIncluded) return true;
  const changed = (now: number, before: number, share: number, floor: number) => Math.abs(now - before) > Math.max(floor, share * before);
  if (changed(s.cpuUsageMillicores, last.cpuUsageMillicores, CPU_CHANGE.share, CPU_CHANGE.millicores)) return true;
  if (changed(s.memoryWorkingSetBytes, last.memoryWorkingSetBytes, MEMORY_CHANGE.share, MEMORY_CHANGE.bytes)) return true;
  const p = s.pressure;
  const q = last.pressure;
  if (p && cpuPressureOf(p) >= cpuPressureOf(q) + PRESSURE_RISE) return true;
  if (p && (p.memorySome?.avg10 ?? 0) >= (q?.memorySome?.avg10 ?? 0) + PRESSURE_RISE) return true;
  // More CPUs held exclusively lowers the CPU grant; a change of policy is rare and told at once too.
  if (s.cpuManager?.staticPolicy !== last.cpuManager?.staticPolicy || s.cpuManager?.exclusiveCpus !== last.cpuManager?.exclusiveCpus) return true;
  const r = s.requests;
  const o = last.requests;
  return r?.cpuMillicores !== o?.cpuMillicores || r?.memoryBytes !== o?.memoryBytes || r?.known !== o?.known;
}
