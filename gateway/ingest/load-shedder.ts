// The edge of load shedding: measures the main thread's loop delay each
// period, takes the ingest thread's own, steps the pure policy (shed.ts), tells
// the agents the interval it gives, refuses queries while the main thread is
// behind, and says so in metrics and in one log line when shedding starts and
// one when it stops.
import type { Logger } from '../../lib/log.js';
import type { GatewayMetrics } from '../metrics/metrics.js';
import type { Sending } from './agent-sending.js';
import { loopDelay, type LoopDelay } from './loop-delay.js';
import { initialShedState, isShedding, sendingAt, shedStep, type ShedLimits, type ShedState } from './shed.js';

export interface LoadShedderOptions {
  limits: ShedLimits;
  /** What agents are told when calm (--agent-batch-samples, --agent-send-every). */
  base: Sending;
  /** Tells every agent stream, on every thread, what it is told now. */
  announce(sending: Sending): void;
  /** The most delayed ingest thread's last measured loop delay in ms; undefined without one. */
  ingestDelayMs?: () => number | undefined;
  metrics: Pick<GatewayMetrics, 'shedding' | 'shed' | 'overloadedFor'>;
  log: Logger;
  /** How often delays are measured and the policy stepped (default 1 s). */
  periodMs?: number;
  now?: () => number;
  /** The main thread's delay monitor (default loopDelay(); tests script one). */
  monitor?: () => LoopDelay;
}

export class LoadShedder {
  readonly #o: LoadShedderOptions;
  readonly #now: () => number;
  #state: ShedState;
  #delay: LoopDelay | undefined;
  #timer: NodeJS.Timeout | undefined;
  #lastMainMs = 0;
  #lastStepAt = 0;
  /** Of the shedding under way: queries refused and the longest interval announced, for the line that ends it. */
  #episode = { queries: 0, longestMs: 0, longestSampleMs: 0, sinceMs: 0 };

  constructor(options: LoadShedderOptions) {
    this.#o = options;
    this.#now = options.now ?? Date.now;
    this.#state = initialShedState(options.limits, this.#now());
  }

