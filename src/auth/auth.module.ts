import { Module } from '@nestjs/common';
import { APP_GUARD, Reflector } from '@nestjs/core';
import { PassportModule } from '@nestjs/passport';
import { ThrottlerModule } from '@nestjs/throttler';
import { BrokerRegistry } from '../cluster/broker-registry';
import { APP_CONFIG, AppConfig } from '../config/app-config';
import { FixedWindowThrottlerStorage } from '../limits/fixed-window.storage';
import { RATE_WINDOW_MS } from '../limits/route-class.decorator';
import { TenantThrottlerGuard } from '../limits/tenant-throttler.guard';
import { AccessGuard } from './access.guard';
import { JwtStrategy } from './jwt.strategy';
import { TokenVerifier } from './token-verifier';
import { WhoAmIController } from './whoami.controller';

const reflector = new Reflector();

@Module({
  imports: [
    PassportModule.register({ session: false }),
    ThrottlerModule.forRootAsync({
      inject: [APP_CONFIG, BrokerRegistry, FixedWindowThrottlerStorage],
      useFactory: (config: AppConfig, brokers: BrokerRegistry, storage: FixedWindowThrottlerStorage) => ({
        throttlers: [
          {
            name: 'default',
            ttl: RATE_WINDOW_MS,
            // The limits are the deployment's: this process counts its share of them.
            limit: (context) => {
              const limit = TenantThrottlerGuard.limitOf(reflector, config.limits.rateLimits, context);
              return limit === undefined ? Number.MAX_SAFE_INTEGER : brokers.share(limit);
            },
          },
        ],
        // Shared with TenantRates, which counts what a request carries beyond itself.
        storage,
        setHeaders: false,
      }),
    }),
  ],
  controllers: [WhoAmIController],
  // Global guards run in this order: who the caller is (and its tenant), then its tenant's rate.
  providers: [
    TokenVerifier,
    JwtStrategy,
    { provide: APP_GUARD, useClass: AccessGuard },
    { provide: APP_GUARD, useClass: TenantThrottlerGuard },
  ],
})
export class AuthModule {}
