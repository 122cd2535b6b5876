// One JSON logger for every binary (the same pino fastify uses), so a line from
// the webhook and one from the gRPC ingest look alike in the cluster's log store.
import { pino, type Logger as PinoLogger, type LevelWithSilent } from 'pino';

export type Logger = PinoLogger;

export function createLogger(name: string, level: LevelWithSilent | string = 'info'): Logger {
  return pino({ name, level, base: { component: name }, timestamp: pino.stdTimeFunctions.isoTime });
}
