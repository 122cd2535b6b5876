#!/usr/bin/env node
// oversell-gateway: ingests agent streams, serves the nodes/status and pod webhooks and the query API.
// The flags are in config/flags.ts, what they mean together in config/config.ts.
import { CommanderError } from 'commander';
import { stopOnSignals } from '../lib/cli.js';
import { createLogger } from '../lib/log.js';
import { ConfigError, loadConfig } from './config/config.js';
import type { GatewayConfig } from './config/types.js';
import { startFromConfig } from './start.js';

let config: GatewayConfig;
try {
  config = loadConfig(process.argv.slice(2), process.env);
} catch (err) {
  // Commander wrote its error or the help already; exit as it would have.
  if (err instanceof CommanderError) process.exit(err.exitCode);
  // A refused value or combination: said the way every start failure is.
  createLogger('oversell-gateway', err instanceof ConfigError ? err.logLevel : 'info').fatal({ err: (err as Error).message }, 'gateway cannot start');
  process.exit(2);
}
const log = createLogger('oversell-gateway', config.logLevel);
try {
  const started = await startFromConfig(config, log);
  // The drain, then 10 s to close: inside the pod's default 30 s grace period (--shutdown-drain is at most 20 s).
  stopOnSignals(() => started.stop(), log, config.shutdownDrainMs + 10_000);
} catch (err) {
  log.fatal({ err: (err as Error).message }, 'gateway cannot start');
  process.exit(2);
}
