// The agent stops through lib/lifecycle.ts: every part it built is closed,
// last built first, and one that fails to close does not keep the others open.
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { startAgent } from '../../agent/agent.js';
import { noPodSource, type PodSource } from '../../agent/requests/pod-source.js';
import { pino } from 'pino';

const fixtures = fileURLToPath(new URL('../fixtures', import.meta.url));

describe('agent stop', () => {
  it('closes the timer, the streams, the sampler and the pod source; a pod source that fails to close is logged, the rest still close', async () => {
    const said: string[] = [];
    const log = pino({ level: 'warn' }, { write: (line: string) => void said.push(line) });
    let podsStopped = 0;
    const pods: PodSource = { ...noPodSource(), stop: async () => {
      podsStopped += 1;
      throw new Error('watch already gone');
    } };
    const agent = startAgent({
      nodeName: 'stopping', gatewayAddresses: ['127.0.0.1:1'], procRoot: join(fixtures, 'proc', 'vm-2cpu'), cgroupRoot: join(fixtures, 'cgroup', 'v2-systemd'),
      intervalMs: 20, podReportEvery: 5, pods, log,
    });
    await new Promise((r) => setTimeout(r, 100));
    await agent.stop();
    assert.equal(podsStopped, 1, 'the pod source was closed, once');
    assert.deepEqual(agent.gateways.addresses, [], 'no stream left');
    const samples = async () => (await agent.metrics.registry.metrics()).match(/^oversell_agent_samples_total\{result="ok"\} (\d+)$/m)?.[1];
    const before = await samples();
    assert.ok(Number(before) > 0, 'it sampled before the stop');
    await new Promise((r) => setTimeout(r, 100));
    assert.equal(await samples(), before, 'no sample after stop: the timer is gone');
    assert.match(said.join(''), /pod source.*watch already gone|watch already gone.*pod source/);
    await agent.stop();
    assert.equal(podsStopped, 1, 'a second stop closes nothing again');
  });
});
