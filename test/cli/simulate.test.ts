// `oversell simulate` as a user runs it: the process, its flags, its output and its errors.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';

const main = fileURLToPath(new URL('../../cli/main.ts', import.meta.url));
const work = mkdtempSync(join(tmpdir(), 'oversell-simulate-'));
after(() => rmSync(work, { recursive: true, force: true }));

function run(...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, ['--import', 'tsx', main, 'simulate', ...args], { encoding: 'utf8', timeout: 60_000 }, (err, stdout, stderr) =>
      resolve({ code: err ? Number((err as { code?: number }).code ?? 1) : 0, stdout, stderr }),
    );
  });
}

const SMALL = ['--nodes', '4', '--hours', '1', '--no-busier'];
const fixtures = fileURLToPath(new URL('../fixtures/traces/', import.meta.url));
const BITBRAINS = ['--trace', join(fixtures, 'bitbrains'), '--trace-format', 'bitbrains'];
const ALIBABA = ['--trace', join(fixtures, 'alibaba-2018'), '--trace-format', 'alibaba-2018', '--machine-memory', '96Gi'];

interface TraceOut {
  trace: { format: string; requestsKnown: boolean; notes: string[]; pods: number; machines?: string[] };
  checks: unknown[];
  policies: { name: string; podsPlaced: number; densityVsNone: number | null; gainCaptured: number | null; cpuOverCapacityNodeSeconds: number; memoryOverloadNodeSeconds: number }[];
}

