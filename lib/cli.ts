// Shared flag plumbing for the binaries: every flag has an environment variable
// (for Kubernetes manifests) and appears in --help with its default.
import type { EventEmitter } from 'node:events';
import { Command, InvalidArgumentError, Option, type OutputConfiguration } from 'commander';
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
export function numberFlag(spec: string, description: string, env: string, defaultValue: string | undefined, min = 0, max = Infinity): Option {
  return flag(spec, description, env, defaultValue).argParser((v: string) => {
    const n = Number(v);
    if (v.trim() === '' || !Number.isFinite(n) || n < min) throw new InvalidArgumentError(`${JSON.stringify(v)} is not a number >= ${min}`);
    if (n > max) throw new InvalidArgumentError(`${JSON.stringify(v)} is above ${max}`);
    return n;
  });
}

/** A commander option whose default string still needs the parser's conversion. */
export function parsed<T>(value: unknown, parse: (s: string) => T): T {
  return typeof value === 'string' ? parse(value) : (value as T);
}

/** cmd: an existing command to define (parseArgs passes its own). */
export function program(name: string, description: string, cmd = new Command()): Command {
  return cmd.name(name).description(description).showHelpAfterError().allowExcessArguments(false);
}

export type Env = Readonly<Record<string, string | undefined>>;

/** What parseArgs read: the values, and whether the operator set each one (flag or environment) or it is the default. */
export interface Args {
  values: Record<string, unknown>;
  /** True when the option was given on the command line or through its environment variable. */
  given(key: string): boolean;
  /** How the operator set it, for messages: "--tls-dir" or "--tls-dir (from OVERSELL_TLS_DIR)". */
  named(key: string): string;
}

/** Commander reads process.env itself (Command._parseOptionsEnv); this reads the env it is given instead. */
class EnvCommand extends Command {
  env: Env = {};

  _parseOptionsEnv(): void {
    for (const option of this.options) {
      const value = option.envVar === undefined ? undefined : this.env[option.envVar];
      if (value === undefined) continue;
      const key = option.attributeName();
      // As commander: never over a value from the command line.
      const source = this.getOptionValueSource(key);
      if (this.getOptionValue(key) === undefined || source === 'default' || source === 'config' || source === 'env') {
        // Commander's own listener: parses, and reports a bad value naming the variable.
        (this as unknown as EventEmitter).emit(`optionEnv:${option.name()}`, value);
      }
    }
  }
}
if (typeof (Command.prototype as unknown as Record<string, unknown>)._parseOptionsEnv !== 'function') {
  throw new Error('commander no longer has Command._parseOptionsEnv: lib/cli.ts parseArgs cannot read the environment it is given; update EnvCommand');
}

/**
 * Parses argv (without node and the script) with env standing for process.env,
 * without exiting: a bad value or --help throws a CommanderError (exitCode says
 * how to exit) after commander wrote its message to output (default: stdout/stderr).
 */
export function parseArgs(define: (cmd: Command) => Command, argv: readonly string[], env: Env, output?: OutputConfiguration): Args {
  const cmd = new EnvCommand();
  cmd.env = env;
  define(cmd).exitOverride();
  if (output) cmd.configureOutput(output);
  cmd.parse([...argv], { from: 'user' });
  const values = cmd.opts();
  const options = new Map(cmd.options.map((o) => [o.attributeName(), o]));
  const option = (key: string) => {
    const o = options.get(key);
    if (!o) throw new Error(`no option ${key}`);
    return o;
  };
  return {
    values,
    given: (key) => {
      option(key);
      const source = cmd.getOptionValueSource(key);
      return source === 'cli' || source === 'env';
    },
    named: (key) => {
      const o = option(key);
      return cmd.getOptionValueSource(key) === 'env' ? `${o.long} (from ${o.envVar})` : String(o.long);
    },
  };
}

/**
 * Ends the process on SIGINT/SIGTERM after stop() resolves, or after
 * forceAfterMs (default 10 s) regardless; a second signal ends it at once
 * (Ctrl-C twice skips the gateway's drain).
 */
export function stopOnSignals(stop: () => Promise<void>, log: { info(o: object, m: string): void }, forceAfterMs = 10_000): void {
  let stopping = false;
  const handler = (signal: NodeJS.Signals) => {
    if (stopping) process.exit(1);
    stopping = true;
    log.info({ signal }, 'shutting down (a second signal stops at once)');
    setTimeout(() => process.exit(1), forceAfterMs).unref();
    stop().then(
      () => process.exit(0),
      () => process.exit(1),
    );
  };
  process.on('SIGINT', handler);
  process.on('SIGTERM', handler);
}
