import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { DEFAULT_POLICY } from '../../../gateway/decide/policy.js';
import { planId, summaryFor, type AgentSummary, type SummaryPlan } from '../../../lib/usage/summary-plan.js';
import { planFromWire, planToWire, summariesFromWire, summaryToWire } from '../../../wire/usage-summary.js';

const plan: SummaryPlan = { windowMs: 300_000, calmPeriodMs: 120_000, cpu: { statistic: 'p95', pressureThreshold: 10 }, memory: { statistic: 'max', pressureThreshold: 10, workingSetThreshold: 0.95 } };
const figures = { samples: 300, spanMs: 300_000, cpuMillicores: 1200, memoryBytes: 2 ** 32, cpuPressure: false, memoryPressure: true };

describe('summary plans', () => {
  it('a plan\'s id is its fields\': the same for equal plans built apart, another for any field changed', () => {
    assert.equal(planId(plan), planId(structuredClone(plan)));
    const changed: SummaryPlan[] = [
      { ...plan, windowMs: 300_001 }, { ...plan, calmPeriodMs: 1 }, { ...plan, cpu: { ...plan.cpu, statistic: 'max' } },
      { ...plan, cpu: { ...plan.cpu, pressureThreshold: 11 } }, { ...plan, memory: { ...plan.memory, statistic: 'p99' } },
      { ...plan, memory: { ...plan.memory, pressureThreshold: 11 } }, { ...plan, memory: { ...plan.memory, workingSetThreshold: 0.9 } },
    ];
    const ids = new Set([planId(plan), ...changed.map(planId)]);
    assert.equal(ids.size, changed.length + 1);
    assert.notEqual(planId(DEFAULT_POLICY), 0, 'a policy is a plan');
  });

  it('crosses the wire and back; a plan whose id is not its fields\', or with a statistic or window no policy has, is not kept', () => {
    const wire = planToWire(plan);
    assert.deepEqual(planFromWire(wire), { id: planId(plan), plan });
    assert.equal(planFromWire({ ...wire, id: wire.id + 1 }), undefined, 'an id that is not its fields\'');
    assert.equal(planFromWire({ ...wire, cpuStatistic: 'p42' }), undefined);
    assert.equal(planFromWire({ ...wire, windowMs: 0 }), undefined);
    assert.equal(planFromWire({ ...wire, memoryWorkingSetThreshold: Number.NaN }), undefined);
  });

  it('a decision reads the summary of its own plan that ends at the newest point it holds, and no other', () => {
    const other = { ...plan, windowMs: 60_000 };
    const [mine] = summariesFromWire([summaryToWire(planId(plan), { newestMs: 0, ...figures })], 5000);
    const theirs: AgentSummary = { planId: planId(other), summary: { ...figures, newestMs: 5000, cpuMillicores: 1 } };
    assert.deepEqual(summaryFor([theirs, mine!], plan, 5000), { ...figures, newestMs: 5000 });
    assert.equal(summaryFor([theirs, mine!], plan, 6000), undefined, 'a newer sample came without summaries: the window decides');
    assert.equal(summaryFor([theirs], plan, 5000), undefined, 'no summary of this plan');
    assert.equal(summaryFor([mine!], plan, undefined), undefined, 'no point at all');
  });
});