describe('oversell simulate', () => {
  it('--output json prints one object with a row per policy and the fields tools rely on', async () => {
    const r = await run(...SMALL, '--seed', '7', '--output', 'json');
    assert.equal(r.code, 0, r.stderr);
    const out = JSON.parse(r.stdout) as { scenario: { nodes: number; seed: number }; policies: Record<string, unknown>[] };
    assert.deepEqual([out.scenario.nodes, out.scenario.seed], [4, 7]);
    assert.deepEqual(out.policies.map((p) => p.name), ['none', 'static', 'seaiii', 'katalyst', 'koordinator', 'crane', 'peak-predictor', 'limit', 'oversell']);
    for (const p of out.policies) {
      for (const k of ['podsPlaced', 'densityVsNone', 'podsHitByMemoryOverload', 'cpuOverCapacityShare', 'cpuOverCapacityNodeSeconds', 'belowRequestsNodeSeconds', 'allocatableChangesPerNodeHour']) {
        assert.equal(typeof p[k], 'number', `${p.name}.${k}`);
      }
      assert.ok('gainCaptured' in p && (p.gainCaptured === null || typeof p.gainCaptured === 'number'), `${p.name}.gainCaptured`);
      assert.equal('nodesNeeded' in p, false, 'no search asked for');
    }
    assert.equal(typeof (out as unknown as { limit: { podsPlaced: number } }).limit.podsPlaced, 'number');
    assert.equal(r.stderr, '', 'a small run prints no progress');
  });

  it('reads a scenario file and OversellPolicy files; flags win over the file; --progress reports on stderr', async () => {
    const scenario = join(work, 'scenario.yaml');
    writeFileSync(scenario, 'nodes: 9\nhours: 0.5\nusage: { scale: 1.1 }\n');
    const policy = join(work, 'policy.yaml');
    writeFileSync(policy, 'apiVersion: oversell.io/v1alpha1\nkind: OversellPolicy\nmetadata: { name: tight }\nspec: { cpu: { targetUtilization: 0.4 } }\n---\nkind: OversellPolicy\nmetadata: { name: loose }\n');
    const r = await run('--scenario', scenario, '--policy', policy, '--nodes', '3', '--no-busier', '--progress', '--output', 'json');
    assert.equal(r.code, 0, r.stderr);
    const out = JSON.parse(r.stdout) as { scenario: { nodes: number; hours: number; usage: { scale: number } }; policies: { name: string }[] };
    assert.deepEqual([out.scenario.nodes, out.scenario.hours, out.scenario.usage.scale], [3, 0.5, 1.1]);
    assert.deepEqual(out.policies.map((p) => p.name).slice(8), ['tight', 'loose']);
    assert.match(r.stderr, /^simulating: 0 % \(none\)$/m);
    assert.match(r.stderr, /simulating: \d+ % \(loose\)$/m);
  });

  it('--demand saturating and --nodes-needed: every policy capacity-bound, its nodes needed, and the page leads with nodes saved', async () => {
    const r = await run('--nodes', '3', '--hours', '0.5', '--no-busier', '--demand', 'saturating', '--nodes-needed', '--output', 'json');
    assert.equal(r.code, 0, r.stderr);
    const out = JSON.parse(r.stdout) as { demand: string; limit: { podsPlaced: number }; policies: { name: string; podsPending: number; gainCaptured: number | null; nodesNeeded: number | null }[] };
    assert.equal(out.demand, 'saturating');
    for (const p of out.policies) {
      assert.ok(p.podsPending > 0, `${p.name} has pods waiting`);
      assert.ok(p.nodesNeeded === null || (Number.isInteger(p.nodesNeeded) && p.nodesNeeded >= 1), `${p.name}.nodesNeeded ${p.nodesNeeded}`);
    }
    assert.equal(out.policies.find((p) => p.name === 'limit')!.gainCaptured, 1);
    const md = await run('--nodes', '3', '--hours', '0.5', '--no-busier', '--demand', 'saturating', '--nodes-needed');
    assert.match(md.stdout, /Generated by `oversell simulate --nodes 3 --hours 0\.5 --demand saturating --nodes-needed --no-busier`/);
    assert.ok(md.stdout.indexOf('**Nodes saved:') > 0 && md.stdout.indexOf('**Nodes saved:') < md.stdout.indexOf('## What the run shows'));
    const bad = await run('--demand', 'endless');
    assert.notEqual(bad.code, 0);
    assert.match(bad.stderr, /--demand <kind>.*endless.*Allowed choices are scenario, saturating/);
  });

  it('--output json: who paid, by tier, in policies and busier.policies (protectedPodsHit, podsRelieved, podsHitByMemoryOverload)', async () => {
    // Two nodes of 4 GiB pods using half their requests and one protected pod each
    // (priority system-cluster-critical, Burstable with a small request: the kernel's
    // likeliest victim), under a policy that lets memory reach 1.5x raw allocatable.
    const scenario = join(work, 'who-pays.yaml');
    writeFileSync(scenario, [
      'nodes: 2', 'hours: 1', 'warmupHours: 0',
      'usage: { memorySlack: 0.5, concentration: 1000, memoryGrowth: { swing: 0 }, diurnal: { memorySwing: 0 } }',
      'classes:',
      '  - { name: app, requests: { cpu: 100m, memory: 4Gi }, replicasPerNode: { min: 30, max: 30 } }',
      '  - { name: critical, requests: { cpu: 100m, memory: 1Gi }, replicasPerNode: { min: 1, max: 1 }, priority: 2000000000 }',
      '',
    ].join('\n'));
    const policy = join(work, 'loose.yaml');
    writeFileSync(policy, 'kind: OversellPolicy\nmetadata: { name: loose }\nspec: { memory: { maxRatio: 1.5, targetUtilization: 0.99, riskBudget: { enabled: false } }, cpu: { riskBudget: { enabled: false } } }\n');
    type Row = { name: string; kind: string; protectedPodsHit: number; podsRelieved: number; podsHitByMemoryOverload: number; podsOomKilled: number; protectedPodsRelieved: number };
    const busier = async (factor: string) => {
      const r = await run('--scenario', scenario, '--policy', policy, '--busier', factor, '--output', 'json');
      assert.equal(r.code, 0, r.stderr);
      const out = JSON.parse(r.stdout) as { policies: Row[]; busier: { policies: Row[] }; harmChecks: { target: string; met: boolean }[] };
      for (const p of [...out.policies, ...out.busier.policies]) {
        for (const k of ['protectedPodsHit', 'podsRelieved', 'podsHitByMemoryOverload'] as const) assert.ok(Number.isInteger(p[k]) && p[k] >= 0, `${p.name}.${k}`);
        if (p.kind !== 'oversell') assert.equal(p.podsRelieved, 0, `${p.name}: only oversell relieves`);
        assert.equal(p.protectedPodsRelieved, 0, `${p.name}: relief never takes a protected pod`);
        assert.ok(p.protectedPodsHit <= p.podsHitByMemoryOverload + p.podsRelieved, `${p.name}: protected pods hit are among the pods hit`);
      }
      return { out, pick: (name: string) => out.busier.policies.find((p) => p.name === name)! };
    };
    // x1.35: the nodes under loose cross the relief line, below the kubelet's threshold: relief, nothing else.
    const mild = await busier('1.35');
    assert.ok(mild.pick('loose').podsRelieved > 0);
    assert.deepEqual([mild.pick('loose').protectedPodsHit, mild.pick('loose').podsHitByMemoryOverload], [0, 0]);
    assert.equal(mild.pick('static').podsHitByMemoryOverload, 0);
    assert.ok(mild.out.harmChecks.length === 4 && mild.out.harmChecks.every((c) => typeof c.met === 'boolean'));
    // x1.45: demand past capacity at once: the kernel kills, the protected pods first (highest oom_score), and they are counted.
    const hard = await busier('1.45');
    const st = hard.pick('static');
    assert.ok(st.podsOomKilled > 0 && st.protectedPodsHit > 0 && st.protectedPodsHit <= st.podsHitByMemoryOverload, JSON.stringify(st));
  });

  it('an invalid scenario is refused with the file and the field named, exit 2', async () => {
    const bad = join(work, 'bad.yaml');
    writeFileSync(bad, 'usage:\n  bursts: { share: 2 }\n');
    const r = await run('--scenario', bad);
    assert.equal(r.code, 2);
    assert.equal(r.stderr, `error: ${bad}: usage.bursts.share must be a number in [0, 1], got 2\n`);
    const flag = await run('--nodes', '0');
    assert.notEqual(flag.code, 0);
    assert.match(flag.stderr, /--nodes <n>.*"0" is not an integer >= 1/);
  });

  it('--out writes the page, the JSON and the charts; markdown on stdout otherwise', async () => {
    const dir = join(work, 'out');
    const r = await run(...SMALL, '--out', dir);
    assert.equal(r.code, 0, r.stderr);
    assert.equal(r.stdout, '');
    assert.deepEqual(readdirSync(join(dir, 'outcome')).sort(), ['pods-placed.svg', 'risk-gain.svg', 'utilisation-cpu.svg', 'utilisation-memory.svg']);
    const page = readFileSync(join(dir, 'outcome.md'), 'utf8');
    assert.match(page, /Generated by `oversell simulate --nodes 4 --hours 1 --no-busier`/);
    assert.match(page, /!\[Pods running over the day, per policy\]\(outcome\/pods-placed\.svg\)/);
    assert.equal(JSON.parse(readFileSync(join(dir, 'outcome.json'), 'utf8')).policies.length, 9);
    const md = await run(...SMALL);
    assert.equal(md.code, 0, md.stderr);
    assert.match(md.stdout, /^# What oversell is worth/);
    assert.doesNotMatch(md.stdout, /\.svg\)/, 'no links to charts that were not written');
  });
});

