// The trace `oversell record` wrote from the local control plane (kwok nodes,
// real scheduler, real gateway, agents reporting the modelled usage of the
// pods bound to them), replayed under every policy. Recorded by
// test/e2e/simulate-vs-real.e2e.test.ts; to record it again:
//   OVERSELL_RECORD_FIXTURE=1 OVERSELL_E2E_ONLY=simulate-vs-real npm run test:e2e
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { describe, it } from 'node:test';
import yaml from 'js-yaml';
import { parseScenario } from '../../sim/scenario.js';
import { simulate } from '../../sim/simulate.js';
import { parseTrace } from '../../sim/trace.js';

const GiB = 1024 ** 3;
const trace = parseTrace(readFileSync(new URL('../fixtures/trace/local-control-plane.jsonl', import.meta.url), 'utf8'));
const scenario = parseScenario(yaml.load(readFileSync(new URL('../e2e/simulate-vs-real/scenario.yaml', import.meta.url), 'utf8')));

describe('a trace recorded from the local control plane', () => {
  it('holds what the cluster had: three fake nodes, their raw allocatable, bound requests past it', () => {
    assert.equal(trace.intervalSeconds, 1);
    assert.equal(trace.polls.length, 5);
    for (const poll of trace.polls) {
      assert.deepEqual(poll.nodes.map((n) => n.name), ['e2e-sim-0', 'e2e-sim-1', 'e2e-sim-2']);
      for (const n of poll.nodes) {
        assert.deepEqual(n.capacity, { cpu: 8000, memory: 16 * GiB });
        assert.deepEqual(n.raw, { cpu: 4000, memory: 8 * GiB });
        // Whole pods of 1 GiB each, oversold: more bound than raw, usage under the policy's 80 % target of raw.
        assert.equal(n.requests.memory % GiB, 0);
        assert.ok(n.requests.memory > n.raw.memory, `${n.name}: ${n.requests.memory / GiB} GiB bound`);
        assert.ok(n.usage.memory < 0.8 * n.raw.memory + GiB, `${n.name}: ${n.usage.memory / GiB} GiB used`);
      }
    }
  });

  it('replays under every policy: the recorded pods stay, so only oversold room takes more', () => {
    const r = simulate({ ...scenario, hours: 0.05 }, undefined, trace);
    assert.deepEqual(r.trace && 'polls' in r.trace ? r.trace.nodes : undefined, ['e2e-sim-0', 'e2e-sim-1', 'e2e-sim-2']);
    const placed = (name: string) => r.policies.find((p) => p.name === name)!.podsPlaced;
    // Bound requests are past raw on every node: nothing more fits without oversell.
    assert.equal(placed('none'), 0);
    // The static 1.5x ratio ignores usage and fills to its cap; the recorded usage keeps oversell's policy near where the cluster settled.
    assert.ok(placed('static') > placed('sim-check'), `static ${placed('static')} vs sim-check ${placed('sim-check')}`);
    assert.equal(r.policies.find((p) => p.name === 'sim-check')!.belowRequestsNodeSeconds, 0);
  });
});
