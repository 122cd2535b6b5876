// The page of a caps sweep (docs/caps.md): the over-provisioned targets met or
// missed under the default caps, what one step of each cap costs and saves on
// either scenario, and every pair. Pure: files are returned as text.
import { FORMER_CAPS, OVER_PROVISIONED_TARGETS, OVER_PROVISIONED_USAGE, type CapsFigures, type CapsPoint, type CapsScenario, type CapsSweep } from './caps.js';

const pct = (x: number | null) => (x === null ? '-' : `${(Math.round(x * 1000) / 10).toFixed(1)} %`);
const cpuShare = (x: number) => `${(x * 100).toFixed(3)} %`;
const signed = (x: number, digits = 1) => `${x >= 0 ? '+' : ''}${x.toFixed(digits)}`;

function pointOf(s: CapsScenario, cpu: number, memory: number): CapsPoint | undefined {
  return s.points.find((p) => p.cpu === cpu && p.memory === memory);
}

function harm(f: CapsFigures): string {
  return `${f.podsHitByMemoryOverload} pods hit by memory overload (${f.protectedPodsHit} protected), ${f.podsRelieved} relieved, CPU over capacity ${cpuShare(f.cpuOverCapacityShare)} of node-time`;
}

/** Issue 45's targets under the default caps: the over-provisioned day, and the default day's share of the gain. */
export function capsChecks(s: CapsSweep): { target: string; met: boolean; detail: string }[] {
  const out: { target: string; met: boolean; detail: string }[] = [];
  const over = s.scenarios.find((x) => x.name === 'over-provisioned');
  const d = over && pointOf(over, s.defaults.cpu, s.defaults.memory);
  if (d) {
    const f = d.day;
    out.push({
      target: `over-provisioned (pods use about ${pct(OVER_PROVISIONED_USAGE)} of their requests), default policy: at least ${pct(OVER_PROVISIONED_TARGETS.gain)} of the physical limit's gain, 0 protected pods hit, 0 pods OOM-killed or evicted by the kubelet, CPU demand over capacity at most ${cpuShare(OVER_PROVISIONED_TARGETS.cpuOverShare)} of node-time`,
      met: f.gainCaptured !== null && f.gainCaptured >= OVER_PROVISIONED_TARGETS.gain && f.protectedPodsHit === 0 && f.podsHitByMemoryOverload === 0 && f.cpuOverCapacityShare <= OVER_PROVISIONED_TARGETS.cpuOverShare,
      detail: `${pct(f.gainCaptured)} of the limit's gain; ${harm(f)}`,
    });
  }
  return out;
}

/** What the default caps change against another pair, on each scenario: the day's gain and CPU over capacity, the busier day's harm. */
function against(s: CapsSweep, label: string, cpu: number, memory: number): string {
  const parts = s.scenarios.map((sc) => {
    const from = pointOf(sc, s.defaults.cpu, s.defaults.memory);
    const other = pointOf(sc, cpu, memory);
    if (!from || !other) return `${sc.name}: not swept`;
    const gain = ((other.day.gainCaptured ?? 0) - (from.day.gainCaptured ?? 0)) * 100;
    const hit = other.busier.podsHitByMemoryOverload - from.busier.podsHitByMemoryOverload;
    const prot = other.busier.protectedPodsHit - from.busier.protectedPodsHit;
    const cpuBusier = (other.busier.cpuOverCapacityShare - from.busier.cpuOverCapacityShare) * 100;
    const cpuDay = (other.day.cpuOverCapacityShare - from.day.cpuOverCapacityShare) * 100;
    return `${sc.name}: ${signed(gain)} points of the limit's gain and ${signed(cpuDay, 3)} points of CPU over capacity on the day; busier, ${signed(hit, 0)} pods hit by memory overload (${signed(prot, 0)} protected) and ${signed(cpuBusier, 2)} points of CPU over capacity`;
  });
  return `- **${label}** instead of ${s.defaults.cpu}x / ${s.defaults.memory}x: ${parts.join('; ')}.`;
}

/** One step of a cap down and up from the default, the other cap at its default. */
function stepLines(s: CapsSweep, resource: 'cpu' | 'memory'): string[] {
  const grid: readonly number[] = s.grid[resource];
  const at = grid.indexOf(s.defaults[resource]);
  const steps = at < 0 ? [] : [grid[at - 1], grid[at + 1]].filter((v): v is number => v !== undefined);
  return steps.map((to) =>
    resource === 'cpu' ? against(s, `CPU cap ${to}x`, to, s.defaults.memory) : against(s, `Memory cap ${to}x`, s.defaults.cpu, to),
  );
}

