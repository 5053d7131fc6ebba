// Structured logs: one pino logger per process, JSON lines by default (LOG_FORMAT=json), coloured human lines with
// LOG_FORMAT=pretty (pino-pretty, in-process: no worker thread). pino was chosen because it is the maintained,
// fast JSON logger of the Node ecosystem with child loggers and a pretty printer; nothing here formats by hand.
//
// Fields every line carries: level (a label), time (ISO 8601), service ('gateway' | 'model-service'), msg.
// Request lines (src/gateway/observers/request-line.ts) add request_id, workspace, key_prefix, endpoint, status, ... .
import pino, { type DestinationStream, type Logger } from 'pino';
import type { prettyFactory as PrettyFactory } from 'pino-pretty';
import type { Config } from '../config';

export type { Logger };

export interface LoggerOptions {
  format: Config['logFormat'];
  level: Config['logLevel'];
  /** Which process writes the line: 'gateway' (npm start) or 'model-service' (npm run model-service). */
  service: string;
  /** Where lines go (tests, compatibility with `log(line)` callbacks); default stdout. */
  destination?: DestinationStream;
}

export function createLogger(opts: LoggerOptions): Logger {
  const base = { service: opts.service };
  if (opts.format === 'pretty') {
    // pino-pretty's formatter applied line by line in this thread (no transport worker), onto stdout or the
    // given destination.
    const out: DestinationStream = opts.destination ?? process.stdout;
    // Loaded here: JSON lines (the default) do without it, ~50 ms of CPU at every process start.
    const { prettyFactory } = require('pino-pretty') as { prettyFactory: typeof PrettyFactory };
    const prettify = prettyFactory({
      colorize: !opts.destination && !!process.stdout.isTTY,
      translateTime: 'SYS:standard',
      ignore: 'pid,hostname,service',
    });
    return pino({ level: opts.level, base }, { write: (line: string) => out.write(prettify(line)) });
  }
  return pino(
    {
      level: opts.level,
      base,
      timestamp: pino.stdTimeFunctions.isoTime,
      formatters: { level: (label) => ({ level: label }) },
    },
    opts.destination ?? pino.destination({ dest: 1, sync: true }),
  );
}

/** A logger from the config (LOG_FORMAT, LOG_LEVEL). */
export function loggerFromConfig(config: Pick<Config, 'logFormat' | 'logLevel'>, service: string): Logger {
  return createLogger({ format: config.logFormat, level: config.logLevel, service });
}

/** A logger whose lines go to a `(line) => void` callback (what older callers and tests pass as `log`). */
export function loggerToCallback(log: (line: string) => void, service: string, level: Config['logLevel'] = 'info'): Logger {
  return createLogger({
    format: 'json',
    level,
    service,
    destination: { write: (chunk: string) => log(chunk.replace(/\n$/, '')) },
  });
}

/** The error fields a log line carries for `err` (pino's serializer: type, message, stack). */
export function errorFields(err: unknown): { err: unknown } {
  return { err: err instanceof Error ? err : new Error(String(err)) };
}

/**
 * The end of a process's shutdown: logs "stopped" with how long it took, then exits 0 when `work` settled cleanly and
 * 1 when it failed (the gateway and the standalone model service end the same way).
 */
export function exitWhenStopped(logger: Logger, signal: string, began: number, work: Promise<void>): void {
  work.then(
    () => {
      logger.info({ event: 'stopped', signal, shutdown_ms: Date.now() - began }, 'shut down cleanly');
      process.exit(0);
    },
    (err: unknown) => {
      logger.error({ event: 'stopped', signal, err }, 'error during shutdown');
      process.exit(1);
    },
  );
}
