// Reading Prometheus text scrapes, for tests and benchmarks.
import assert from 'node:assert/strict';

/** One series' value in a Prometheus text scrape: metricValue(text, 'x_total', '{result="ok"}'). */
export function metricValue(text: string, name: string, labels = ''): number | undefined {
  const line = text.split('\n').find((l) => l.startsWith(`${name}${labels} `));
  return line === undefined ? undefined : Number(line.slice(line.lastIndexOf(' ') + 1));
}

/** Scrapes /metrics on 127.0.0.1:port and reads one series; NaN when absent. */
export async function scrapeMetric(port: number, name: string, labels = '', host = '127.0.0.1'): Promise<number> {
  const text = await (await fetch(`http://${host}:${port}/metrics`)).text();
  return metricValue(text, name, labels) ?? NaN;
}

/** Parses the text exposition format strictly enough to fail on garbage; returns TYPE by family. */
export function parseExposition(text: string): Map<string, string> {
  const types = new Map<string, string>();
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith('# HELP ')) continue;
    const t = /^# TYPE ([a-zA-Z_:][a-zA-Z0-9_:]*) (counter|gauge|histogram|summary|untyped)$/.exec(line);
    if (t) {
      types.set(t[1]!, t[2]!);
      continue;
    }
    assert.match(line, /^[a-zA-Z_:][a-zA-Z0-9_:]*(\{([a-zA-Z_][a-zA-Z0-9_]*="(\\.|[^"\\])*",?)*\})? -?(\d+(\.\d+)?(e[+-]?\d+)?|NaN|\+Inf|-Inf)( \d+)?$/, `not a sample line: ${line}`);
  }
  return types;
}