function table(s: CapsSweep, sc: CapsScenario): string[] {
  const rows = [
    '| CPU cap | memory cap | pods (day) | of the limit\'s gain | CPU over capacity | pods hit (protected) | relieved | busier: of the limit\'s gain | busier: pods hit (protected) | busier: relieved | busier: CPU over capacity |',
    '|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|',
  ];
  for (const p of sc.points) {
    const mark = p.cpu === s.defaults.cpu && p.memory === s.defaults.memory ? '**' : '';
    rows.push(
      `| ${mark}${p.cpu}x${mark} | ${mark}${p.memory}x${mark} | ${p.day.podsPlaced.toFixed(1)} | ${pct(p.day.gainCaptured)} | ${cpuShare(p.day.cpuOverCapacityShare)} | ${p.day.podsHitByMemoryOverload} (${p.day.protectedPodsHit}) | ${p.day.podsRelieved} | ${pct(p.busier.gainCaptured)} | ${p.busier.podsHitByMemoryOverload} (${p.busier.protectedPodsHit}) | ${p.busier.podsRelieved} | ${cpuShare(p.busier.cpuOverCapacityShare)} |`,
    );
  }
  return rows;
}

export function capsMarkdown(s: CapsSweep, command: string): string {
  const first = s.scenarios[0]!.scenario;
  const usage = (sc: CapsScenario) => `pods use on average ${pct(1 - sc.scenario.usage.memorySlack)} of their memory requests and ${pct(1 - sc.scenario.usage.cpuSlack)} of their CPU requests`;
  const lines = [
    '# What the caps cost and save',
    '',
    `Generated by \`${command}\` (seed ${first.seed}; [the model](simulate.md)); do not edit.`,
    `The default policy, risk budget on, under every pair of hard caps (CPU ${s.grid.cpu.join(', ')}x; memory ${s.grid.memory.join(', ')}x), ` +
      `on ${first.nodes} nodes of ${first.node.capacity.cpu / 1000} cores over ${first.hours} hours after a warm-up day, demand ${s.demand}; ` +
      `each pair on a normal day and busier than its history (every pod's usage x${s.busierFactor} from hour ${first.hours / 2}, at once). The default caps are **${s.defaults.cpu}x CPU and ${s.defaults.memory}x memory** (bold below).`,
    '',
    ...s.scenarios.map((sc) => `- **${sc.name}**: ${usage(sc)}; without oversell ${sc.none.day.toFixed(1)} pods run, the physical limit ${sc.limit.day.toFixed(1)}.`),
    '',
    'The risk budget sizes each grant from the node\'s own history; a cap only stops a grant the budget would make. Where a cap binds on a normal day and the busier day costs nothing more, it leaves room unused; where raising it adds harm on the busier day, it is what stops that harm.',
    '',
    '## Against the targets of issue 45',
    '',
    '| target | | figures |',
    '|---|---|---|',
    ...capsChecks(s).map((c) => `| ${c.target} | ${c.met ? 'met' : '**missed**'} | ${c.detail} |`),
    '',
    '## What one step of each cap costs and saves',
    '',
    ...stepLines(s, 'cpu'),
    ...stepLines(s, 'memory'),
    against(s, `The caps before issue 45, ${FORMER_CAPS.cpu}x / ${FORMER_CAPS.memory}x,`, FORMER_CAPS.cpu, FORMER_CAPS.memory),
    '',
  ];
  for (const sc of s.scenarios) lines.push(`## Every pair: ${sc.name}`, '', ...table(s, sc), '');
  lines.push(
    '*Of the limit\'s gain* is (pods - none\'s) / (the limit\'s - none\'s), on the same run (the busier run has its own none and limit). *Pods hit* are pods OOM-killed by the kernel or evicted by the kubelet; *relieved* are pods oversell evicted through the Eviction API first; *CPU over capacity* is the share of node-time with CPU demand above the node\'s CPUs.',
    '',
  );
  return lines.join('\n');
}

export function capsJson(s: CapsSweep): string {
  return JSON.stringify(s, null, 2) + '\n';
}

export function capsFiles(s: CapsSweep, command: string): Record<string, string> {
  return { 'caps.md': capsMarkdown(s, command), 'caps.json': capsJson(s) };
}
