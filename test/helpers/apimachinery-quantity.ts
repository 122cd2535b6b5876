// Kubernetes' own quantity parser (k8s.io/apimachinery/pkg/api/resource), as
// a small Go program in test/apimachinery-quantity, built once per content of
// its sources into ~/.cache/oversell (or $OVERSELL_CACHE) and asked in batches.
// What the gateway writes is checked with it, not with the gateway's own
// formatter. Needs Go >= 1.26 and the Go module proxy, as CI has.
import { execFileSync, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, renameSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

export interface ApimachineryQuantity {
  in: string;
  /** resource.ParseQuantity accepted it. */
  ok: boolean;
  err?: string;
  /** Quantity.String(): what the API server stores. */
  canonical?: string;
  /** JSON in, JSON out: what happens to a quantity in a patched object. */
  roundTrip?: string;
  /** The value in millis (cpu) / whole units (memory), rounded up, is non-negative and at most int64. */
  milliFitsInt64: boolean;
  unitFitsInt64: boolean;
  milli?: string;
  unit?: string;
}

const SOURCE = fileURLToPath(new URL('../apimachinery-quantity/', import.meta.url));

let built: string | undefined;

/** The checker's binary, built if this content of its sources was never built here. */
export function quantityChecker(): string {
  if (built) return built;
  const hash = createHash('sha256');
  for (const f of ['go.mod', 'go.sum', 'main.go']) hash.update(readFileSync(join(SOURCE, f)));
  const dir = join(process.env.OVERSELL_CACHE ?? join(homedir(), '.cache', 'oversell'), 'apimachinery-quantity', hash.digest('hex').slice(0, 16));
  const bin = join(dir, 'quantity-check');
  if (!existsSync(bin)) {
    const go = spawnSync('go', ['version'], { encoding: 'utf8' });
    if (go.status !== 0) {
      throw new Error('Go is not on PATH: the tests check quantities with Kubernetes\' own parser, built from test/apimachinery-quantity (install Go >= 1.26)');
    }
    mkdirSync(dir, { recursive: true });
    const tmp = `${bin}.${process.pid}.tmp`;
    // A private temp file, then rename: a concurrent build never leaves a half-written binary in place.
    execFileSync('go', ['build', '-o', tmp, '.'], {
      cwd: SOURCE,
      env: { ...process.env, GOTOOLCHAIN: 'local', GOFLAGS: '-mod=mod', CGO_ENABLED: '0' },
      stdio: ['ignore', 'inherit', 'inherit'],
    });
    renameSync(tmp, bin);
  }
  built = bin;
  return bin;
}

/** What Kubernetes makes of each quantity, in order. */
export function apimachineryQuantities(quantities: readonly string[]): ApimachineryQuantity[] {
  if (quantities.length === 0) return [];
  const input = quantities.map((q) => JSON.stringify(q)).join('\n') + '\n';
  const out = execFileSync(quantityChecker(), { input, encoding: 'utf8', maxBuffer: 512 * 1024 * 1024 });
  const answers = out.trim().split('\n').map((l) => JSON.parse(l) as ApimachineryQuantity);
  if (answers.length !== quantities.length) throw new Error(`the quantity checker answered ${answers.length} of ${quantities.length} quantities`);
  return answers;
}