  /** What agents are told now. */
  get sending(): Sending {
    return sendingAt(this.#state.sendEveryMs, this.#o.base, this.#state.sampleEveryMs);
  }

  start(): void {
    this.#delay = (this.#o.monitor ?? loopDelay)();
    this.#lastStepAt = this.#now();
    this.#publish();
    this.#timer = setInterval(() => this.step(), this.#o.periodMs ?? 1000);
    this.#timer.unref();
  }

  stop(): void {
    clearInterval(this.#timer);
    this.#delay?.stop();
    this.#delay = undefined;
  }

  /**
   * The status to refuse a query with while the main thread is behind
   * (counted), or undefined: the webhook shares that thread and its reviews
   * come first.
   */
  refuseQuery(): string | undefined {
    if (!this.#state.mainOverloaded) return undefined;
    this.#o.metrics.shed('queries');
    this.#episode.queries += 1;
    return `the gateway is overloaded (its main thread runs ${Math.round(this.#lastMainMs)}ms late, limit ${this.#o.limits.overloadDelayMs}ms, --shed-loop-delay) and refuses queries so that node reviews are answered; retry with exponential backoff from 1s, or ask another replica`;
  }

  /** One period: measure, decide, announce, report. Runs on the timer; tests may call it. */
  step(): void {
    if (!this.#delay) return;
    const mainMs = this.#delay.read();
    const mainBusy = this.#delay.busy();
    const ingestMs = this.#o.ingestDelayMs?.();
    this.#lastMainMs = mainMs;
    const before = this.#state;
    const now = this.#now();
    // The state before this step held over the period just ended.
    const periodMs = now - this.#lastStepAt;
    this.#lastStepAt = now;
    if (before.mainOverloaded) this.#o.metrics.overloadedFor('main', periodMs);
    if (before.ingestOverloaded) this.#o.metrics.overloadedFor('ingest', periodMs);
    this.#state = shedStep(before, { mainMs, mainBusy, ingestMs }, now, this.#o.limits);
    const { limits } = this.#o;
    const was = isShedding(before, limits);
    const is = isShedding(this.#state, limits);
    const changed = this.#state.sendEveryMs !== before.sendEveryMs || this.#state.sampleEveryMs !== before.sampleEveryMs;
    if (this.#state.sendEveryMs !== before.sendEveryMs) {
      this.#o.log.debug({ sendEveryMs: this.#state.sendEveryMs, was: before.sendEveryMs, mainDelayMs: Math.round(mainMs), ingestDelayMs: ingestMs && Math.round(ingestMs) }, 'agents told a new send interval');
    }
    if (this.#state.sampleEveryMs !== before.sampleEveryMs) {
      // Samples shed are data the decision never sees: said at info, not debug.
      this.#o.log.info({ minSampleIntervalMs: this.#state.sampleEveryMs, was: before.sampleEveryMs, mainDelayMs: Math.round(mainMs), ingestDelayMs: ingestMs && Math.round(ingestMs) }, this.#state.sampleEveryMs > 0 ? `agents told to sample at most every ${this.#state.sampleEveryMs / 1000}s: sending as seldom as allowed did not relieve the gateway` : 'agents told to sample at their own interval again');
    }
    if (!was && is) {
      this.#episode = { queries: 0, longestMs: this.#state.sendEveryMs, longestSampleMs: this.#state.sampleEveryMs, sinceMs: now };
      const behind = [this.#state.mainOverloaded && `the main thread (store, webhook, query API) runs ${Math.round(mainMs)}ms late`, this.#state.ingestOverloaded && `an ingest thread runs ${Math.round(ingestMs ?? 0)}ms late`].filter(Boolean).join(' and ');
      this.#o.log.warn(
        { mainDelayMs: Math.round(mainMs), ingestDelayMs: ingestMs && Math.round(ingestMs), limitMs: limits.overloadDelayMs, sendEveryMs: this.#state.sendEveryMs },
        `shedding load: ${behind} (over --shed-loop-delay ${limits.overloadDelayMs}ms); agents are told to send every ${this.#state.sendEveryMs / 1000}s (calm: ${limits.baseMs / 1000}s, at most ${limits.maxMs / 1000}s; rises and pressure still at once)${this.#state.mainOverloaded ? ' and queries are refused with RESOURCE_EXHAUSTED' : ''}; reviews are still answered. oversell_overloaded and oversell_shed_total say how much`,
      );
    }
    this.#episode.longestMs = Math.max(this.#episode.longestMs, this.#state.sendEveryMs);
    this.#episode.longestSampleMs = Math.max(this.#episode.longestSampleMs, this.#state.sampleEveryMs);
    if (was && !is) {
      this.#o.log.info(
        { forMs: now - this.#episode.sinceMs, queriesRefused: this.#episode.queries, longestSendEveryMs: this.#episode.longestMs, longestMinSampleIntervalMs: this.#episode.longestSampleMs },
        `shedding stopped: every thread under ${limits.calmDelayMs}ms of loop delay; agents send every ${limits.baseMs / 1000}s again, queries are served (${this.#episode.queries} refused while it lasted; agents slowed to at most ${this.#episode.longestMs / 1000}s${this.#episode.longestSampleMs > 0 ? `, sampling at most every ${this.#episode.longestSampleMs / 1000}s` : ''})`,
      );
    }
    this.#publish();
    if (changed) this.#o.announce(this.sending);
  }

  /** The ingest threads' own delays are reported as they arrive (ingest-worker.ts); this is the main thread's and the policy's state. */
  #publish(): void {
    this.#o.metrics.shedding({ mainDelayMs: this.#lastMainMs, mainOverloaded: this.#state.mainOverloaded, ingestOverloaded: this.#state.ingestOverloaded, sendEveryMs: this.#state.sendEveryMs, minSampleIntervalMs: this.#state.sampleEveryMs });
  }
}
