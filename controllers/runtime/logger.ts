// JSON logs (winston), one object per line on stdout. Callers put the check, cluster and Machine in the
// metadata of every line; nothing from a Secret is ever passed in.
import winston from 'winston';

const LEVELS = ['error', 'warn', 'info', 'debug'] as const;

export function makeLogger(level = 'info'): winston.Logger {
  if (!(LEVELS as readonly string[]).includes(level)) {
    throw new Error(`--log-level: ${JSON.stringify(level)} is not one of ${LEVELS.join(', ')}`);
  }
  return winston.createLogger({
    level,
    format: winston.format.combine(winston.format.timestamp(), winston.format.json()),
    defaultMeta: { logger: 'joinguard' },
    transports: [new winston.transports.Console()],
  });
}

/** A logger that drops everything (tests that do not want the noise). */
export function silentLogger(): winston.Logger {
  return winston.createLogger({ silent: true, transports: [new winston.transports.Console({ silent: true })] });
}
