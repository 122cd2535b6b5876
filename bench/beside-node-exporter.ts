// The agent's reference: Debian's prometheus-node-exporter (default collectors)
// scraped once a second, measured in the same window as the agent. Used by
// agent-overhead (the agent on a generated cgroup tree) and agent-real-node
// (the agent's DaemonSet pod on the real node).
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { loadavg } from 'node:os';
import { waitUntil } from '../scripts/harness/wait.js';
import { cpuSeconds, rssMiB } from './proc-stats.js';
import { freePort, log, startChild, type Child } from './processes.js';
import { mean, round } from './result.js';

const NODE_EXPORTER = '/usr/bin/prometheus-node-exporter';

export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/** Installs the Debian package when missing; returns its version. */
export function ensureNodeExporter(): string {
  if (!existsSync(NODE_EXPORTER)) {
    log('prometheus-node-exporter missing: apt-get install -y prometheus-node-exporter');
    execFileSync('apt-get', ['update'], { stdio: 'inherit' });
    execFileSync('apt-get', ['install', '-y', 'prometheus-node-exporter'], { stdio: 'inherit', env: { ...process.env, DEBIAN_FRONTEND: 'noninteractive' } });
  }
  const text = execFileSync(NODE_EXPORTER, ['--version'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
  const m = /version\s+(\S+)(?:\s+\(([^)]*)\))?/.exec(text);
  return m ? `${m[1]}${m[2] ? ` (${m[2]})` : ''}` : text.split('\n')[0] ?? 'unknown';
}

/** One process over the window: its own CPU (all threads) and RSS sampled every 5 s. */
export interface ProcessWindow {
  millicores: number;
  /** Over the second half of the window: steady state, after anything the start still costs. */
  millicoresSecondHalf: number;
  cpuSeconds: number;
  seconds: number;
  rssMiB: number[];
}

export interface SideBySide {
  agent: ProcessWindow;
  nodeExporter: ProcessWindow;
  nodeExporterVersion: string;
  scrapes: number;
  scrapeErrors: number;
  scrapeBytesAvg: number;
  scrapeMsAvg: number;
  loadavgStart: number;
  loadavgEnd: number;
}

/**
 * Starts node-exporter, scrapes it every second like Prometheus with
 * scrape_interval 1s, and after warmupS measures agentPid and node-exporter
 * over the same windowS; node-exporter is stopped before this returns.
 */
export async function besideNodeExporter(agentPid: number, o: { windowS: number; warmupS: number; progressEveryS: number }): Promise<SideBySide> {
  const version = ensureNodeExporter();
  const port = await freePort();
  const ne: Child = startChild('node-exporter', NODE_EXPORTER, [`--web.listen-address=127.0.0.1:${port}`]);
  const url = `http://127.0.0.1:${port}/metrics`;
  let scrapes = 0;
  let scrapeErrors = 0;
  let scrapeBytes = 0;
  let scrapeMs = 0;
  let scraping = false;
  const timers: Array<ReturnType<typeof setInterval>> = [];
  try {
    await waitUntil('node-exporter /metrics', async () => ((await fetch(url)).ok ? true : undefined), 20_000, 100);
    log(`node-exporter ${version} pid ${ne.pid} on :${port}, scraped every 1 s (bodies discarded)`);
    timers.push(setInterval(async () => {
      if (scraping) return; // never pile up; a slow scrape is counted as late, not doubled
      scraping = true;
      const t = performance.now();
      try {
        const res = await fetch(url);
        const body = await res.arrayBuffer();
        if (res.ok) {
          scrapes += 1;
          scrapeBytes += body.byteLength;
          scrapeMs += performance.now() - t;
        } else scrapeErrors += 1;
      } catch {
        scrapeErrors += 1;
      } finally {
        scraping = false;
      }
    }, 1000));

    log(`warm-up ${o.warmupS} s`);
    await sleep(o.warmupS * 1000);

    type Mark = { t: number; a: number; n: number };
    const mark = (): Mark => ({ t: performance.now(), a: cpuSeconds(agentPid), n: cpuSeconds(ne.pid) });
    const between = (from: Mark, to: Mark, which: 'a' | 'n') => ((to[which] - from[which]) / ((to.t - from.t) / 1000)) * 1000;
    const start = mark();
    const loadavgStart = loadavg()[0] ?? NaN;
    const scrapes0 = scrapes;
    const rss = { a: [rssMiB(agentPid)], n: [rssMiB(ne.pid)] };
    timers.push(setInterval(() => {
      try {
        rss.a.push(rssMiB(agentPid));
        rss.n.push(rssMiB(ne.pid));
      } catch {
        // a process exited: the checks below say which
      }
    }, 5000));
    let previous = start;
    let half: Mark | undefined;
    for (let left = o.windowS; left > 0; left -= o.progressEveryS) {
      await sleep(Math.min(o.progressEveryS, left) * 1000);
      const now = mark();
      log(`  ${String(Math.round((now.t - start.t) / 1000)).padStart(3)} s  agent ${between(start, now, 'a').toFixed(2)}m (last ${o.progressEveryS} s ${between(previous, now, 'a').toFixed(2)}m), ` +
        `${rss.a.at(-1)?.toFixed(1)} MiB | node-exporter ${between(start, now, 'n').toFixed(2)}m (last ${between(previous, now, 'n').toFixed(2)}m), ` +
        `${rss.n.at(-1)?.toFixed(1)} MiB | ${scrapes - scrapes0} scrapes`);
      previous = now;
      if (!half && (now.t - start.t) / 1000 >= o.windowS / 2 - 1) half = now;
    }
    const end = mark();
    rss.a.push(rssMiB(agentPid));
    rss.n.push(rssMiB(ne.pid));
    if (ne.proc.exitCode !== null) throw new Error(`node-exporter exited during the window:\n${ne.output()}`);
    const window = (which: 'a' | 'n'): ProcessWindow => ({
      millicores: between(start, end, which),
      millicoresSecondHalf: half ? between(half, end, which) : NaN,
      cpuSeconds: end[which] - start[which],
      seconds: (end.t - start.t) / 1000,
      rssMiB: rss[which],
    });
    return {
      agent: window('a'),
      nodeExporter: window('n'),
      nodeExporterVersion: version,
      scrapes: scrapes - scrapes0,
      scrapeErrors,
      scrapeBytesAvg: scrapes ? Math.round(scrapeBytes / scrapes) : 0,
      scrapeMsAvg: scrapes ? round(scrapeMs / scrapes, 1) : 0,
      loadavgStart,
      loadavgEnd: loadavg()[0] ?? NaN,
    };
  } finally {
    for (const t of timers) clearInterval(t);
    await ne.stop();
  }
}

/** The figures, targets and reference both agent benchmarks report from a window. */
export function agentVersusNodeExporter(w: SideBySide, what: string) {
  const agentCpu = round(w.agent.millicores);
  const neCpu = round(w.nodeExporter.millicores);
  const ratio = round(w.agent.millicores / w.nodeExporter.millicores, 3);
  const agentRssMax = round(Math.max(...w.agent.rssMiB), 1);
  const agentRssAvg = round(mean(w.agent.rssMiB), 1);
  const neRssMax = round(Math.max(...w.nodeExporter.rssMiB), 1);
  const neRssAvg = round(mean(w.nodeExporter.rssMiB), 1);
  return {
    agentCpu, neCpu, ratio, agentRssMax,
    figures: {
      agent_millicores_avg: agentCpu,
      agent_cpu_seconds: round(w.agent.cpuSeconds, 2),
      agent_rss_mib_max: agentRssMax,
      agent_rss_mib_avg: agentRssAvg,
      agent_rss_mib_first: round(w.agent.rssMiB[0] ?? NaN, 1),
      agent_rss_mib_last: round(w.agent.rssMiB.at(-1) ?? NaN, 1),
      agent_millicores_second_half: round(w.agent.millicoresSecondHalf),
      node_exporter_millicores_avg: neCpu,
      node_exporter_rss_mib_max: neRssMax,
      node_exporter_millicores_second_half: round(w.nodeExporter.millicoresSecondHalf),
      ratio_cpu: ratio,
      window_s: round(w.agent.seconds, 1),
      loadavg_1m_start: round(w.loadavgStart),
      loadavg_1m_end: round(w.loadavgEnd),
    },
    targets: [
      { name: `agent CPU <= 10 millicores average (${what})`, measured: `${agentCpu}m`, met: w.agent.millicores <= 10 },
      { name: 'agent RSS <= 64 MiB', measured: `${agentRssMax} MiB max (${agentRssAvg} avg)`, met: Math.max(...w.agent.rssMiB) <= 64 },
      { name: 'agent CPU <= node-exporter CPU scraped at 1 s (ratio <= 1)', measured: `${ratio} (${agentCpu}m / ${neCpu}m)`, met: w.agent.millicores <= w.nodeExporter.millicores },
    ],
    reference: {
      tool: 'prometheus-node-exporter (Debian package), default collectors',
      version: w.nodeExporterVersion,
      node_exporter_millicores_avg: neCpu,
      node_exporter_cpu_seconds: round(w.nodeExporter.cpuSeconds, 2),
      node_exporter_rss_mib_max: neRssMax,
      node_exporter_rss_mib_avg: neRssAvg,
      scrapes: w.scrapes,
      scrape_errors: w.scrapeErrors,
      scrape_bytes_avg: w.scrapeBytesAvg,
      scrape_ms_avg: w.scrapeMsAvg,
    },
    nodeExporterNote: `node-exporter ${w.nodeExporterVersion}, default collectors, a process on the host with --web.listen-address 127.0.0.1; the benchmark process GETs /metrics once a second and discards the body ` +
      `(${w.scrapes} scrapes in the window, ~${Math.round(w.scrapeBytesAvg / 1024)} KiB each). The scraper's own CPU is not counted, as the gateway's is not counted for the agent.`,
    windowNote: `Agent and node-exporter ran at the same time, in the same ${Math.round(w.agent.seconds)} s window; ` +
      'CPU is utime+stime of the process (all threads) from /proc/<pid>/stat over the window (CLK_TCK 100), RSS is VmRSS sampled every 5 s. ' +
      `Machine load (1-minute load average) was ${round(w.loadavgStart)} at the start of the window and ${round(w.loadavgEnd)} at its end; other work on the machine does not add to a process's own CPU time, but can slow it.`,
  };
}
