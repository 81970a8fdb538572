import { LoggerService } from '@nestjs/common';
import type { RootLogger } from '../../../src/logging/root-logger';

export interface LogEntry {
  level: 'log' | 'error' | 'warn' | 'debug' | 'verbose' | 'fatal';
  message: string;
  context?: string;
  trace?: string;
  /** A request line's status. */
  status?: number;
}

type PinoLevel = 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace';
const AS_NEST: Record<PinoLevel, LogEntry['level']> = {
  fatal: 'fatal',
  error: 'error',
  warn: 'warn',
  info: 'log',
  debug: 'debug',
  trace: 'verbose',
};

/** Keeps what the broker logs, so a test can say that a fault was logged as a warning and nothing as an error. */
export class CapturedLogs implements LoggerService {
  readonly entries: LogEntry[] = [];

  log(message: unknown, context?: string): void {
    this.entries.push({ level: 'log', message: String(message), context });
  }

  error(message: unknown, trace?: string, context?: string): void {
    this.entries.push({ level: 'error', message: String(message), trace, context });
  }

  warn(message: unknown, context?: string): void {
    this.entries.push({ level: 'warn', message: String(message), context });
  }

  debug(message: unknown, context?: string): void {
    this.entries.push({ level: 'debug', message: String(message), context });
  }

  verbose(message: unknown, context?: string): void {
    this.entries.push({ level: 'verbose', message: String(message), context });
  }

  fatal(message: unknown, context?: string): void {
    this.entries.push({ level: 'fatal', message: String(message), context });
  }

  /**
   * Keeps the request lines too (LOG_REQUESTS), which the broker writes to its root logger, not through Nest's: with
   * context `request`. Returns what puts the root logger back.
   */
  captureRequests(root: RootLogger): () => void {
    const spies = (Object.keys(AS_NEST) as PinoLevel[]).map((level) =>
      jest.spyOn(root, level).mockImplementation(((line: { status?: number }, message?: string) => {
        this.entries.push({ level: AS_NEST[level], message: String(message), context: 'request', status: line.status });
      }) as never),
    );
    return () => spies.forEach((spy) => spy.mockRestore());
  }

  at(level: LogEntry['level']): LogEntry[] {
    return this.entries.filter((entry) => entry.level === level);
  }
}
