import { NestExpressApplication } from '@nestjs/platform-express';
import { Database } from '../../src/database/database';
import { BrokerClient } from './broker-client';
import { createTestApp, newTenant } from './test-app';

export interface TestBroker {
  readonly app: NestExpressApplication;
  readonly dataSource: Database;
  /** A client of a tenant of its own, new for every test. */
  readonly client: BrokerClient;
}

/**
 * One broker for the enclosing describe block, closed after it, and a fresh
 * tenant's client before each test, so tests isolate by tenant instead of
 * truncating tables. Read the fields inside hooks and tests: they are set
 * once the block starts.
 */
export function useTestBroker(env: Record<string, string> = {}): TestBroker {
  const broker = {} as { app: NestExpressApplication; dataSource: Database; client: BrokerClient };

  beforeAll(async () => {
    broker.app = await createTestApp(env);
    broker.dataSource = broker.app.get(Database);
  });

  afterAll(async () => {
    await broker.app.close();
  });

  beforeEach(() => {
    broker.client = new BrokerClient(broker.app, newTenant());
  });

  return broker;
}
