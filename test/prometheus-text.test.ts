// The agent's own Prometheus text exposition (agent/prometheus-text.ts): exact
// output for each metric type, and the agent's series cost nothing between scrapes.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { AgentMetrics } from '../agent/metrics.js';
import { Counter, CounterFunc, Gauge, Histogram, Registry } from '../agent/prometheus-text.js';
import { metricValue } from './helpers/metrics.js';

describe('prometheus text exposition', () => {
  it('counters: labelled series in label order, escaped values, pre-declared series at 0', async () => {
    const r = new Registry();
    const c = r.register(new Counter({ name: 'x_total', help: 'Things.\nMore', labelNames: ['a', 'b'], initial: [{ a: 'ok' }] }));
    c.inc({ b: 'q"uo\\te', a: 'line\nbreak' }, 2);
    c.inc({ a: 'ok' });
    c.inc({ a: 'ok' }, 0.5);
    assert.equal(await r.metrics(),
      '# HELP x_total Things.\\nMore\n# TYPE x_total counter\n' +
      'x_total{a="ok"} 1.5\n' +
      'x_total{a="line\\nbreak",b="q\\"uo\\\\te"} 2\n');
    assert.equal(c.get({ a: 'ok' }), 1.5);
  });

  it('counters refuse to go down and refuse unknown labels', () => {
    const c = new Counter({ name: 'y_total', help: 'h', labelNames: ['result'] });
    assert.throws(() => c.inc({}, -1), /only goes up/);
    assert.throws(() => c.inc({ resutl: 'ok' } as never), /no label resutl/);
  });

  it('an unlabelled counter reads 0 before its first increase', async () => {
    const r = new Registry();
    r.register(new Counter({ name: 'z_total', help: 'h' }));
    assert.equal(metricValue(await r.metrics(), 'z_total'), 0);
  });

  it('histograms: cumulative buckets, +Inf, sum and count; a value on a bound falls in that bucket', async () => {
    const r = new Registry();
    const h = r.register(new Histogram({ name: 'd_seconds', help: 'h', buckets: [0.5, 0.0001, 1] }));
    for (const v of [0.00005, 0.0001, 0.3, 0.5, 0.7, 3]) h.observe(v);
    assert.equal(await r.metrics(),
      '# HELP d_seconds h\n# TYPE d_seconds histogram\n' +
      'd_seconds_bucket{le="0.0001"} 2\nd_seconds_bucket{le="0.5"} 4\nd_seconds_bucket{le="1"} 5\nd_seconds_bucket{le="+Inf"} 6\n' +
      `d_seconds_sum ${0.00005 + 0.0001 + 0.3 + 0.5 + 0.7 + 3}\nd_seconds_count 6\n`);
  });

  it('a histogram timer observes the elapsed seconds', async () => {
    const h = new Histogram({ name: 't_seconds', help: 'h', buckets: [0.001, 1] });
    const end = h.startTimer();
    await new Promise((r) => setTimeout(r, 20));
    const seconds = end();
    assert.ok(seconds >= 0.015 && seconds < 1, `${seconds}`);
    assert.equal(h.count, 1);
  });

  it('gauges and counter functions are read at scrape time; special values are spelled as Prometheus does', async () => {
    const r = new Registry();
    let v = 1;
    r.register(new Gauge('g', 'h', () => v));
    r.register(new CounterFunc('f_total', 'h', () => v * 10));
    v = 2;
    assert.equal(metricValue(await r.metrics(), 'g'), 2);
    assert.equal(metricValue(await r.metrics(), 'f_total'), 20);
    for (const [value, text] of [[NaN, 'NaN'], [Infinity, '+Inf'], [-Infinity, '-Inf'], [1e-7, '1e-7']] as const) {
      v = value;
      assert.match(await r.metrics(), new RegExp(`^g ${text.replace('+', '\\+')}$`, 'm'));
    }
  });

  it('a name registered twice is refused', () => {
    const r = new Registry();
    r.register(new Gauge('g', 'h', () => 1));
    assert.throws(() => r.register(new Gauge('g', 'h', () => 1)), /registered twice/);
  });

  it('the agent\'s series: process CPU and memory are this process\'s, the event-loop lag is measured at the scrape', async () => {
    const m = new AgentMetrics(() => undefined);
    const before = process.cpuUsage();
    const text = await m.registry.metrics();
    const cpu = metricValue(text, 'oversell_agent_process_cpu_seconds_total') ?? NaN;
    assert.ok(cpu >= (before.user + before.system) / 1e6, `${cpu}`);
    const user = metricValue(text, 'oversell_agent_process_cpu_user_seconds_total') ?? NaN;
    const system = metricValue(text, 'oversell_agent_process_cpu_system_seconds_total') ?? NaN;
    assert.ok(Math.abs(user + system - cpu) < 0.05, `${user} + ${system} vs ${cpu}`);
    const rss = metricValue(text, 'oversell_agent_process_resident_memory_bytes') ?? NaN;
    assert.ok(rss > 10 * 2 ** 20 && rss < 2 ** 34, `${rss}`);
    const start = metricValue(text, 'oversell_agent_process_start_time_seconds') ?? NaN;
    assert.ok(Math.abs(start - (Date.now() / 1000 - process.uptime())) < 2, `${start}`);
    assert.ok((metricValue(text, 'oversell_agent_process_open_fds') ?? NaN) > 2);
    assert.equal(metricValue(text, 'oversell_agent_samples_total', '{result="error"}'), 0);
    assert.equal(metricValue(text, 'oversell_agent_gateways_connected'), 0);

    // Block the loop while a scrape waits on it: the lag it reports covers the block.
    const scrape = m.registry.metrics();
    const until = Date.now() + 60;
    while (Date.now() < until) { /* busy */ }
    const lag = metricValue(await scrape, 'oversell_agent_nodejs_eventloop_lag_seconds') ?? NaN;
    assert.ok(lag >= 0.05 && lag < 5, `${lag}`);
  });

  it('the agent\'s metrics leave no timer running between scrapes', async () => {
    const resources = () => process.getActiveResourcesInfo().filter((r) => r !== 'TTYWrap' && r !== 'FSReqCallback');
    const before = resources();
    const m = new AgentMetrics(() => undefined);
    await m.registry.metrics();
    await new Promise((r) => setImmediate(r));
    assert.deepEqual(resources(), before);
  });
});
