// The pools' entries carry their harm (gateway/policies/with-pool-harm.ts), so
// every reader's decision (decideForNode) weighs the same budget.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { decideForNode } from '../../../gateway/decide/node-decision.js';
import { DEFAULT_POLICY } from '../../../gateway/decide/policy.js';
import { UsageWindow } from '../../../lib/usage/usage-window.js';
import { flagsPolicySource } from '../../../gateway/policies/policy-source.js';
import { withPoolHarm } from '../../../gateway/policies/with-pool-harm.js';
import { nodeStatus } from '../../../gateway/query/node-status.js';
import { NodeStore } from '../../../gateway/store/node-store.js';
import { nodeSample } from '../../helpers/node-reviews.js';
import { storeSample } from '../../helpers/store-sample.js';
import { POOL_HARM_WINDOW_MS, PoolHarmLedger } from '../../../gateway/decide/pool-harm.js';
import { LoadHistory } from '../../../gateway/decide/load-history.js';
import type { PoolLoad } from '../../../gateway/decide/pool-load.js';

const GI = 1024 ** 3;
const raw = { cpuMillicores: 4000n, memoryBytes: 16n * BigInt(GI) };
const points = Array.from({ length: 60 }, (_, i) => ({ timestampMs: i * 1000, cpuMillicores: 400, memoryBytes: 2 * GI, cpuPressure: 0, memoryPressure: 0 }));
const usage = { ageMs: 1000, window: UsageWindow.of(points), capacityMemoryBytes: 16 * GI, requests: { cpuMillicores: 3000, memoryBytes: 12 * GI, known: true } };

