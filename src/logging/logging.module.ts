import { Global, Module } from '@nestjs/common';
import { APP_CONFIG, AppConfig } from '../config/app-config';
import { rootLogger, ROOT_LOGGER } from './root-logger';

@Global()
@Module({
  providers: [
    { provide: ROOT_LOGGER, inject: [APP_CONFIG], useFactory: (config: AppConfig) => rootLogger(config.log) },
  ],
  exports: [ROOT_LOGGER],
})
export class LoggingModule {}
