import { Module } from '@nestjs/common';
import { LoggerModule } from 'nestjs-pino';
import { APP_CONFIG, AppConfig } from '../config/app-config';
import { ConfigModule } from '../config/config.module';

/**
 * Structured logs through nestjs-pino: everything the application logs with
 * Nest's Logger goes out as one JSON object per line (coloured lines with
 * LOG_FORMAT=pretty), at LOG_LEVEL. The per-request line (request-log.ts)
 * is written by the middleware setupApp mounts ahead of every route, so
 * that the lease route, served ahead of the router, is logged too; the
 * pino-http middleware nestjs-pino mounts on the router logs nothing itself.
 */
@Module({
  imports: [
    LoggerModule.forRootAsync({
      imports: [ConfigModule],
      inject: [APP_CONFIG],
      useFactory: (config: AppConfig) => ({
        pinoHttp: {
          level: config.log.level,
          autoLogging: false,
          quietReqLogger: true,
          customAttributeKeys: { reqId: 'requestId' },
          base: { service: 'leasehold', pid: process.pid },
          ...(config.log.format === 'pretty'
            ? { transport: { target: 'pino-pretty', options: { singleLine: true, translateTime: 'SYS:HH:MM:ss.l' } } }
            : {}),
        },
      }),
    }),
  ],
})
export class LoggingModule {}
