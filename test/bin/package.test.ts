// The package as a user installs it: `npm pack`, then `npm install -g` of the
// tarball into a temporary prefix, offline and with an empty npm cache (the
// production dependencies travel inside the tarball, so the install must not
// need a registry: what it installs cannot drift with what a registry serves),
// and the four bins run from that prefix's bin/, with no access to this
// repository's node_modules.
import assert from 'node:assert/strict';
import { execFile, spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { delimiter, dirname, join, relative } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';

const repo = fileURLToPath(new URL('../..', import.meta.url));
const work = mkdtempSync(join(tmpdir(), 'oversell-package-'));
const prefix = join(work, 'prefix');
const bin = join(prefix, 'bin');
const installed = join(prefix, 'lib', 'node_modules', 'oversell');
const lock = JSON.parse(readFileSync(join(repo, 'package-lock.json'), 'utf8')) as { packages: Record<string, { version?: string; dev?: boolean; optional?: boolean; dependencies?: Record<string, string> }> };

// What a user's shell has: none of the npm_* variables `npm test` sets, no
// cluster, and this Node first on PATH (the bins start with `#!/usr/bin/env node`).
const env: NodeJS.ProcessEnv = Object.fromEntries(Object.entries(process.env).filter(([k]) => !/^npm_/i.test(k) && !['KUBECONFIG', 'KUBERNETES_SERVICE_HOST', 'OVERSELL_ADDRESS', 'OVERSELL_TOKEN'].includes(k)));
env.PATH = [bin, dirname(process.execPath), process.env.PATH ?? ''].join(delimiter);
env.HOME = join(work, 'home');
// npm itself runs with the environment it was given (registry, cache, proxy settings).
const npmEnv: NodeJS.ProcessEnv = { ...process.env, PATH: env.PATH };

function run(file: string, args: string[], options: { cwd?: string; env?: NodeJS.ProcessEnv; timeoutMs: number }): Promise<{ status: number; stdout: string; stderr: string; ms: number }> {
  const started = Date.now();
  return new Promise((resolve) => {
    execFile(file, args, { cwd: options.cwd ?? work, env: options.env ?? env, encoding: 'utf8', timeout: options.timeoutMs, maxBuffer: 64 * 1024 * 1024 }, (err, stdout, stderr) =>
      resolve({ status: err ? Number((err as { code?: number }).code ?? 1) || 1 : 0, stdout, stderr: stderr + (err && (err as { killed?: boolean }).killed ? `\n(killed after ${options.timeoutMs} ms)` : ''), ms: Date.now() - started }),
    );
  });
}

interface PackedFile {
  path: string;
}

// Measured on 2 shared cores: npm pack (a clean build, 9,200 files with the
// bundled dependencies) 26 s, npm install -g offline 34 s, the whole file
// about 70 s. Each limit leaves four times that or more.
describe('the npm package, installed with npm install -g', { timeout: 600_000 }, () => {
  let files: string[] = [];
  let gateway: ReturnType<typeof spawn> | undefined;
  before(async () => {
    const pack = await run('npm', ['pack', '--json', '--pack-destination', work], { cwd: repo, env: npmEnv, timeoutMs: 240_000 });
    assert.equal(pack.status, 0, `npm pack failed:\n${pack.stderr}`);
    const [packed] = JSON.parse(pack.stdout) as [{ filename: string; files: PackedFile[] }];
    files = packed.files.map((f) => f.path);
    const install = await run('npm', ['install', '--global', '--prefix', prefix, '--offline', '--cache', join(work, 'empty-npm-cache'), '--no-audit', '--no-fund', join(work, packed.filename)], { env: npmEnv, timeoutMs: 240_000 });
    assert.equal(install.status, 0, `npm install -g failed:\n${install.stderr}`);
    process.stdout.write(`npm pack ${pack.ms} ms, npm install -g ${install.ms} ms\n`);
  });
  after(() => {
    // Also when a test timed out before its own cleanup ran.
    if (gateway?.exitCode === null) gateway.kill('SIGKILL');
    rmSync(work, { recursive: true, force: true });
  });

  it('ships the build, the proto, the docs and the production dependencies, no sources, tests or benchmarks', () => {
    for (const f of ['dist/gateway/main.js', 'dist/agent/main.js', 'dist/cli/main.js', 'dist/gateway/ingest/ingest-thread.js', 'dist/lib/grpc-stream-decoder.js', 'dist/proto/oversell/v1/oversell.proto', 'proto/oversell/v1/oversell.proto', 'docs/cli.md', 'README.md', 'package.json']) {
      assert.ok(files.includes(f), `${f} is in the tarball`);
    }
    const stray = files.filter((f) => /^(test|bench|deploy|gateway|agent|cli|lib|scripts|patches|dist\/scripts|examples)\//.test(f) || (f.endsWith('.ts') && !f.startsWith('node_modules/')));
    assert.deepEqual(stray, []);
    const manifest = JSON.parse(readFileSync(join(repo, 'package.json'), 'utf8')) as { dependencies: Record<string, string>; bundleDependencies: string[] };
    assert.deepEqual([...manifest.bundleDependencies].sort(), Object.keys(manifest.dependencies).sort(), 'bundleDependencies lists every dependency');
    for (const dep of Object.keys(lock.packages['']?.dependencies ?? {})) assert.ok(files.includes(`node_modules/${dep}/package.json`), `${dep} is bundled`);
  });

  it('has no install script of its own: it works the same where scripts are blocked', () => {
    const { scripts = {} } = JSON.parse(readFileSync(join(installed, 'package.json'), 'utf8')) as { scripts?: Record<string, string> };
    assert.deepEqual(Object.keys(scripts).filter((k) => ['preinstall', 'install', 'postinstall'].includes(k)), []);
  });

  it('installs exactly the locked production dependencies, and no devDependency', () => {
    const installedVersions = new Map<string, string>();
    const walk = (dir: string) => {
      for (const entry of readdirSync(dir)) {
        if (entry.startsWith('.')) continue;
        const path = join(dir, entry);
        if (entry.startsWith('@')) {
          walk(path);
          continue;
        }
        const manifest = join(path, 'package.json');
        if (!existsSync(manifest)) continue;
        installedVersions.set(relative(installed, path), (JSON.parse(readFileSync(manifest, 'utf8')) as { version: string }).version);
        if (existsSync(join(path, 'node_modules'))) walk(join(path, 'node_modules'));
      }
    };
    walk(join(installed, 'node_modules'));
    const production = Object.entries(lock.packages).filter(([path, p]) => path.startsWith('node_modules/') && !p.dev && (!p.optional || installedVersions.has(path)));
    assert.ok(production.length > 50, `the lockfile lists the production tree (${production.length})`);
    const wrong = production.filter(([path, p]) => installedVersions.get(path) !== p.version).map(([path, p]) => `${path}: ${installedVersions.get(path) ?? 'missing'}, locked ${p.version}`);
    assert.deepEqual(wrong, [], 'every production dependency at its locked version');
    const extra = [...installedVersions.keys()].filter((path) => !lock.packages[path] || lock.packages[path]?.dev);
    assert.deepEqual(extra, [], 'nothing outside the locked production tree (no devDependency)');
  });

  for (const [name, usage] of [['oversell', 'Usage: oversell'], ['kubectl-oversell', 'Usage: kubectl oversell'], ['oversell-gateway', 'Usage: oversell-gateway'], ['oversell-agent', 'Usage: oversell-agent']] as const) {
    it(`${name} --help`, async () => {
      const r = await run(join(bin, name), ['--help'], { timeoutMs: 30_000 });
      assert.equal(r.status, 0, r.stderr);
      assert.match(r.stdout, new RegExp(`^${usage} `, 'm'));
    });
  }

  it('oversell-gateway starts in local mode, serves /readyz and /metrics and the query API to the installed CLI, and stops on SIGTERM', async () => {
    const gw = (gateway = spawn(join(bin, 'oversell-gateway'), [], {
      cwd: work,
      env: { ...env, OVERSELL_WEBHOOK_PORT: '0', OVERSELL_GRPC_PORT: '0', OVERSELL_METRICS_PORT: '0', OVERSELL_TLS_DIR: join(work, 'tls') },
    }));
    let out = '';
    gw.stdout.on('data', (c: Buffer) => (out += c));
    gw.stderr.on('data', (c: Buffer) => (out += c));
    const exited = new Promise<number | null>((resolve) => gw.once('exit', resolve));
    try {
      const ports = await new Promise<{ metrics: number; grpc: number; bindAddress: string }>((resolve, reject) => {
        const t = setTimeout(() => reject(new Error(`no "gateway serving" line in 30 s:\n${out}`)), 30_000);
        const look = () => {
          const line = out.split('\n').find((l) => l.includes('gateway serving'));
          if (line) {
            clearTimeout(t);
            resolve(JSON.parse(line) as { metrics: number; grpc: number; bindAddress: string });
          }
        };
        gw.stdout.on('data', look);
        void exited.then((code) => reject(new Error(`the gateway exited (${code}):\n${out}`)));
      });
      assert.equal(ports.bindAddress, '127.0.0.1', 'local mode binds loopback only');
      assert.equal((await fetch(`http://127.0.0.1:${ports.metrics}/readyz`)).status, 200);
      const metrics = await fetch(`http://127.0.0.1:${ports.metrics}/metrics`);
      assert.equal(metrics.status, 200);
      assert.match(await metrics.text(), /^oversell_/m);
      const policies = await run(join(bin, 'oversell'), ['--address', `127.0.0.1:${ports.grpc}`, 'get', 'policies'], { timeoutMs: 30_000 });
      assert.equal(policies.status, 0, policies.stderr);
      assert.match(policies.stdout, /^flags\s+0\s+Enforce\s/m);
      assert.doesNotMatch(out, /StreamDecoder runs unfixed/);
    } finally {
      gw.kill('SIGTERM');
    }
    assert.equal(await exited, 0, `exit status after SIGTERM:\n${out}`);
  });
});
