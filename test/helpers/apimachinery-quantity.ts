// Kubernetes' own quantity parser (k8s.io/apimachinery/pkg/api/resource), as
// a small Go program in test/apimachinery-quantity, built once per content of
// its sources into ~/.cache/oversell (or $OVERSELL_CACHE) and asked in batches.
// What the gateway writes is checked with it, not with the gateway's own
// formatter. Needs Go >= 1.26 and the Go module proxy, as CI has.
import { execFileSync, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, renameSync, rmSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

export interface ApimachineryQuantity {
  in: string;
  /** resource.ParseQuantity accepted it. */
  ok: boolean;
  err?: string;
  /** Quantity.String(): what the API server stores; "kept as written" when it equals `in`. */
  canonical?: string;
  /** JSON string in, json.Marshal out: what happens to a quantity in a patched object. */
  roundTrip?: string;
  roundTripErr?: string;
  /** The exact value in millis (cpu) and whole units (memory), rounded away from zero, any size. */
  milli?: string;
  unit?: string;
  /** Whether `milli` / `unit` lie within int64. */
  milliFitsInt64: boolean;
  unitFitsInt64: boolean;
  /** What q.MilliValue() and q.Value() return; they overflow silently, so only meaningful where the value fits. */
  milliValue?: string;
  value?: string;
}

const SOURCE = fileURLToPath(new URL('../apimachinery-quantity/', import.meta.url));

let built: string | undefined;

/** The checker's binary, built if this content of its sources was never built here. */
export function quantityChecker(): string {
  if (built) return built;
  const hash = createHash('sha256');
  for (const f of ['go.mod', 'go.sum', 'main.go']) hash.update(readFileSync(join(SOURCE, f)));
  const cache = process.env.OVERSELL_CACHE || join(homedir(), '.cache', 'oversell');
  const dir = join(cache, 'apimachinery-quantity', hash.digest('hex').slice(0, 16));
  const bin = join(dir, 'quantity-check');
  if (!existsSync(bin)) {
    const go = spawnSync('go', ['version'], { encoding: 'utf8' });
    if (go.status !== 0) {
      throw new Error('Go is not on PATH: the tests check quantities with Kubernetes\' own parser, a Go program in test/apimachinery-quantity. Install Go >= 1.26 (https://go.dev/dl/) with access to the Go module proxy.');
    }
    mkdirSync(dir, { recursive: true });
    const tmp = `${bin}.${process.pid}.tmp`;
    // A private temp file, then rename: a concurrent build never leaves a half-written binary in place.
    try {
      execFileSync('go', ['build', '-trimpath', '-o', tmp, '.'], {
        cwd: SOURCE,
        env: { ...process.env, GOTOOLCHAIN: 'local', GOFLAGS: '-mod=mod -buildvcs=false', CGO_ENABLED: '0' },
        stdio: ['ignore', 'inherit', 'inherit'],
      });
    } catch (err) {
      rmSync(tmp, { force: true });
      throw new Error(`building test/apimachinery-quantity failed (${go.stdout.trim()}; it needs Go >= 1.26 and the Go module proxy for k8s.io/apimachinery; the go output is above): ${(err as Error).message}`);
    }
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
  answers.forEach((a, i) => {
    // Go replaces invalid UTF-16 with U+FFFD: the answer would be about another string.
    if (a.in !== quantities[i]) throw new Error(`the quantity checker read ${JSON.stringify(quantities[i])} as ${JSON.stringify(a.in)}`);
  });
  return answers;
}