describe('withPoolHarm', () => {
  it('the entry of a pool with harm carries it, and the node\'s decision holds memory at the floor; without harm the entry is the source\'s own', () => {
    let now = 10_000_000;
    const ledger = new PoolHarmLedger();
    const policies = withPoolHarm(flagsPolicySource(DEFAULT_POLICY), ledger, () => now);
    const clean = policies.select({});
    assert.equal(clean?.name, 'flags');
    assert.equal((clean as { harm?: unknown }).harm, undefined);
    const before = decideForNode({ raw, usage, entry: clean });
    assert.ok(before.memory.granted > raw.memoryBytes);

    ledger.record('flags', 1, now);
    const entry = policies.select({});
    assert.deepEqual((entry as { harm?: unknown }).harm, { memoryOverloads: 1, untilMs: now + POOL_HARM_WINDOW_MS, cpuObservedSeconds: 0, cpuOverSeconds: 0 });
    const after = decideForNode({ raw, usage, entry });
    assert.equal(after.memory.granted, raw.memoryBytes);
    assert.match(after.reason, /risk budget is spent/);

    now += POOL_HARM_WINDOW_MS;
    assert.ok(decideForNode({ raw, usage, entry: policies.select({}) }).memory.granted > raw.memoryBytes, 'an hour on: inflated again');
  });

  it('CPU over capacity past 10x the budget\'s overShare of the hour stops the pool\'s CPU at the floor, memory untouched; below it, or on too little time observed, nothing', () => {
    let now = 10_000_000;
    const ledger = new PoolHarmLedger();
    const policies = withPoolHarm(flagsPolicySource(DEFAULT_POLICY), ledger, () => now);
    const before = decideForNode({ raw, usage, entry: policies.select({}) });
    assert.ok(before.cpu.granted > raw.cpuMillicores);
    // 1 % of 500 node-seconds: past 10 x 0.1 %, but under the 600 s observed a verdict needs.
    ledger.recordCpu('flags', now, 500, 5.1);
    assert.ok(decideForNode({ raw, usage, entry: policies.select({}) }).cpu.granted > raw.cpuMillicores, 'too little observed');
    // 3600 node-seconds with 30 over: 0.83 %, under 10 x 0.1 %.
    ledger.recordCpu('flags', now, 3100, 24.9);
    assert.ok(decideForNode({ raw, usage, entry: policies.select({}) }).cpu.granted > raw.cpuMillicores, 'under the burn rate');
    ledger.recordCpu('flags', now, 0.001, 0.001);
    ledger.recordCpu('flags', now, 400, 20);
    const spent = decideForNode({ raw, usage, entry: policies.select({}) });
    assert.equal(spent.cpu.granted, raw.cpuMillicores, 'the floor: raw, more than is bound');
    assert.equal(spent.memory.granted, before.memory.granted, 'memory is not touched');
    assert.match(spent.reason, /the pool's CPU risk budget is spent: its nodes had CPU demand over capacity 1\.25% of their time in the last hour, more than 10x its 0\.1%/);
    const noBudget = withPoolHarm(flagsPolicySource({ ...DEFAULT_POLICY, cpu: { ...DEFAULT_POLICY.cpu, riskBudget: { ...DEFAULT_POLICY.cpu.riskBudget, enabled: false } } }), ledger, () => now);
    assert.ok(decideForNode({ raw, usage, entry: noBudget.select({}) }).cpu.granted > raw.cpuMillicores, 'no CPU budget, none to spend');
    now += POOL_HARM_WINDOW_MS + 60_000;
    assert.ok(decideForNode({ raw, usage, entry: policies.select({}) }).cpu.granted > raw.cpuMillicores, 'an hour on: inflated again');
  });

  it('the query API shows the pool\'s budget beside the decision (oversell describe): spent or not, and nothing for a policy without one', () => {
    const now = 10_000_000;
    const ledger = new PoolHarmLedger();
    const store = new NodeStore({ retainMs: 60_000, forgetAfterMs: 600_000 });
    store.attach('node-a', 'i-1', null, 1);
    storeSample(store, 'node-a', 1, nodeSample(now, { seq: 1 }), now);
    store.observe('node-a', { raw: { cpuMillicores: 4000n, memoryBytes: 16n * BigInt(GI) }, labels: {}, nodeMaxRatio: {}, lastGrant: undefined }, now);
    const record = store.get('node-a')!;
    const policies = withPoolHarm(flagsPolicySource(DEFAULT_POLICY), ledger, () => now);
    assert.equal(nodeStatus(record, policies, now).decision?.budget?.cpuObservedSeconds, 0, 'nothing observed yet: the budget is shown, unspent');
    ledger.recordCpu('flags', now, 3000, 3);
    const calm = nodeStatus(record, policies, now).decision?.budget;
    assert.deepEqual(calm, { memoryEnabled: true, memoryOverloads: 0, memorySpentUntilMs: 0, cpuEnabled: true, cpuObservedSeconds: 3000, cpuOverSeconds: 3, cpuSpentPastShare: 10 * DEFAULT_POLICY.cpu.riskBudget.overShare, cpuSpent: false });
    ledger.recordCpu('flags', now, 600, 60);
    ledger.record('flags', 2, now);
    const spent = nodeStatus(record, policies, now).decision?.budget;
    assert.equal(spent?.cpuSpent, true);
    assert.equal(spent?.memoryOverloads, 2);
    assert.equal(spent?.memorySpentUntilMs, now + POOL_HARM_WINDOW_MS);
    const none = { ...DEFAULT_POLICY, cpu: { ...DEFAULT_POLICY.cpu, riskBudget: { ...DEFAULT_POLICY.cpu.riskBudget, enabled: false } }, memory: { ...DEFAULT_POLICY.memory, riskBudget: { ...DEFAULT_POLICY.memory.riskBudget, enabled: false } } };
    assert.equal(nodeStatus(record, withPoolHarm(flagsPolicySource(none), ledger, () => now), now).decision?.budget, undefined);
  });

  it("the entry carries the pool's typical peak when the keeper knows it, and the node's decision counts the pods a rise lets in at it", () => {
    const now = 10_000_000;
    const ledger = new PoolHarmLedger();
    let load: PoolLoad | undefined;
    const policies = withPoolHarm(flagsPolicySource(DEFAULT_POLICY), ledger, () => now, () => load);
    assert.equal((policies.select({}) as { poolLoad?: unknown }).poolLoad, undefined);
    load = { cpu: 0.9, memory: 0.9, nodes: 4 };
    const entry = policies.select({});
    assert.deepEqual((entry as { poolLoad?: unknown }).poolLoad, load);
    assert.equal((entry as { harm?: unknown }).harm, undefined, 'no harm attached with none known');
    // A node whose day-long history is quiet (0.2 of requests): the pool's 0.9 sizes the pods it lets in.
    const history = new LoadHistory(24 * 3_600_000);
    for (let i = 0; i <= 25 * 360; i++) history.record(i * 10_000, 0.2, 0.2);
    const quiet = { ...usage, history };
    const alone = decideForNode({ raw, usage: quiet, entry: flagsPolicySource(DEFAULT_POLICY).select({}) });
    const pooled = decideForNode({ raw, usage: quiet, entry });
    assert.equal(alone.cpu.decidedBy, 'cap');
    assert.equal(pooled.cpu.decidedBy, 'budget');
    assert.equal(pooled.cpu.newLoadFactor, 0.9);
    assert.ok(pooled.cpu.granted < alone.cpu.granted);
  });
});
