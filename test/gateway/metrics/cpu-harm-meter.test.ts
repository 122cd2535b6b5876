// CPU harm measured (gateway/metrics/cpu-harm-meter.ts): node-seconds over
// capacity and PSI full from each stored sample, throttled time per pod from
// each new pod report, by pool and tier; nothing from a node this replica does
// not act for, nothing believed past time x CPUs.
import assert from 'node:assert/strict';
import { afterEach, beforeEach, describe, it } from 'node:test';
import { DEFAULT_POLICY } from '../../../gateway/decide/policy.js';
import { PoolHarmLedger } from '../../../gateway/decide/pool-harm.js';
import { watchSamples } from '../../../gateway/act/sample-watch.js';
import { CpuHarmMeter } from '../../../gateway/metrics/cpu-harm-meter.js';
import { flagsPolicySource } from '../../../gateway/policies/policy-source.js';
import { NodeStore } from '../../../gateway/store/node-store.js';
import { PodFactsStore, type PodFacts } from '../../../gateway/store/pod-facts.js';
import type { Sample__Output } from '../../../proto/gen/oversell/v1/Sample.js';
import { nodeSample } from '../../helpers/node-reviews.js';
import { storeSample } from '../../helpers/store-sample.js';

const GiB = 1024 ** 3;
const psi = (avg10: number) => ({ avg10, avg60: avg10 });

const podFacts = (name: string, over: Partial<PodFacts> = {}): PodFacts => ({
  uid: `uid-${name}`, node: 'node-a', namespace: 'apps', name, priority: 0, qos: 'Burstable', exclusiveCpus: 0, cpuRequestMillicores: 100, memoryRequestBytes: GiB, startedAtMs: 0, finished: false, evicted: false, oomKills: [], oomKillsWithoutLimit: [], ...over,
});

