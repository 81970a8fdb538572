import { randomUUID } from 'node:crypto';
import { NestExpressApplication } from '@nestjs/platform-express';
import { Test } from '@nestjs/testing';
import { AppModule } from '../../src/app.module';
import { APP_CONFIG } from '../../src/config/app-config';
import { loadConfig } from '../../src/config/load-config';
import { LeaseholdHttpAdapter } from '../../src/http/http-adapter';
import { APP_OPTIONS, setupApp, SetupOptions } from '../../src/setup-app';

export const TENANT_HEADER = 'x-queen-tenant';

/** True when the run uses the embedded PGlite, which executes one transaction at a time. */
export const onEmbeddedDatabase = process.env.LEASEHOLD_TEST_EMBEDDED === '1';

/**
 * Boots the real AppModule exactly as main.ts does, with configuration
 * overrides. The trusted tenant header is on by default so each test file
 * can isolate itself in a fresh tenant instead of truncating tables.
 */
export async function createTestApp(
  env: Record<string, string | undefined> = {},
  setup: SetupOptions = {},
  beforeInit: (app: NestExpressApplication) => void = () => undefined,
): Promise<NestExpressApplication> {
  // A JSON line per request would bury a failing test's output; the log tests run a broker process of their own.
  // The retention job works across tenants: tests that want it turn it on (RETENTION_INTERVAL_MS) or call it.
  // Test files share one database: registered, their apps would divide each other's limits (BROKER_HEARTBEAT_MS).
  const config = loadConfig({
    TENANT_HEADER,
    DB_POOL_SIZE: '4',
    LOG_REQUESTS: 'false',
    RETENTION_INTERVAL_MS: '0',
    BROKER_HEARTBEAT_MS: '0',
    ...process.env,
    ...env,
  });
  const moduleRef = await Test.createTestingModule({ imports: [AppModule] })
    .overrideProvider(APP_CONFIG)
    .useValue(config)
    .compile();
  const app = moduleRef.createNestApplication<NestExpressApplication>(
    new LeaseholdHttpAdapter(config.http, config.tenantHeader),
    {
      ...APP_OPTIONS,
      logger: ['error'],
    },
  );
  setupApp(app, setup);
  beforeInit(app);
  try {
    await app.init();
  } catch (error) {
    // A start refused (e.g. a fast route that cannot be served) leaves pools and timers open otherwise.
    await app.close().catch(() => undefined);
    throw error;
  }
  return app;
}

export function newTenant(): string {
  return randomUUID();
}
