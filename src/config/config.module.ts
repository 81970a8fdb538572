import { Global, Module } from '@nestjs/common';
import { ConfigModule as NestConfigModule } from '@nestjs/config';
import { APP_CONFIG } from './app-config';
import { loadConfig } from './load-config';

@Global()
@Module({
  // @nestjs/config only loads .env into the environment; loadConfig validates it.
  imports: [NestConfigModule.forRoot({ isGlobal: false, ignoreEnvFile: false, cache: true })],
  providers: [{ provide: APP_CONFIG, useFactory: () => loadConfig() }],
  exports: [APP_CONFIG],
})
export class ConfigModule {}
