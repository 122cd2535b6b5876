import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import yaml from 'js-yaml';
import { applyOverrides, DEFAULT_SCENARIO, parseScenario, rawAllocatable } from '../../sim/scenario.js';
import { stepFactor } from '../../sim/workload.js';

const GiB = 1024 ** 3;

describe('scenario', () => {
  it('the commented example file is the defaults, field for field', () => {
    const text = readFileSync(fileURLToPath(new URL('../../examples/simulate.yaml', import.meta.url)), 'utf8');
    assert.deepEqual(parseScenario(yaml.load(text)), DEFAULT_SCENARIO);
  });

  it('a file gives only what it changes; quantities are Kubernetes quantities', () => {
    const s = parseScenario({ nodes: 3, node: { capacity: { cpu: '8', memory: '32Gi' } }, usage: { step: { atHour: 2, factor: 1.5 } } });
    assert.equal(s.nodes, 3);
    assert.deepEqual(s.node.capacity, { cpu: 8000, memory: 32 * GiB });
    assert.deepEqual(s.node.reserved, DEFAULT_SCENARIO.node.reserved);
    assert.deepEqual(s.usage.step, { atHour: 2, factor: 1.5, rampMinutes: 0 });
    assert.deepEqual(rawAllocatable(s), { cpu: 7500, memory: 30 * GiB - 100 * 1024 ** 2 });
  });

  it('flags override the file', () => {
    const s = applyOverrides(parseScenario({ nodes: 3, seed: 4 }), { hours: 2, usageScale: 1.2 });
    assert.deepEqual([s.nodes, s.seed, s.hours, s.usage.scale], [3, 4, 2, 1.2]);
  });

  for (const [file, message] of [
    [{ nodes: 'ten' }, /^nodes must be an integer in \[1, 100000\], got "ten"$/],
    [{ nodez: 10 }, /^nodez is not a scenario field/],
    [{ usage: { diurnal: { cpuSwing: 2 } } }, /^usage\.diurnal\.cpuSwing must be a number in \[0, 0\.99\]/],
    [{ usage: { startSeconds: -5 } }, /^usage\.startSeconds must be a number in \[0, 86400\]/],
    [{ node: { capacity: { memory: 'lots' } } }, /^node\.capacity\.memory must be a quantity like "4Gi"/],
    [{ classes: [{ name: 'a', requests: { cpu: '1', memory: '1Gi' }, replicasPerNode: { min: 2, max: 1 } }] }, /^classes\[0\]\.replicasPerNode needs numbers min and max/],
    [{ classes: [{ name: 'a', kind: 'cron', requests: { cpu: '1', memory: '1Gi' } }] }, /^classes\[0\]\.kind must be deployment or job/],
    [{ classes: [{ name: 'a', kind: 'job', requests: { cpu: '1' } }] }, /^classes\[0\]\.requests needs cpu and memory/],
    [{ policies: { oversell: [{ spec: {} }] } }, /^policies\.oversell\[0\]\.metadata\.name must be a non-empty string/],
    [{ node: { reserved: { cpu: '64' } } }, /must leave allocatable above zero/],
    [[1, 2], /^the scenario must be a mapping/],
  ] as const) {
    it(`an invalid file names the field: ${JSON.stringify(file)}`, () => {
      assert.throws(() => parseScenario(file), (err: Error) => err.name === 'ScenarioError' && message.test(err.message));
    });
  }
});

describe('stepFactor', () => {
  it('1 before the step, the factor at once without a ramp, linear over the ramp', () => {
    assert.equal(stepFactor(undefined, 5), 1);
    assert.equal(stepFactor({ atHour: 2, factor: 1.3, rampMinutes: 0 }, 1.99), 1);
    assert.equal(stepFactor({ atHour: 2, factor: 1.3, rampMinutes: 0 }, 2), 1.3);
    assert.ok(Math.abs(stepFactor({ atHour: 2, factor: 1.3, rampMinutes: 30 }, 2.25) - 1.15) < 1e-12);
    assert.equal(stepFactor({ atHour: 2, factor: 1.3, rampMinutes: 30 }, 3), 1.3);
  });
});
