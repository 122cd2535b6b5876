import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { parseTrace, replay, traceHeader, tracePoll, traceSeconds, type TraceNode } from '../../sim/trace.js';
import { parseScenario } from '../../sim/scenario.js';
import { simulate } from '../../sim/simulate.js';

const GiB = 1024 ** 3;
const node = (name: string, cpu: number, requests = 0): TraceNode => ({
  name, capacity: { cpu: 16_000, memory: 64 * GiB }, raw: { cpu: 15_500, memory: 62 * GiB }, usage: { cpu, memory: 8 * GiB }, requests: { cpu: requests, memory: 16 * GiB },
});
const text = (polls: { t: number; nodes: TraceNode[] }[], interval = 10) => traceHeader(interval) + polls.map(tracePoll).join('');

describe('traces', () => {
  it('reads back what record writes', () => {
    const polls = [{ t: 0, nodes: [node('a', 1000), node('b', 2000)] }, { t: 10, nodes: [node('a', 1500)] }];
    const trace = parseTrace(text(polls));
    assert.deepEqual(trace, { intervalSeconds: 10, polls });
    assert.equal(traceSeconds(trace), 20);
  });

  for (const [body, message] of [
    ['{"kind":"Other"}\n', /^line 1: not an OversellTrace header/],
    [traceHeader(10) + 'nope\n', /^line 2: not JSON$/],
    [traceHeader(10) + '{"t":0,"nodes":[{"name":"a","capacity":{"cpu":1},"raw":{"cpu":1,"memory":1},"usage":{"cpu":1,"memory":1},"requests":{"cpu":0,"memory":0}}]}\n', /^line 2: nodes\[0\]\.capacity must be/],
    [traceHeader(10), /no poll with nodes/],
    [text([{ t: 5, nodes: [node('a', 1)] }, { t: 1, nodes: [node('a', 1)] }]), /^line 3: t goes back in time$/],
  ] as const) {
    it(`refuses a broken trace, naming the line: ${message}`, () => assert.throws(() => parseTrace(body), (err: Error) => message.test(err.message)));
  }

  it('replays each node\'s last poll at every step, keeps a node missing from a poll, and starts over after the end', () => {
    const trace = parseTrace(text([{ t: 0, nodes: [node('a', 1000), node('b', 2000)] }, { t: 10, nodes: [node('a', 1500, 4000)] }]));
    const r = replay(trace, 6, 5);
    assert.deepEqual(r.names, ['a', 'b']);
    assert.deepEqual(r.shapes[0]!.systemUsage, { cpu: 0, memory: 0 }, 'recorded usage includes the system');
    // Steps at 0, 5, 10, 15 s, then the 20 s trace starts over at 20 and 25 s.
    assert.deepEqual([...r.baseline.cpu], [1000, 2000, 1000, 2000, 1500, 2000, 1500, 2000, 1000, 2000, 1000, 2000]);
    assert.deepEqual([...r.baseline.requestCpu].filter((_, j) => j % 2 === 0), [0, 0, 4000, 4000, 0, 0]);
    assert.deepEqual([...r.baseline.peakCpu], [1500, 2000]);
  });

  it('a replay places the scenario\'s pods on top of the recorded load: a busy recording leaves room for fewer', () => {
    const s = parseScenario({ hours: 0.5, usage: { diurnal: { peakHour: 0 } } });
    const idle = parseTrace(text([{ t: 0, nodes: [node('a', 300), node('b', 300)] }]));
    const busy = parseTrace(text([{ t: 0, nodes: [node('a', 9000, 9000), node('b', 9000, 9000)] }]));
    const onIdle = simulate(s, undefined, idle);
    const onBusy = simulate(s, undefined, busy);
    assert.equal(onIdle.scenario.nodes, 2);
    assert.deepEqual(onIdle.trace, { nodes: ['a', 'b'], polls: 1, seconds: 10 });
    const placed = (r: typeof onIdle, name: string) => r.policies.find((p) => p.name === name)!.podsPlaced;
    assert.ok(placed(onBusy, 'none') < placed(onIdle, 'none'), `${placed(onBusy, 'none')} < ${placed(onIdle, 'none')}`);
    assert.ok(placed(onBusy, 'oversell') >= placed(onBusy, 'none'));
  });
});
