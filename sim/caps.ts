// What oversell's hard caps cost and save (docs/caps.md): its default policy
// under every pair of caps of a grid, on the scenario and on its
// over-provisioned variant (pods using about 15 % of their requests, as public
// VM traces show), each on a normal day and busier than its history. With the
// risk budget deciding, a cap that binds only where the budget would grant more
// is the safety net; a cap that binds where no risk is taken is room left
// unused. Pure: the CLI writes the files.
import { DEFAULT_POLICY } from '../gateway/decide/policy.js';
import type { Demand } from './cluster.js';
import { busierScenario } from './report.js';
import type { OversellPolicyInput, Scenario } from './scenario.js';
import { simulate, type PolicyResult } from './simulate.js';

/** The caps swept: CPU x memory, the default pair among them. */
export const CAP_GRID = { cpu: [2, 3, 4, 6], memory: [1.5, 2, 3, 4] } as const;

/** Pods in the over-provisioned variant use this share of their requests on average. */
export const OVER_PROVISIONED_USAGE = 0.15;

/** Issue 45's targets for the over-provisioned scenario under the default policy. */
export const OVER_PROVISIONED_TARGETS = { gain: 0.5, cpuOverShare: 0.001 } as const;

/** The default caps before the risk budget, tiers and relief made them a safety net: compared on the page. */
export const FORMER_CAPS = { cpu: 2, memory: 1.5 } as const;

export const BUSIER_FACTOR = 1.3;

/** The figures of one run that say what a pair of caps bought and what it cost. */
export interface CapsFigures {
  podsPlaced: number;
  gainCaptured: number | null;
  cpuOverCapacityShare: number;
  podsHitByMemoryOverload: number;
  protectedPodsHit: number;
  podsRelieved: number;
  riskNodeSeconds: number;
}

export interface CapsPoint {
  cpu: number;
  memory: number;
  day: CapsFigures;
  busier: CapsFigures;
}

export interface CapsScenario {
  name: 'default' | 'over-provisioned';
  scenario: Scenario;
  none: { day: number; busier: number };
  limit: { day: number; busier: number };
  points: CapsPoint[];
}

export interface CapsSweep {
  demand: Demand;
  grid: { cpu: readonly number[]; memory: readonly number[] };
  /** The default policy's caps when it was swept: the page says which row is the default. */
  defaults: { cpu: number; memory: number };
  busierFactor: number;
  scenarios: CapsScenario[];
}

/** The scenario with every pod using OVER_PROVISIONED_USAGE of its requests on average (slack 0.85). */
export function overProvisioned(s: Scenario): Scenario {
  const slack = 1 - OVER_PROVISIONED_USAGE;
  return { ...s, usage: { ...s.usage, cpuSlack: slack, memorySlack: slack } };
}

const capsName = (cpu: number, memory: number) => `caps ${cpu}x / ${memory}x`;

export function capsPolicies(): OversellPolicyInput[] {
  return CAP_GRID.cpu.flatMap((cpu) => CAP_GRID.memory.map((memory) => ({ name: capsName(cpu, memory), spec: { cpu: { maxRatio: cpu }, memory: { maxRatio: memory } } })));
}

function figures(p: PolicyResult): CapsFigures {
  return {
    podsPlaced: p.podsPlaced,
    gainCaptured: p.gainCaptured,
    cpuOverCapacityShare: p.cpuOverCapacityShare,
    podsHitByMemoryOverload: p.podsHitByMemoryOverload,
    protectedPodsHit: p.protectedPodsHit,
    podsRelieved: p.podsRelieved,
    riskNodeSeconds: p.riskNodeSeconds,
  };
}

export interface CapsProgress {
  scenario: string;
  run: 'day' | 'busier';
  done: number;
  total: number;
}

/** Runs the grid on the scenario and its over-provisioned variant, a day and a busier day each: four simulations, every pair of caps in each. */
export function runCaps(base: Scenario, demand: Demand, onProgress?: (p: CapsProgress) => void): CapsSweep {
  const policies = capsPolicies();
  const only = ['none', 'limit', ...policies.map((p) => p.name)];
  const variants = [
    { name: 'default' as const, scenario: { ...base, policies: { ...base.policies, oversell: policies } } },
    { name: 'over-provisioned' as const, scenario: overProvisioned({ ...base, policies: { ...base.policies, oversell: policies } }) },
  ];
  let done = 0;
  const scenarios = variants.map(({ name, scenario }): CapsScenario => {
    const day = simulate(scenario, undefined, undefined, { demand, only });
    onProgress?.({ scenario: name, run: 'day', done: ++done, total: 4 });
    const busier = simulate(busierScenario(scenario, BUSIER_FACTOR), undefined, undefined, { demand, only });
    onProgress?.({ scenario: name, run: 'busier', done: ++done, total: 4 });
    const of = (r: typeof day, n: string) => r.policies.find((p) => p.name === n)!;
    return {
      name,
      scenario: { ...scenario, policies: { ...scenario.policies, oversell: [] } },
      none: { day: of(day, 'none').podsPlaced, busier: of(busier, 'none').podsPlaced },
      limit: { day: of(day, 'limit').podsPlaced, busier: of(busier, 'limit').podsPlaced },
      points: CAP_GRID.cpu.flatMap((cpu) =>
        CAP_GRID.memory.map((memory) => ({ cpu, memory, day: figures(of(day, capsName(cpu, memory))), busier: figures(of(busier, capsName(cpu, memory))) })),
      ),
    };
  });
  return { demand, grid: CAP_GRID, defaults: { cpu: DEFAULT_POLICY.cpu.maxRatio, memory: DEFAULT_POLICY.memory.maxRatio }, busierFactor: BUSIER_FACTOR, scenarios };
}
