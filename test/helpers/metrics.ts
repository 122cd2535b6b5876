// Reading Prometheus text scrapes, for tests and benchmarks.

/** One series' value in a Prometheus text scrape: metricValue(text, 'x_total', '{result="ok"}'). */
export function metricValue(text: string, name: string, labels = ''): number | undefined {
  const line = text.split('\n').find((l) => l.startsWith(`${name}${labels} `));
  return line === undefined ? undefined : Number(line.slice(line.lastIndexOf(' ') + 1));
}

/** Scrapes /metrics on 127.0.0.1:port and reads one series; NaN when absent. */
export async function scrapeMetric(port: number, name: string, labels = ''): Promise<number> {
  const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
  return metricValue(text, name, labels) ?? NaN;
}
