// The edge of load shedding (gateway/ingest/load-shedder.ts) over scripted
// loop delays: what agents are told and when, which queries are refused, and
// that the log says so once when shedding starts and once when it stops, not
// per period or per query.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { pino } from 'pino';
import { LoadShedder } from '../../../gateway/ingest/load-shedder.js';
import { shedLimits } from '../../../gateway/ingest/shed.js';
import { GatewayMetrics } from '../../../gateway/metrics/metrics.js';
import { NodeStore } from '../../../gateway/store/node-store.js';

interface Line { level: number; msg: string; [k: string]: unknown }

describe('LoadShedder', () => {
  it('slows agents and refuses queries while overloaded, says so once each way, and undoes it when calm', async () => {
    const lines: Line[] = [];
    const log = pino({ level: 'debug' }, { write: (s: string) => void lines.push(JSON.parse(s) as Line) });
    const metrics = new GatewayMetrics(new NodeStore({ retainMs: 60_000, forgetAfterMs: 600_000 }));
    let clock = 0;
    const delays: number[] = [];
    const told: number[] = [];
    const shedder = new LoadShedder({
      limits: shedLimits(5000, 20_000, 50),
      base: { maxBatchSamples: 10, sendEveryMs: 5000 },
      announce: (s) => told.push(s.sendEveryMs),
      metrics,
      log,
      // Stepped by hand below.
      periodMs: 3_600_000,
      now: () => clock,
      monitor: () => ({ read: () => delays.shift() ?? 0, busy: () => 1, stop: () => {} }),
    });
    const steps = (delayMs: number, n: number) => {
      for (let i = 0; i < n; i++) {
        clock += 1000;
        delays.push(delayMs);
        shedder.step();
      }
    };
    shedder.start();
    try {
      steps(3, 5);
      assert.equal(shedder.refuseQuery(), undefined, 'calm: queries served');
      assert.deepEqual(told, []);

      steps(80, 25);
      assert.deepEqual(told, [10_000, 20_000], 'doubled at once, again 10 s later, then held at the max');
      assert.deepEqual(shedder.sending, { maxBatchSamples: 40, sendEveryMs: 20_000, minSampleIntervalMs: 0 });
      const why = shedder.refuseQuery();
      assert.match(why ?? '', /main thread runs 80ms late, limit 50ms, --shed-loop-delay\) and refuses queries .*retry with exponential backoff/);
      for (let i = 0; i < 9; i++) shedder.refuseQuery();

      steps(2, 70);
      assert.equal(shedder.refuseQuery(), undefined, 'calm again: queries served');
      assert.deepEqual(told, [10_000, 20_000, 10_000, 5000], 'a step down per 30 s calm, back to the base');

      const said = lines.filter((l) => l.level >= 30);
      assert.equal(said.length, 2, `one line when shedding starts, one when it stops: ${said.map((l) => l.msg).join(' | ')}`);
      assert.equal(said[0]!.level, 40);
      assert.match(said[0]!.msg, /^shedding load: the main thread \(store, webhook, query API\) runs 80ms late \(over --shed-loop-delay 50ms\); agents are told to send every 10s .* and queries are refused with RESOURCE_EXHAUSTED; reviews are still answered/);
      assert.equal(said[1]!.level, 30);
      assert.match(said[1]!.msg, /^shedding stopped: .* agents send every 5s again, queries are served \(10 refused while it lasted; agents slowed to at most 20s\)/);
      assert.equal(said[1]!.queriesRefused, 10);

      const text = await metrics.exposition();
      assert.match(text, /^oversell_shed_total\{what="queries"\} 10$/m);
      assert.match(text, /^oversell_agent_send_every_seconds 5$/m);
      assert.match(text, /^oversell_overloaded\{thread="main"\} 0$/m);
      // Overloaded after the second late period (two in a row), through the 23 late periods left and the calm one that ended it; by the shedder's clock, not its timer's period.
      assert.match(text, /^oversell_overloaded_seconds_total\{thread="main"\} 24$/m);
      assert.match(text, /^oversell_overloaded_seconds_total\{thread="ingest"\} 0$/m);
    } finally {
      shedder.stop();
    }
  });

  it('the ingest thread\'s delay slows agents and refuses no query', () => {
    const ingestMs = 90;
    const told: number[] = [];
    let clock = 0;
    const shedder = new LoadShedder({
      limits: shedLimits(5000, 20_000, 50),
      base: { maxBatchSamples: 10, sendEveryMs: 5000 },
      announce: (s) => told.push(s.sendEveryMs),
      ingestDelayMs: () => ingestMs,
      metrics: { shedding: () => {}, overloadedFor: () => {}, shed: () => assert.fail('no query is refused') },
      log: pino({ level: 'silent' }),
      periodMs: 3_600_000,
      now: () => clock,
      monitor: () => ({ read: () => 1, busy: () => 1, stop: () => {} }),
    });
    shedder.start();
    try {
      for (let i = 0; i < 3; i++) {
        clock += 1000;
        shedder.step();
      }
      assert.deepEqual(told, [10_000]);
      assert.equal(shedder.refuseQuery(), undefined);
    } finally {
      shedder.stop();
    }
  });
});
