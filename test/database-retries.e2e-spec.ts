import { NestExpressApplication } from '@nestjs/platform-express';
import { DatabaseError } from 'pg';
import { Database } from '../src/database/database';
import { QueryFailedError } from '../src/database/query-failed-error';
import { DatabaseEngine } from '../src/database/database-engine';
import { MetricsService } from '../src/metrics/metrics.service';
import { PushService } from '../src/push/push.service';
import { ParkedPolls } from '../src/wakeup/parked-polls';
import { UnitOfWork } from '../src/database/unit-of-work';
import { Writes } from '../src/wakeup/writes';
import { BrokerClient } from './support/broker-client';
import { sql } from './support/db-state';
import { createTestApp, newTenant } from './support/test-app';

/** What PostgreSQL answers a statement whose transaction it gave up: the transaction is rolled back. */
function rolledBack(code: '40P01' | '40001'): QueryFailedError {
  const error = new DatabaseError(code === '40P01' ? 'deadlock detected' : 'could not serialize access', 0, 'error');
  error.code = code;
  return new QueryFailedError('UPDATE partitions ...', [], error);
}

/**
 * Every write is one unit of work (Writes.run); one that fails with a deadlock or a serialization failure is rolled
 * back and run again whole, within the request's bound. No statement of the broker's raises 40001 at READ COMMITTED
 * (PostgreSQL's default and the broker's), so the failures here are injected; the fault suite makes both for real.
 */
describe('a unit of work rolled back as a deadlock or a serialization failure', () => {
  let app: NestExpressApplication;

  beforeAll(async () => {
    // The bound B: 500 + 1000 + 1000 ms.
    app = await createTestApp({ DB_ACQUIRE_TIMEOUT_MS: '500', DB_STATEMENT_TIMEOUT_MS: '1000' });
  });

  afterAll(async () => {
    await app.close();
  });

  async function retries(sqlstate: string): Promise<number> {
    const { values } = await app.get(MetricsService).databaseRetries.get();
    return values.find((value) => value.labels.sqlstate === sqlstate)?.value ?? 0;
  }

  async function stored(tenant: string): Promise<Array<{ id: string; transaction_id: string }>> {
    return sql(app.get(Database), 'SELECT id, transaction_id FROM messages WHERE tenant_id = $1', [tenant]);
  }

  const item = { queue: 'retried', partition: 'p', payloadJson: '{}', transactionId: 'once', traceId: undefined };

  it('runs it again from the start: the attempt rolled back stored and published nothing, the next commits once', async () => {
    const tenant = newTenant();
    const published = jest.spyOn(app.get(ParkedPolls), 'pushed');
    const effects: number[] = [];
    let attempts = 0;
    const before = await retries('40001');
    try {
      const [answer] = await app.get(Writes).run(tenant, async (unit) => {
        attempts += 1;
        const attempt = attempts;
        // Its message ids are minted inside the attempt; the first attempt's message is written, then rolled back.
        const pushed = await app.get(PushService).store(unit, null, [item]);
        unit.afterCommit(() => effects.push(attempt));
        if (attempt === 1) throw rolledBack('40001');
        return pushed;
      });

      expect(attempts).toBe(2);
      // Not a duplicate of the first attempt's message: that one never existed.
      expect(answer.status).toBe('queued');
      expect(await stored(tenant)).toEqual([{ id: answer.message_id, transaction_id: 'once' }]);
      expect(effects).toEqual([2]);
      expect(published.mock.calls.filter(([who]) => who === tenant)).toHaveLength(1);
      expect(await retries('40001')).toBe(before + 1);
    } finally {
      published.mockRestore();
    }
  });

  it('a pop whose claim was rolled back claims again under the lease id it minted, and delivers once', async () => {
    const client = new BrokerClient(app, newTenant());
    await client.pushMany('popped', 2, 'p');
    const commitWith = UnitOfWork.prototype.commitWith;
    let rolledBackClaims = 0;
    const claim = jest.spyOn(UnitOfWork.prototype, 'commitWith').mockImplementation(function (
      this: UnitOfWork,
      ...args
    ) {
      if (this.tenantId === client.tenant && rolledBackClaims === 0) {
        rolledBackClaims += 1;
        return Promise.reject(rolledBack('40P01'));
      }
      return commitWith.apply(this, args);
    });
    try {
      const popped = await client.popLeased('popped', { batch: 10 });
      expect(rolledBackClaims).toBe(1);
      expect(popped.messages.map((message) => message.deliveryAttempt)).toEqual([1, 1]);
      // The lease it answered is the one the database holds: nothing was released for the attempt that failed.
      const extended = await client.extend(popped.leaseId!).expect(200);
      expect(extended.body).toMatchObject({ success: true, renewed: 1 });
      await client.ackAll(popped).expect(200);
      await client.pop('popped').expect(204);
    } finally {
      claim.mockRestore();
    }
  });

  it('runs a renewal statement that PostgreSQL rolled back again, and the extend renews', async () => {
    const client = new BrokerClient(app, newTenant());
    await client.pushMany('renewed', 1, 'p');
    const popped = await client.popLeased('renewed');
    const engine = app.get(DatabaseEngine);
    const runWhole = engine.runWhole.bind(engine);
    let rolledBackRenewals = 0;
    const renewal = jest.spyOn(engine, 'runWhole').mockImplementation((connection, statement) => {
      if (rolledBackRenewals === 0) {
        rolledBackRenewals += 1;
        return Promise.reject(rolledBack('40001'));
      }
      return runWhole(connection, statement);
    });
    const before = await retries('40001');
    try {
      const extended = await client.extend(popped.leaseId!).expect(200);
      expect(extended.body).toMatchObject({ success: true, renewed: 1 });
      expect(rolledBackRenewals).toBe(1);
      expect(await retries('40001')).toBe(before + 1);
    } finally {
      renewal.mockRestore();
    }
  });

  it('answers the failure as it is once three attempts failed', async () => {
    const tenant = newTenant();
    let attempts = 0;
    const before = await retries('40P01');
    const failure = rolledBack('40P01');
    await expect(
      app.get(Writes).run(tenant, async (unit) => {
        attempts += 1;
        await app.get(PushService).store(unit, null, [item]);
        throw failure;
      }),
    ).rejects.toBe(failure);
    expect(attempts).toBe(3);
    expect(await retries('40P01')).toBe(before + 2);
    expect(await stored(tenant)).toEqual([]);
  });

  it('does not run it again when less than a second of its bound is left', async () => {
    const tenant = newTenant();
    let attempts = 0;
    const failure = rolledBack('40P01');
    await expect(
      app.get(Writes).run(tenant, async () => {
        attempts += 1;
        // 1.6 s of the 2.5 s bound gone: a retry could not finish within what is left.
        await new Promise((resolve) => setTimeout(resolve, 1_600));
        throw failure;
      }),
    ).rejects.toBe(failure);
    expect(attempts).toBe(1);
  });

  it('never runs again a unit of work that failed otherwise', async () => {
    let attempts = 0;
    const failure = new QueryFailedError('INSERT', [], Object.assign(new Error('duplicate key'), { code: '23505' }));
    await expect(
      app.get(Writes).run(newTenant(), () => {
        attempts += 1;
        return Promise.reject(failure);
      }),
    ).rejects.toBe(failure);
    expect(attempts).toBe(1);
  });
});
