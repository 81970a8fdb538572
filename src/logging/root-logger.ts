import { LoggerService } from '@nestjs/common';
import { DestinationStream, Logger as Pino, pino } from 'pino';
import { LogConfig } from '../config/app-config';

export type RootLogger = Pino;

export const ROOT_LOGGER = Symbol('ROOT_LOGGER');

type Level = 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace';

/** Nest's start-up inventory (a line per module and route): detail for debugging, not the operator's log. */
const INVENTORY_CONTEXTS = new Set(['InstanceLoader', 'RoutesResolver', 'RouterExplorer']);

const roots = new Map<string, RootLogger>();

/** One per setting, so that main.ts and the application share it. */
export function rootLogger(log: Pick<LogConfig, 'level' | 'format'>): RootLogger {
  const key = `${log.level}\n${log.format}`;
  let root = roots.get(key);
  if (!root) {
    root = createRootLogger(log);
    roots.set(key, root);
  }
  return root;
}

function createRootLogger(log: Pick<LogConfig, 'level' | 'format'>): RootLogger {
  return pino(
    {
      level: log.level,
      base: { service: 'leasehold', pid: process.pid },
      ...(log.format === 'pretty'
        ? { transport: { target: 'pino-pretty', options: { singleLine: true, translateTime: 'SYS:HH:MM:ss.l' } } }
        : {}),
    },
    log.format === 'pretty' ? undefined : stdoutInBlocks(),
  );
}

/** A write per line cost a tenth of a renewal's CPU; buffers, as one string was re-measured per appended line. */
function stdoutInBlocks(): DestinationStream {
  const blocks = pino.destination({ dest: 1, sync: false, minLength: 4096, periodicFlush: 250, contentMode: 'buffer' });
  return {
    write: (line: string) => blocks.write(Buffer.from(line) as unknown as string),
    flush: (done?: (error?: Error) => void) => blocks.flush(done),
  } as DestinationStream;
}

/** Nest passes the context last, and a stack before it on errors. */
export class PinoLoggerService implements LoggerService {
  constructor(readonly root: RootLogger) {}

  log(message: unknown, ...rest: unknown[]): void {
    this.write('info', message, rest);
  }

  error(message: unknown, ...rest: unknown[]): void {
    this.write('error', message, rest);
  }

  warn(message: unknown, ...rest: unknown[]): void {
    this.write('warn', message, rest);
  }

  debug(message: unknown, ...rest: unknown[]): void {
    this.write('debug', message, rest);
  }

  verbose(message: unknown, ...rest: unknown[]): void {
    this.write('trace', message, rest);
  }

  fatal(message: unknown, ...rest: unknown[]): void {
    this.write('fatal', message, rest);
  }

  private write(given: Level, message: unknown, rest: unknown[]): void {
    const context = rest.length > 0 && typeof rest.at(-1) === 'string' ? (rest.at(-1) as string) : undefined;
    const level = given === 'info' && context !== undefined && INVENTORY_CONTEXTS.has(context) ? 'debug' : given;
    if (!this.root.isLevelEnabled(level)) return;
    const stack = rest.length > 1 && typeof rest[0] === 'string' ? rest[0] : undefined;
    if (message instanceof Error) {
      this.root[level]({ context, err: message }, message.message);
    } else if (typeof message === 'object' && message !== null) {
      this.root[level]({ context, ...message });
    } else {
      this.root[level]({ context, ...(stack ? { stack } : {}) }, String(message));
    }
  }
}
