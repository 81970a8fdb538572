import { NestExpressApplication } from '@nestjs/platform-express';
import { PopRepository } from '../src/pop/pop.repository';
import { ParkedPolls } from '../src/wakeup/parked-polls';
import { BrokerClient } from './support/broker-client';
import { cursors, storedCounts } from './support/db-state';
import { createTestApp, newTenant, onEmbeddedDatabase } from './support/test-app';
import { useTestBroker } from './support/test-broker';
import { waitFor, within } from './support/wait';

const MAINTENANCE = '/api/v1/system/maintenance';

describe('maintenance', () => {
  const broker = useTestBroker();

  describe('pushes paused', () => {
    it('refuses pushes and transactions that push with 503 and Retry-After, storing nothing; the rest goes on', async () => {
      const { client, dataSource } = broker;
      await client.pushMany('work', 2);
      const lease = await client.popLeased('work', { batch: 1 });

      const on = await client.post(MAINTENANCE, { enabled: true }).expect(200);
      expect(on.body).toEqual({ maintenanceMode: true, popMaintenanceMode: false });
      expect((await client.get(MAINTENANCE)).body).toEqual({ maintenanceMode: true, popMaintenanceMode: false });
      const before = await storedCounts(dataSource, client.tenant);

      const push = await client.push([{ queue: 'work', payload: 'during' }]);
      expect([push.status, push.body, push.headers['retry-after']]).toEqual([
        503,
        { error: 'maintenance: pushes are paused' },
        '5',
      ]);
      const transaction = await client.post('/api/v1/transaction', {
        operations: [{ type: 'push', items: [{ queue: 'work', payload: 'during' }] }],
      });
      expect([transaction.status, transaction.body]).toEqual([503, { error: 'maintenance: pushes are paused' }]);
      expect(await storedCounts(dataSource, client.tenant)).toEqual(before);

      expect((await client.extend(lease.leaseId!, 60)).body).toMatchObject({ renewed: 1 });
      await client.ackAll(lease).expect(200);
      expect((await client.popLeased('work')).messages).toHaveLength(1);

      await client.post(MAINTENANCE, { enabled: false }).expect(200);
      expect((await client.push([{ queue: 'work', payload: 'after' }])).status).toBe(201);
    });
  });

  describe('pops paused', () => {
    it('answers pops 204 without claiming, while acks and extends go on', async () => {
      const { client, dataSource } = broker;
      await client.pushMany('held', 3);
      const lease = await client.popLeased('held', { batch: 1 });

      const on = await client.post(`${MAINTENANCE}/pop`, { enabled: true }).expect(200);
      expect(on.body).toEqual({ maintenanceMode: false, popMaintenanceMode: true });
      expect((await client.get(`${MAINTENANCE}/pop`)).body.popMaintenanceMode).toBe(true);
      const before = await cursors(dataSource, client.tenant, 'held');

      await client.pop('held', { consumerGroup: 'other' }).expect(204);
      await client.pop('held').expect(204);
      expect(await cursors(dataSource, client.tenant, 'held')).toEqual(before);
      expect((await client.push([{ queue: 'held', payload: 'still' }])).status).toBe(201);
      expect((await client.extend(lease.leaseId!, 60)).body).toMatchObject({ renewed: 1 });
      expect((await client.ackAll(lease).expect(200)).body[0]).toMatchObject({ success: true });

      await client.post(`${MAINTENANCE}/pop`, { enabled: false }).expect(200);
      expect((await client.popLeased('held', { batch: 10 })).messages).toHaveLength(3);
    });

    it('keeps a long poll waiting while paused, and lets it claim once pops resume', async () => {
      const { client, app } = broker;
      await client.pushMany('resume', 1);
      await client.post(`${MAINTENANCE}/pop`, { enabled: true }).expect(200);
      const claims = jest.spyOn(app.get(PopRepository), 'claim');
      const poll = client.pop('resume', { wait: true, timeout: 30_000 }).then((response) => response);
      await waitFor(
        () => app.get(ParkedPolls).parkedCount(client.tenant, 'resume', '__QUEUE_MODE__') === 1,
        'the poll waits',
      );
      expect(claims).not.toHaveBeenCalled();
      claims.mockRestore();

      await client.post(`${MAINTENANCE}/pop`, { enabled: false }).expect(200);

      const answer = await within(poll, 'the poll claims once pops resume', 15_000);
      expect(answer.status).toBe(200);
      expect(answer.body.messages).toHaveLength(1);
    });
  });

  it("is the tenant's own: another tenant's pushes and pops go on", async () => {
    const { client, app } = broker;
    const other = new BrokerClient(app, newTenant());
    await client.post(MAINTENANCE, { enabled: true }).expect(200);
    await client.post(`${MAINTENANCE}/pop`, { enabled: true }).expect(200);

    expect((await other.get(MAINTENANCE)).body).toEqual({ maintenanceMode: false, popMaintenanceMode: false });
    await other.pushMany('free', 1);
    expect((await other.popLeased('free')).messages).toHaveLength(1);
  });

  it.each([[{}], [{ enabled: 'yes' }], [{ enabled: 1 }], [[]]])(
    'refuses %j with 400 and changes nothing',
    async (body) => {
      const { client } = broker;
      for (const path of [MAINTENANCE, `${MAINTENANCE}/pop`]) {
        const answer = await client.post(path, body);
        expect([answer.status, answer.body.error]).toEqual([
          400,
          Array.isArray(body) ? 'request body must be a JSON object' : 'enabled must be true or false',
        ]);
      }
      expect((await client.get(MAINTENANCE)).body).toEqual({ maintenanceMode: false, popMaintenanceMode: false });
    },
  );

  // The embedded database serves one broker process.
  (onEmbeddedDatabase ? describe.skip : describe)('across broker processes on one database', () => {
    let second: NestExpressApplication;

    beforeAll(async () => {
      second = await createTestApp({});
    });

    afterAll(async () => {
      await second.close();
    });

    it('is honoured by every broker within seconds, both ways', async () => {
      const { client } = broker;
      const elsewhere = new BrokerClient(second, client.tenant);
      await elsewhere.pushMany('shared', 1);

      await client.post(MAINTENANCE, { enabled: true }).expect(200);
      await client.post(`${MAINTENANCE}/pop`, { enabled: true }).expect(200);
      await waitFor(
        async () => (await elsewhere.push([{ queue: 'shared', payload: 1 }])).status === 503,
        'the other broker refuses pushes',
      );
      await elsewhere.pop('shared').expect(204);

      await client.post(MAINTENANCE, { enabled: false }).expect(200);
      await client.post(`${MAINTENANCE}/pop`, { enabled: false }).expect(200);
      await waitFor(async () => (await elsewhere.pop('shared')).status === 200, 'the other broker hands out again');
      expect((await elsewhere.push([{ queue: 'shared', payload: 2 }])).status).toBe(201);
    });
  });
});
