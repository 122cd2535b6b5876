// Shared flag plumbing for the binaries: every flag has an environment variable
// (for Kubernetes manifests) and appears in --help with its default.
import { Command, InvalidArgumentError, Option } from 'commander';
import { parseDuration } from './duration.js';

export function flag(spec: string, description: string, env: string, defaultValue?: string): Option {
  const o = new Option(spec, description).env(env);
  return defaultValue === undefined ? o : o.default(defaultValue);
}

export function durationFlag(spec: string, description: string, env: string, defaultValue: string): Option {
  return flag(spec, description, env, defaultValue).argParser((v: string) => {
    try {
      return parseDuration(v, spec.split(' ')[0]);
    } catch (err) {
      throw new InvalidArgumentError((err as Error).message);
    }
  });
}

/** defaultValue undefined: the flag is off unless given. */
export function numberFlag(spec: string, description: string, env: string, defaultValue: string | undefined, min = 0): Option {
  return flag(spec, description, env, defaultValue).argParser((v: string) => {
    const n = Number(v);
    if (v.trim() === '' || !Number.isFinite(n) || n < min) throw new InvalidArgumentError(`${JSON.stringify(v)} is not a number >= ${min}`);
    return n;
  });
}

/** A commander option whose default string still needs the parser's conversion. */
export function parsed<T>(value: unknown, parse: (s: string) => T): T {
  return typeof value === 'string' ? parse(value) : (value as T);
}

export function program(name: string, description: string): Command {
  return new Command(name).description(description).showHelpAfterError().allowExcessArguments(false);
}

/** Ends the process on SIGINT/SIGTERM after stop() resolves, or after 10 s regardless. */
export function stopOnSignals(stop: () => Promise<void>, log: { info(o: object, m: string): void }): void {
  let stopping = false;
  const handler = (signal: NodeJS.Signals) => {
    if (stopping) return;
    stopping = true;
    log.info({ signal }, 'shutting down');
    setTimeout(() => process.exit(1), 10_000).unref();
    stop().then(
      () => process.exit(0),
      () => process.exit(1),
    );
  };
  process.on('SIGINT', handler);
  process.on('SIGTERM', handler);
}
