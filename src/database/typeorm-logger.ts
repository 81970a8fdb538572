import { Logger as NestLogger } from '@nestjs/common';
import { Logger as TypeOrmLoggerContract } from 'typeorm';

/** Failed queries are logged without their parameters: those carry payloads and tenant ids. */
export class TypeOrmLogger implements TypeOrmLoggerContract {
  private readonly logger = new NestLogger('Database');

  logQuery(): void {}

  logQueryError(error: string | Error, query: string): void {
    const message = error instanceof Error ? error.message : error;
    this.logger.warn(`${message} in: ${query.replace(/\s+/g, ' ').trim().slice(0, 200)}`);
  }

  logQuerySlow(time: number, query: string): void {
    this.logger.warn(`slow query (${time} ms): ${query.replace(/\s+/g, ' ').trim().slice(0, 200)}`);
  }

  logSchemaBuild(): void {}

  logMigration(message: string): void {
    this.logger.log(message);
  }

  log(level: 'log' | 'info' | 'warn', message: unknown): void {
    if (level === 'warn') this.logger.warn(String(message));
  }
}