describe('CpuHarmMeter', () => {
  let store: NodeStore;
  let pods: PodFactsStore;
  let harm: { pool: string; seconds: number; overCapacitySeconds: number; cpuFullSeconds: number; memoryFullSeconds: number }[];
  let throttled: string[];
  let acts: boolean;
  let ledger: PoolHarmLedger;
  let clock: number;
  let seq: number;
  let meter: CpuHarmMeter;
  let unwatch: () => void;

  beforeEach(() => {
    store = new NodeStore({ retainMs: 60_000, forgetAfterMs: 600_000 });
    pods = new PodFactsStore();
    pods.set(podFacts('db', { qos: 'Guaranteed' }));
    pods.set(podFacts('web'));
    harm = [];
    throttled = [];
    acts = true;
    ledger = new PoolHarmLedger();
    clock = Date.now();
    seq = 0;
    meter = new CpuHarmMeter({
      pods, namespaceLabels: async () => ({}), actsFor: () => acts, ledger, now: () => clock,
      metrics: { cpuHarm: (pool, o) => harm.push({ pool, ...o }), cpuThrottled: (pool, tier, s) => throttled.push(`${pool}/${tier}/${s}`) },
    });
    unwatch = watchSamples({ store, policies: flagsPolicySource(DEFAULT_POLICY), optedIn: (n) => n === 'node-a', consumers: [meter] });
    store.attach('node-a', 'i-1', null, 1);
  });
  afterEach(() => unwatch());

  /** A sample `gapMs` after the previous one, with CPU contention and PSI full, and a pod report when throttle is given (uid -> cumulative µs). */
  async function sample(gapMs: number, o: { contention?: number; cpuFull?: number; memoryFull?: number; throttle?: Record<string, number> } = {}): Promise<void> {
    clock += gapMs;
    const over: Partial<Sample__Output> = {
      seq: ++seq,
      capacity: { cpuMillicores: 4000, memoryBytes: 16 * GiB },
      pressure: { available: true, cpuSome: psi(0), cpuFull: psi(o.cpuFull ?? 0), memorySome: psi(0), memoryFull: psi(o.memoryFull ?? 0), cpuContention: psi(o.contention ?? 0) },
      ...(o.throttle && {
        podsIncluded: true,
        pods: Object.entries(o.throttle).map(([name, micros]) => ({ uid: `uid-${name}`, qosClass: 'burstable', cpuUsageMillicores: 10, memoryWorkingSetBytes: GiB, containers: [], cpuThrottledMicros: micros })),
      }),
    };
    storeSample(store, 'node-a', 1, nodeSample(clock, over), clock);
    // The meter's tier lookup is asynchronous: let it finish.
    await new Promise((r) => setImmediate(r));
  }

  it('counts node-seconds over capacity from the contention line, and PSI full as stalled seconds', async () => {
    await sample(1000);
    await sample(2000, { contention: 5, cpuFull: 50 });
    await sample(1000, { contention: 40, memoryFull: 100 });
    assert.deepEqual(harm, [
      { pool: 'flags', seconds: 2, overCapacitySeconds: 0, cpuFullSeconds: 1, memoryFullSeconds: 0 },
      { pool: 'flags', seconds: 1, overCapacitySeconds: 1, cpuFullSeconds: 0, memoryFullSeconds: 1 },
    ]);
  });

  it('a gap past 30 s is not counted: nothing is known of it', async () => {
    await sample(1000);
    await sample(45_000, { contention: 90 });
    await sample(1000, { contention: 90 });
    assert.deepEqual(harm.map((h) => h.seconds), [1]);
  });

  it('throttled time by tier, from the rise between two pod reports; a pod first seen counts from its first report', async () => {
    await sample(1000, { throttle: { db: 1_000_000, web: 0 } });
    await sample(10_000, { throttle: { db: 1_500_000, web: 2_000_000, late: 9_000_000 } });
    assert.deepEqual(throttled.sort(), ['flags/protected/0.5', 'flags/unprotected/2']);
  });

  it('a rise past the gap x the node\'s CPUs is not believed (an agent can write any number)', async () => {
    await sample(1000, { throttle: { web: 0 } });
    await sample(10_000, { throttle: { web: 40_000_001 } }); // 10 s x 4 CPUs = 40 s at most
    await sample(10_000, { throttle: { web: 40_000_002 } });
    assert.deepEqual(throttled, ['flags/unprotected/0.000001']);
  });

  it('a node this replica does not act for: no metric, but its CPU over capacity is weighed in this replica\'s ledger (every replica decides)', async () => {
    acts = false;
    await sample(1000, { throttle: { web: 0 } });
    await sample(2000, { contention: 90, throttle: { web: 500_000 } });
    await sample(1000, { contention: 0 });
    assert.deepEqual(harm, []);
    assert.deepEqual(throttled, []);
    const h = ledger.of('flags', clock);
    assert.equal(h.cpuObservedSeconds, 3);
    assert.equal(h.cpuOverSeconds, 2);
  });

  it('a node not opted in is not weighed; a node the store forgets is forgotten by the meter', async () => {
    store.attach('node-b', 'i-2', null, 2);
    clock += 1000;
    storeSample(store, 'node-b', 2, nodeSample(clock, { seq: 1, capacity: { cpuMillicores: 4000, memoryBytes: 16 * GiB } }), clock);
    clock += 1000;
    storeSample(store, 'node-b', 2, nodeSample(clock, { seq: 2, capacity: { cpuMillicores: 4000, memoryBytes: 16 * GiB }, pressure: { available: true, cpuSome: psi(0), cpuFull: psi(0), memorySome: psi(0), memoryFull: psi(0), cpuContention: psi(90) } }), clock);
    assert.deepEqual(harm, [], 'node-b is not opted in');
    await sample(1000);
    assert.equal(meter.nodes, 1, 'node-a remembered');
    store.detach('node-a', 1);
    store.prune(clock + 600_001);
    assert.equal(meter.nodes, 0, 'pruned from the store, forgotten by the meter');
  });
});
