// Counters, gauges and histograms rendered in the Prometheus text format 0.0.4:
// the few kinds the agent needs. The agent's CPU budget ruled out prom-client's
// default collectors (agent/process-metrics.ts), and without them prom-client
// was a whole library for a handful of series. The gateway keeps prom-client.

import { escapeLabel, familyHeader, formatValue } from '../lib/prometheus-text-format.js';

export type MetricType = 'counter' | 'gauge' | 'histogram';

export interface MetricFamily {
  readonly name: string;
  readonly help: string;
  readonly type: MetricType;
  readonly labelNames: readonly string[];
  /** Sample lines, each ending in a newline. */
  samples(): string;
}

type Labels<L extends string> = Partial<Record<L, string>>;

/** `{a="x",b="y"}` in labelNames order; empty without labels. */
function labelText(labelNames: readonly string[], labels: Record<string, string | undefined>): string {
  const parts: string[] = [];
  for (const name of labelNames) {
    const value = labels[name];
    if (value !== undefined) parts.push(`${name}="${escapeLabel(value)}"`);
  }
  return parts.length > 0 ? `{${parts.join(',')}}` : '';
}

function checkLabels(metric: string, labelNames: readonly string[], labels: Record<string, string | undefined>): void {
  for (const name of Object.keys(labels)) {
    if (!labelNames.includes(name)) throw new Error(`${metric} has no label ${name}`);
  }
}

interface Options<L extends string> {
  name: string;
  help: string;
  labelNames?: readonly L[];
}

export class Counter<L extends string = never> implements MetricFamily {
  readonly type = 'counter';
  readonly name: string;
  readonly help: string;
  readonly labelNames: readonly L[];
  readonly #values = new Map<string, number>();

  constructor(options: Options<L> & { initial?: ReadonlyArray<Labels<L>> }) {
    this.name = options.name;
    this.help = options.help;
    this.labelNames = options.labelNames ?? [];
    // Series that exist from the start read 0 rather than absent, so rate() sees their first increase.
    for (const labels of options.initial ?? (this.labelNames.length === 0 ? [{}] : [])) this.inc(labels, 0);
  }

  inc(labels: Labels<L> = {}, value = 1): void {
    if (!(value >= 0)) throw new Error(`${this.name}: a counter only goes up (got ${value})`);
    checkLabels(this.name, this.labelNames, labels);
    const key = labelText(this.labelNames, labels);
    this.#values.set(key, (this.#values.get(key) ?? 0) + value);
  }

  get(labels: Labels<L> = {}): number {
    return this.#values.get(labelText(this.labelNames, labels)) ?? 0;
  }

  samples(): string {
    let out = '';
    for (const [key, value] of this.#values) out += `${this.name}${key} ${formatValue(value)}\n`;
    return out;
  }
}

/** A value read when scraped: a gauge, or a counter whose total is kept elsewhere (CPU seconds from the kernel). */
class ReadOnScrape implements MetricFamily {
  readonly labelNames: readonly string[] = [];

  constructor(
    readonly type: 'gauge' | 'counter',
    readonly name: string,
    readonly help: string,
    private readonly read: () => number,
  ) {}

  samples(): string {
    return `${this.name} ${formatValue(this.read())}\n`;
  }
}

export class Gauge extends ReadOnScrape {
  constructor(name: string, help: string, read: () => number) {
    super('gauge', name, help, read);
  }
}

export class CounterFunc extends ReadOnScrape {
  constructor(name: string, help: string, read: () => number) {
    super('counter', name, help, read);
  }
}

export class Histogram implements MetricFamily {
  readonly type = 'histogram';
  readonly name: string;
  readonly help: string;
  readonly labelNames: readonly string[] = [];
  readonly #upperBounds: readonly number[];
  /** Observations per bucket (not cumulative); the last one is +Inf. */
  readonly #counts: number[];
  #sum = 0;
  #count = 0;

  constructor(options: { name: string; help: string; buckets: readonly number[] }) {
    this.name = options.name;
    this.help = options.help;
    this.#upperBounds = [...options.buckets].sort((a, b) => a - b);
    this.#counts = new Array<number>(this.#upperBounds.length + 1).fill(0);
  }

  observe(value: number): void {
    let i = 0;
    while (i < this.#upperBounds.length && value > (this.#upperBounds[i] as number)) i++;
    this.#counts[i] = (this.#counts[i] ?? 0) + 1;
    this.#sum += value;
    this.#count += 1;
  }

  /** Starts a timer; calling the result observes the seconds since, and returns them. */
  startTimer(): () => number {
    const start = process.hrtime.bigint();
    return () => {
      const seconds = Number(process.hrtime.bigint() - start) / 1e9;
      this.observe(seconds);
      return seconds;
    };
  }

  get count(): number {
    return this.#count;
  }

  samples(): string {
    let out = '';
    let cumulative = 0;
    this.#upperBounds.forEach((le, i) => {
      cumulative += this.#counts[i] ?? 0;
      out += `${this.name}_bucket{le="${formatValue(le)}"} ${cumulative}\n`;
    });
    out += `${this.name}_bucket{le="+Inf"} ${this.#count}\n`;
    out += `${this.name}_sum ${formatValue(this.#sum)}\n${this.name}_count ${this.#count}\n`;
    return out;
  }
}

export class Registry {
  readonly contentType = 'text/plain; version=0.0.4; charset=utf-8';
  readonly #families = new Map<string, MetricFamily>();
  readonly #beforeScrape: Array<() => Promise<void> | void> = [];

  register<M extends MetricFamily>(metric: M): M {
    if (this.#families.has(metric.name)) throw new Error(`metric ${metric.name} is registered twice`);
    this.#families.set(metric.name, metric);
    return metric;
  }

  /** Runs before every scrape, e.g. to measure something the scrape reports. */
  beforeScrape(fn: () => Promise<void> | void): void {
    this.#beforeScrape.push(fn);
  }

  get(name: string): MetricFamily | undefined {
    return this.#families.get(name);
  }

  families(): MetricFamily[] {
    return [...this.#families.values()];
  }

  async metrics(): Promise<string> {
    await Promise.all(this.#beforeScrape.map((fn) => fn()));
    let out = '';
    for (const m of this.#families.values()) {
      out += `${familyHeader(m.name, m.help, m.type)}${m.samples()}`;
    }
    return out;
  }
}
