// docs/benchmarks.md is generated: the committed page must be what the
// benchmark writes from the committed results, and it only links to the
// performance log, which the benchmark never writes. bench/render.ts runs as
// a process (tests do not import bench/).
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';

const repo = fileURLToPath(new URL('../', import.meta.url));
const read = (path: string) => readFileSync(join(repo, path), 'utf8');
const work = mkdtempSync(join(tmpdir(), 'oversell-benchdoc-'));
after(() => rmSync(work, { recursive: true, force: true }));
const render = (...args: string[]) => spawnSync(process.execPath, ['--import', 'tsx', join(repo, 'bench/render.ts'), ...args], { cwd: repo, encoding: 'utf8' });

describe('docs/benchmarks.md', () => {
  it('is exactly what bench/render.ts writes from bench/results/*.json (regenerate: node --import tsx bench/render.ts)', () => {
    const r = render('--print');
    assert.equal(r.status, 0, r.stderr);
    assert.equal(read('docs/benchmarks.md'), r.stdout);
    assert.equal(render('--check').status, 0);
  });

  it('follows the saved results: a changed figure changes the page, a missed target says missed', () => {
    cpSync(join(repo, 'bench/results'), join(work, 'bench/results'), { recursive: true });
    mkdirSync(join(work, 'docs'));
    writeFileSync(join(work, 'docs/benchmarks.md'), read('docs/benchmarks.md'));
    assert.equal(render('--check', '--repo', work).status, 0, 'a copy of the committed tree checks out');
    const file = join(work, 'bench/results/webhook.json');
    const r = JSON.parse(readFileSync(file, 'utf8')) as { figures: Record<string, number>; targets: { met: boolean }[] };
    r.figures.handler_cpu_us = 123456;
    r.targets[0]!.met = false;
    writeFileSync(file, JSON.stringify(r));
    const stale = render('--check', '--repo', work);
    assert.equal(stale.status, 1);
    assert.match(stale.stderr, /is not what bench\/results\/\*\.json give/);
    assert.equal(render('--repo', work).status, 0);
    const page = readFileSync(join(work, 'docs/benchmarks.md'), 'utf8');
    assert.match(page, /\| handler_cpu_us \| 123456 \|/);
    assert.match(page, /\| \*\*missed\*\* \|/);
    assert.equal(render('--check', '--repo', work).status, 0);
  });

  it('plans capacity from the saved results: a costlier review needs more replicas, a heavier ingest fits none', () => {
    const tree = join(work, 'plan');
    cpSync(join(repo, 'bench/results'), join(tree, 'bench/results'), { recursive: true });
    // Agents on shared plaintext connections alone first: no cluster result.
    rmSync(join(tree, 'bench/results/cluster.json'), { force: true });
    const edit = (name: string, figures: Record<string, number>) => {
      const file = join(tree, 'bench/results', `${name}.json`);
      const r = JSON.parse(readFileSync(file, 'utf8')) as { figures: Record<string, number> };
      Object.assign(r.figures, figures);
      writeFileSync(file, JSON.stringify(r));
    };
    // 100 + 10 m per 1,000 agents of ingest, 200 + 10 MiB; 1 ms of gateway CPU per review.
    edit('ingest', { agents_1000_gateway_millicores: 110, agents_10000_gateway_millicores: 200, agents_1000_gateway_rss_mib: 210, agents_10000_gateway_rss_mib: 300 });
    edit('webhook', { '1000_gateway_cpu_us_per_request': 1000 });
    const row = (nodes: string) => render('--print', '--repo', tree).stdout.split('\n').find((l) => l.startsWith(`| ${nodes} |`));
    // 65,000 nodes: 6,500 reviews/s x 1 ms = 6,500 m over replicas with 1000 - 750 = 250 m of room each: 26 replicas.
    assert.equal(row('65,000'), '| 65,000 | 6,500 | 750m | 850 MiB | 26 | 1,000m | yes |');
    assert.equal(row('1,000'), '| 1,000 | 100 | 110m | 210 MiB | 2 | 160m | yes |');
    edit('ingest', { agents_10000_gateway_millicores: 2000 });
    assert.match(row('65,000') ?? '', /\*\*none fits\*\*: the ingest alone is over budget/);
  });

  it('adds what the cluster benchmark measured for TLS and a token per agent, scaled with the agents', () => {
    const tree = join(work, 'plan-tls');
    cpSync(join(repo, 'bench/results'), join(tree, 'bench/results'), { recursive: true });
    const results = join(tree, 'bench/results');
    const set = (name: string, figures: Record<string, number | string>) => {
      const file = join(results, `${name}.json`);
      const r = JSON.parse(readFileSync(file, 'utf8')) as { figures: Record<string, number | string> };
      writeFileSync(file, JSON.stringify({ ...r, figures: { ...r.figures, ...figures } }));
    };
    set('ingest', { agents_1000_gateway_millicores: 110, agents_10000_gateway_millicores: 200, agents_1000_gateway_rss_mib: 210, agents_10000_gateway_rss_mib: 300 });
    set('webhook', { '1000_gateway_cpu_us_per_request': 1000 });
    // At 10,000 agents on TLS with 1,000 reviews/s (1 ms each): 2,200 m = 1,000 for the reviews + 200 plaintext ingest + 1,000 for TLS; RSS 800 = 300 + 500.
    // A saved result of another benchmark gives the shape (summary, targets, machine, date).
    writeFileSync(join(results, 'cluster.json'), JSON.stringify({ ...JSON.parse(readFileSync(join(results, 'ingest.json'), 'utf8')), name: 'cluster', figures: {} }));
    set('cluster', { agents: 10_000, reviews_per_s: 1000, fitting_limit_mib: 4096, limit_4096mib_gateway_millicores: 2200, limit_4096mib_rss_peak_mib: 800, limit_4096mib_throttled_pct_of_window: 0 });
    const page = render('--print', '--repo', tree).stdout;
    const row = (nodes: string) => page.split('\n').find((l) => l.startsWith(`| ${nodes} |`));
    assert.match(page, /TLS and a token per agent add .*: 100 millicores per 1,000 agents \(from its 10,000-agent pass, less .*\) and 51 KiB per 1,000 agents/);
    // 1,000 nodes: 110 + 100 m, 210 + 50 MiB; 100 reviews/s x 1 ms over 2 replicas.
    assert.equal(row('1,000'), '| 1,000 | 100 | 210m | 260 MiB | 2 | 260m | yes |');
    assert.match(row('10,000') ?? '', /^\| 10,000 \| 1,000 \| 1,200m \| 800 MiB \| \*\*none fits\*\*/);
    // Throttled at its quota, the run's CPU says what it was allowed: memory is added, CPU is not, and the page says so.
    set('cluster', { limit_4096mib_throttled_pct_of_window: 29.5 });
    const throttled = render('--print', '--repo', tree).stdout;
    assert.match(throttled, /\*\*the CPU column is too low\*\*/);
    assert.equal(throttled.split('\n').find((l) => l.startsWith('| 1,000 |')), '| 1,000 | 100 | 110m | 260 MiB | 2 | 160m | yes |');
    // A smaller pass that fitted the core gives the CPU: at 2,500 agents, 625 m = 250 for 250 reviews/s + 125 plaintext ingest + 250 for TLS.
    const smaller = { smaller_agents: 2500, smaller_limit_mib: 1536, smaller_reviews_per_s: 250, agents_2500_limit_1536mib_gateway_millicores: 625 };
    set('cluster', { ...smaller, smaller_fits_core: 'yes' });
    const fitted = render('--print', '--repo', tree).stdout;
    assert.match(fitted, /: 100 millicores per 1,000 agents \(from its 2,500-agent pass, which fitted its core; the 10,000-agent pass was throttled at it/);
    assert.equal(fitted.split('\n').find((l) => l.startsWith('| 1,000 |')), '| 1,000 | 100 | 210m | 260 MiB | 2 | 260m | yes |');
    // One that did not fit says no more than the throttled pass did.
    set('cluster', { smaller_fits_core: 'no', agents_2500_limit_1536mib_throttled_pct_of_window: 1.1 });
    assert.match(render('--print', '--repo', tree).stdout, /\*\*the CPU column is too low\*\*.* Its 2,500-node pass did not fit the core either, narrowly: 625 millicores, throttled 1.1% of the window\./);
  });

  it('costs the sharded 100,000-node plan from the replicas result: costlier reports between replicas need more replicas', () => {
    const tree = join(work, 'plan-sharded');
    cpSync(join(repo, 'bench/results'), join(tree, 'bench/results'), { recursive: true });
    const results = join(tree, 'bench/results');
    rmSync(join(results, 'cluster.json'), { force: true });
    rmSync(join(results, 'replicas-sharded.json'), { force: true });
    const set = (name: string, figures: Record<string, number | string>) => {
      const file = join(results, `${name}.json`);
      const r = JSON.parse(readFileSync(file, 'utf8')) as { figures: Record<string, number | string> };
      writeFileSync(file, JSON.stringify({ ...r, name, figures: { ...r.figures, ...figures } }));
    };
    writeFileSync(join(results, 'replicas.json'), readFileSync(join(results, 'ingest.json')));
    writeFileSync(join(results, 'peer-inputs.json'), readFileSync(join(results, 'ingest.json')));
    set('ingest', { agents_1000_gateway_rss_mib: 210, agents_10000_gateway_rss_mib: 300 });
    // A review costs 1 ms at every rate measured (the replicas run's 50/s, the webhook benchmark's 500 and 1,000/s).
    set('webhook', { '500_gateway_cpu_us_per_request': 1000, '1000_gateway_cpu_us_per_request': 1000 });
    // No fixed cost, 0.1 m an agent; 464 + 36 bytes of framing a message; 37,000 bytes a review and its answer.
    set('replicas', {
      agents: 1000, replicas: 3, replica_reviews_per_s: 50, fixed_millicores: 0, agent_millicores_per_1000: 100, review_cpu_us: 1000, query_cpu_us: 0, queries_per_s: 0,
      agent_messages_per_agent_per_s: 0.2, agent_samples_per_message: 5, agent_message_bytes: 464,
      review_request_bytes: 36_000, review_answer_bytes: 1000,
    });
    // A report between replicas: 3 µs both ends, of which 1 µs is building it (once for every replica), 400 bytes.
    set('peer-inputs', { report_us_both_ends: 3, build_us_per_report: 1, bytes_per_report: 400 });
    const row = (page: string, nodes: string) => page.split('\n').filter((l) => l.startsWith(`| ${nodes} |`)).at(-1);
    const page = render('--print', '--repo', tree).stdout;
    assert.match(page, /\*\*100\.0 millicores per 1,000 agents\*\* \(100\.0 unsharded, - sharded; .*: 500 µs per message\)/);
    // One core holds 10,000 agents; memory (200 MiB + 10 MiB per 1,000) would hold 133,600.
    assert.match(page, /\*\*Every agent on every replica stops at 10,000 nodes\*\* at the batched rate: one core of ingest holds 10,000 agents, and the \d+ MiB limit 133,600/);
    // Reports, each node's from its first owner: 10,000 nodes x 0.2 messages a second x (R - 1) / R each replica receives.
    // 3 replicas: 6,667 agents (667 m) + 333 reviews/s (333 m) + 1,333 reports/s (3 m) is over 1,000 m; 4: the heaviest
    // replica owns 5,027 nodes (rendezvous hashing of 10,000 names; an even share is 5,000): 503 + 250 + 1,500 x 0.002
    // + 5,027 / 2 first-owned x 0.2 x 0.001 built = 756.
    // Network: 5,027 x 0.2 x 500 bytes + 250 x 37,000 + 2 x 1,500 x 400 = 11.0 MB/s.
    assert.equal(row(page, '10,000'), '| 10,000 | 4 | 5,027 | 250 | 1,500 | 756m | 250 MiB | 87.6 Mbit/s |');
    assert.match(page, /The sharded gateway is built \(`--shard-copies`.*The plan is costed part by part from the two replicas runs above/);
    assert.match(page, /A report of a node's decision inputs to one other replica: \*\*2\.0 µs\*\* of CPU, both ends, and 1\.0 µs more to build it/);
    assert.match(page, /Not checked against a sharded run: bench\/replicas-sharded\.ts has not been run/);
    // Every replica receives every node's reports, whatever R: at 100,000 nodes 20,000 x (R - 1) / R a second, a floor
    // under each replica's CPU that more replicas do not lower. At 10 µs (400 m of it) the plan needs more replicas.
    const replicasAt100k = (page: string) => {
      const cells = (row(page, '100,000') ?? '').split('|').map((c) => c.trim());
      const r = Number(cells[2]);
      assert.equal(cells[5], Math.round((20_000 * (r - 1)) / r).toLocaleString('en-US'), 'reports received: nodes x 0.2 messages x (R - 1) / R');
      return r;
    };
    const cheap = replicasAt100k(page);
    set('peer-inputs', { report_us_both_ends: 11 });
    const costly = replicasAt100k(render('--print', '--repo', tree).stdout);
    assert.ok(costly > cheap, `${costly} replicas at 10 µs a report, ${cheap} at 2 µs`);
    set('peer-inputs', { report_us_both_ends: 3 });

    // A sharded run whose agents cost 0.12 m each, whose reviews cost 1.2 ms,
    // and whose GetNode calls cost 3 ms on average against 0 unsharded: 9 ms for each of the third sent to peers.
    writeFileSync(join(results, 'replicas-sharded.json'), readFileSync(join(results, 'ingest.json')));
    set('replicas-sharded', {
      replicas: 3, agents: 1000, agents_per_replica: 667, replica_reviews_per_s: 100 / 3, replica_queries_per_s: 10,
      fixed_millicores: 5, agent_millicores_per_1000: 120, review_cpu_us: 1200, query_cpu_us: 3000,
      agents_phase_millicores: 85, reviews_phase_millicores: 125, replica_millicores: 155, replica_rss_mib: 250,
    });
    const checked = render('--print', '--repo', tree).stdout;
    // Predicted from the unsharded run alone: 0 fixed; 667 x 0.1 = 67 for the agents; 33.3 x 1 = 33 for the reviews; 0 for the queries.
    assert.match(checked, /\*\*Checked against the sharded run\*\* \(replicas-sharded above: 3 replicas, each with about 667 agents\), part by part/);
    assert.match(checked, /\| fixed \(idle, no agent\) \| 0 \| 5 \| -100% \|/);
    assert.match(checked, /\| its agents \| 67 \| 80 \| -17% \|/);
    assert.match(checked, /\| reviews, each decided where it lands \| 33 \| 40 \| -17% \|/);
    assert.match(checked, /\| GetNode, a third asked of the owners \| 0 \| 30 \| -100% \|/);
    assert.match(checked, /\| \*\*total\*\* \| 100 \| 155 \| -35% \|/);
    assert.match(checked, /the model is under the sharded run by 55 millicores/);
    // The plan takes the larger of the two runs: 5 m fixed, 0.12 m an agent;
    // a GetNode sent to peers costs (3 - 0) / (1/3) = 9 ms more (no calls in this plan: queries_per_s is 0).
    assert.match(checked, /\*\*a replica's fixed cost 5 millicores\*\* \(up, watching, no agent: 0 unsharded, 5 sharded\); \*\*120\.0 millicores per 1,000 agents\*\* \(100\.0 unsharded, 120\.0 sharded;/);
    assert.match(checked, /and 9,000 µs more for one that asks the node's owners/);
    // 10,000 nodes on 4: 5 + 5,027 x 0.12 + 250 + 1,500 x 0.002 + 2,514 x 0.2 x 0.001 = 862 m.
    assert.match(row(checked, '10,000') ?? '', /^\| 10,000 \| 4 \| 5,027 \| 250 \| 1,500 \| 862m \|/);
  });

  it('links to the performance log and carries none of its history', () => {
    const page = read('docs/benchmarks.md');
    const log = read('docs/performance-log.md');
    assert.match(page, /\]\(performance-log\.md\)/);
    // Every dated entry of the log is under a date heading, and none of it is on the page.
    const dates = [...log.matchAll(/^## (\d{4}-\d{2}-\d{2})$/gm)].map((m) => m[1]);
    assert.ok(dates.length >= 3, `date headings in the log: ${dates.join(', ')}`);
    assert.deepEqual(dates, [...dates].sort(), 'log dates oldest first');
    const entries = log.split('\n').filter((l) => l.startsWith('- ')).map((l) => l.slice(2, 60));
    assert.ok(entries.length > 30);
    for (const e of entries) assert.ok(!page.includes(e), `log entry on the generated page: ${e}`);
  });
});