describe('oversell simulate --trace-format (public traces)', () => {
  const placed = (out: TraceOut, name: string) => out.policies.find((p) => p.name === name)!.podsPlaced;

  it('bitbrains: the fixture\'s three VMs are the workload on --nodes nodes; saturating fills the nodes with their copies; the limit never overloads', async () => {
    const r = await run(...BITBRAINS, '--nodes', '2', '--no-busier', '--output', 'json');
    assert.equal(r.code, 0, r.stderr);
    const out = JSON.parse(r.stdout) as TraceOut;
    assert.deepEqual([out.trace.format, out.trace.pods, out.trace.requestsKnown], ['bitbrains', 3, true]);
    // VM 1 all 300 steps, VM 3 150 of them; VM 2 (64 GiB) fits no node without oversell.
    assert.equal(placed(out, 'none'), 1.5);
    const sat = await run(...BITBRAINS, '--nodes', '2', '--no-busier', '--demand', 'saturating', '--output', 'json');
    assert.equal(sat.code, 0, sat.stderr);
    const s = JSON.parse(sat.stdout) as TraceOut;
    assert.equal(placed(s, 'none'), 15, '7 copies of VM 1 a node, and one of VM 3 while it runs');
    const limit = s.policies.find((p) => p.name === 'limit')!;
    assert.deepEqual([limit.cpuOverCapacityNodeSeconds, limit.memoryOverloadNodeSeconds], [0, 0]);
    const md = await run(...BITBRAINS, '--nodes', '2', '--no-busier');
    assert.match(md.stdout, /Generated by `oversell simulate --trace \S+bitbrains --trace-format bitbrains --nodes 2 --no-busier`/);
    assert.match(md.stdout, /The 3 VMs of a public Bitbrains \(GWA-T-12\) trace/);
  });

  it('alibaba-2018: the same inputs give the same bytes, busier run included', async () => {
    const a = await run(...ALIBABA, '--demand', 'saturating', '--output', 'json');
    const b = await run(...ALIBABA, '--demand', 'saturating', '--output', 'json');
    assert.equal(a.code, 0, a.stderr);
    assert.equal(a.stdout, b.stdout);
    const out = JSON.parse(a.stdout) as TraceOut & { busier: { policies: unknown[] } };
    assert.deepEqual(out.trace.machines, ['m_1', 'm_2']);
    assert.equal(out.trace.pods, 2);
    assert.equal(out.busier.policies.length, 9);
  });

  it('alibaba-2018 without container files: requestsKnown false, no density, no share, no targets', async () => {
    const dir = join(work, 'alibaba-machines');
    mkdirSync(dir);
    for (const f of ['machine_meta.csv', 'machine_usage.csv']) copyFileSync(join(fixtures, 'alibaba-2018', f), join(dir, f));
    const r = await run('--trace', dir, '--trace-format', 'alibaba-2018', '--machine-memory', '96Gi', '--no-busier', '--output', 'json');
    assert.equal(r.code, 0, r.stderr);
    const out = JSON.parse(r.stdout) as TraceOut;
    assert.equal(out.trace.requestsKnown, false);
    assert.ok(out.trace.notes.some((n) => /Requests are unknown/.test(n)));
    assert.deepEqual(out.checks, []);
    for (const p of out.policies) assert.deepEqual([p.densityVsNone, p.gainCaptured], [null, null], p.name);
    const md = await run('--trace', dir, '--trace-format', 'alibaba-2018', '--machine-memory', '96Gi', '--no-busier');
    assert.match(md.stdout, /\*\*Requests are unknown/);
  });

  it('refuses --machine-memory where it does not apply and requires it for alibaba-2018; a broken trace is an error naming it, exit 2', async () => {
    const missing = await run('--trace', join(fixtures, 'alibaba-2018'), '--trace-format', 'alibaba-2018');
    assert.equal(missing.code, 2);
    assert.match(missing.stderr, /^error: --trace-format alibaba-2018 needs --machine-memory: .*mem_size is 100/);
    const extra = await run(...BITBRAINS, '--machine-memory', '96Gi');
    assert.equal(extra.code, 2);
    assert.match(extra.stderr, /^error: --machine-memory applies to --trace-format alibaba-2018 only/);
    const jsonl = await run('--trace', join(work, 'none.jsonl'), '--machine-memory', '96Gi');
    assert.equal(jsonl.code, 2);
    assert.match(jsonl.stderr, /^error: --machine-memory applies to --trace-format alibaba-2018 only/);
    const window = await run(...BITBRAINS, '--trace-window', '0-100');
    assert.equal(window.code, 2);
    assert.match(window.stderr, /--trace-window applies to --trace-format alibaba-2018 only/);
    const quantity = await run(...ALIBABA.slice(0, -1), 'lots');
    assert.notEqual(quantity.code, 0);
    assert.match(quantity.stderr, /--machine-memory <quantity>/);
    const empty = join(work, 'empty');
    mkdirSync(empty);
    const broken = await run('--trace', empty, '--trace-format', 'bitbrains');
    assert.equal(broken.code, 2);
    assert.match(broken.stderr, /^error: bitbrains: \S+empty has no \.csv files: give the directory of the VM files/);
    const outside = await run(...ALIBABA, '--trace-window', '5000-6000');
    assert.equal(outside.code, 2);
    assert.match(outside.stderr, /^error: alibaba-2018: no usage row from 5000 to 6000/);
  });
});
