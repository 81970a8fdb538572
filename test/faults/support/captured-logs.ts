import { LoggerService } from '@nestjs/common';

export interface LogEntry {
  level: 'log' | 'error' | 'warn' | 'debug' | 'verbose' | 'fatal';
  message: string;
  context?: string;
  trace?: string;
}

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

  at(level: LogEntry['level']): LogEntry[] {
    return this.entries.filter((entry) => entry.level === level);
  }
}
