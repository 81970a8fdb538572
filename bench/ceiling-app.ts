import 'reflect-metadata';
import { Controller, HttpCode, Logger, Module, Param, Post } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { NestExpressApplication } from '@nestjs/platform-express';

/**
 * The framework's ceiling: a bare NestJS 11 express app whose route has the
 * lease route's method and path and answers a fixed JSON body, with no
 * database, guard or pipe. Whatever the broker loses against this is ours.
 */
@Controller('api/v1/lease')
class CeilingController {
  @Post(':leaseId/extend')
  @HttpCode(200)
  extend(@Param('leaseId') leaseId: string): Record<string, unknown> {
    const expiry = '2026-07-30T11:06:44.512873Z';
    return { leaseId, success: true, renewed: 1, newExpiresAt: expiry, expiresAt: expiry, lease_expires_at: expiry };
  }
}

@Module({ controllers: [CeilingController] })
class CeilingModule {}

async function main(): Promise<void> {
  const app = await NestFactory.create<NestExpressApplication>(CeilingModule, { logger: ['error'] });
  await app.listen(Number(process.argv[2] ?? 6701), '127.0.0.1');
  new Logger('Ceiling').log('ready');
}

void main();
