import { Global, Module } from '@nestjs/common';
import { APP_CONFIG } from './app-config';
import { loadEnvFile } from './env-file';
import { loadConfig } from './load-config';

@Global()
@Module({
  providers: [
    {
      provide: APP_CONFIG,
      useFactory: () => {
        loadEnvFile();
        return loadConfig();
      },
    },
  ],
  exports: [APP_CONFIG],
})
export class ConfigModule {}
