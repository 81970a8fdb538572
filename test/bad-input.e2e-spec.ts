import { NestExpressApplication } from '@nestjs/platform-express';
import request from 'supertest';
import { Database } from '../src/database/database';
import { BrokerClient, PopBody } from './support/broker-client';
import { tenantSnapshot } from './support/db-state';
import { createTestApp, newTenant } from './support/test-app';

const LONG_NAME = 'q'.repeat(256);

/**
 * Bad input on every message route: a clear 4xx in the contract's shape,
 * never a 500, and not a single stored row changed. One tenant holds a
 * queue with a live lease, so there is something a wrong request could move.
 */
describe('bad input on the message routes', () => {
  let app: NestExpressApplication;
  let dataSource: Database;
  let client: BrokerClient;
  let lease: PopBody;

  beforeAll(async () => {
    app = await createTestApp();
    dataSource = app.get(Database);
    client = new BrokerClient(app, newTenant());
    await client.configure({ queue: 'orders', options: { retryLimit: 0 } });
    await client.pushMany('orders', 3);
    lease = (await client.pop('orders', { batch: 2 })).body;
  });

  afterAll(async () => {
    await app.close();
  });

  async function expectRefused(call: request.Test, status: number, error: string): Promise<void> {
    const before = await tenantSnapshot(dataSource, client.tenant);

    const response = await call;

    expect(response.status).toBe(status);
    expect(response.body).toEqual({ error });
    expect(await tenantSnapshot(dataSource, client.tenant)).toEqual(before);
  }

  describe('GET /api/v1/pop/queue/:queue', () => {
    it.each([
      ['batch', '0', 'batch must be an integer between 1 and 10000'],
      ['batch', '-1', 'batch must be an integer between 1 and 10000'],
      ['batch', '1.5', 'batch must be an integer between 1 and 10000'],
      ['batch', '1e3', 'batch must be an integer between 1 and 10000'],
      ['batch', 'ten', 'batch must be an integer between 1 and 10000'],
      ['batch', '', 'batch must be an integer between 1 and 10000'],
      ['batch', '10001', 'batch must be an integer between 1 and 10000'],
      ['batch', '99999999999999999999999', 'batch must be an integer between 1 and 10000'],
      ['partitions', '0', 'partitions must be an integer between 1 and 1000'],
      ['partitions', '1001', 'partitions must be an integer between 1 and 1000'],
      ['wait', 'yes', 'wait must be true or false'],
      ['timeout', '-1', 'timeout must be an integer between 0 and 600000'],
      ['timeout', '600001', 'timeout must be an integer between 0 and 600000'],
      ['leaseSeconds', '0', 'leaseSeconds must be an integer between 1 and 2147483647'],
      ['leaseSeconds', '2147483648', 'leaseSeconds must be an integer between 1 and 2147483647'],
      ['consumerGroup', '', 'consumerGroup must be 1 to 255 characters long'],
      ['consumerGroup', LONG_NAME, 'consumerGroup must be 1 to 255 characters long'],
      ['consumerGroup', 'a\tb', 'consumerGroup must not contain control characters'],
      ['subscriptionMode', 'sometimes', 'subscriptionMode must be one of all, from_beginning, new, new-only, now'],
      [
        'subscriptionFrom',
        'yesterday',
        'subscriptionFrom must be now or an ISO-8601 timestamp such as 2026-07-30T11:06:44.512873Z',
      ],
      [
        'subscriptionFrom',
        '2026-02-30T00:00:00Z',
        'subscriptionFrom must be now or an ISO-8601 timestamp such as 2026-07-30T11:06:44.512873Z',
      ],
      [
        'subscriptionFrom',
        '2026-01-01T25:00:00Z',
        'subscriptionFrom must be now or an ISO-8601 timestamp such as 2026-07-30T11:06:44.512873Z',
      ],
      [
        'subscriptionFrom',
        '2026-07-30T11:06:44+16:00',
        'subscriptionFrom must be now or an ISO-8601 timestamp such as 2026-07-30T11:06:44.512873Z',
      ],
      [
        'subscriptionFrom',
        '2026-07-30T11:06:44-23:59',
        'subscriptionFrom must be now or an ISO-8601 timestamp such as 2026-07-30T11:06:44.512873Z',
      ],
      ['autoAck', 'maybe', 'autoAck must be true or false'],
    ])('answers 400 for %s=%p', async (name, value, error) => {
      await expectRefused(client.pop('orders', { [name]: value }), 400, error);
    });

    it('answers 400 for a parameter given twice', async () => {
      await expectRefused(
        client.pop('orders').query('batch=1&batch=2'),
        400,
        'batch must be an integer between 1 and 10000',
      );
    });

    it.each([
      [
        'a queue name of 256 characters',
        `/api/v1/pop/queue/${LONG_NAME}`,
        400,
        'queue must be 1 to 255 characters long',
      ],
      [
        'a queue name with a NUL character',
        '/api/v1/pop/queue/a%00b',
        400,
        'queue must not contain control characters',
      ],
      [
        'a partition name with a newline',
        '/api/v1/pop/queue/orders/partition/a%0Ab',
        400,
        'partition must not contain control characters',
      ],
    ])('answers %s with the right 4xx', async (_case, path, status, error) => {
      await expectRefused(client.get(path), status, error);
    });
  });

  describe('POST /api/v1/ack and /api/v1/ack/batch', () => {
    const valid = () => ({
      transactionId: lease.messages[0].transactionId,
      partitionId: lease.partitionId,
      leaseId: lease.leaseId,
      status: 'failed',
    });

    it.each([
      ['no body', undefined, 'request body must be a JSON object'],
      ['an array body', [{}], 'request body must be a JSON object'],
      ['a missing transactionId', { transactionId: undefined }, 'transactionId is required'],
      ['a numeric transactionId', { transactionId: 1 }, 'transactionId must be a string'],
      ['a missing partitionId', { partitionId: undefined }, 'partitionId is required'],
      ['a partitionId that is not a UUID', { partitionId: 'partition-1' }, 'partitionId must be a UUID'],
      [
        'an almost-UUID partitionId',
        { partitionId: `${'0'.repeat(8)}-0000-0000-0000-0000000000000` },
        'partitionId must be a UUID',
      ],
      ['a leaseId that is not a UUID', { leaseId: 'not-a-lease' }, 'leaseId must be a UUID'],
      ['a numeric leaseId', { leaseId: 42 }, 'leaseId must be a UUID'],
      ['a numeric status', { status: 1 }, 'status must be a string'],
      ['an empty consumerGroup', { consumerGroup: '' }, 'consumerGroup must be 1 to 255 characters long'],
      ['an object error', { error: { message: 'x' } }, 'error must be a string'],
    ])('/ack answers 400 for %s', async (_case, override, error) => {
      const body =
        override === undefined ? undefined : Array.isArray(override) ? override : { ...valid(), ...override };
      await expectRefused(client.post('/api/v1/ack', body), 400, error);
    });

    it.each([
      ['no acknowledgments', {}, 'acknowledgments must be an array'],
      ['acknowledgments as an object', { acknowledgments: {} }, 'acknowledgments must be an array'],
      ['a non-object acknowledgment', { acknowledgments: ['x'] }, 'acknowledgments[0] must be a JSON object'],
      ['a numeric batch consumerGroup', { consumerGroup: 7, acknowledgments: [] }, 'consumerGroup must be a string'],
      [
        'more than 10000 acknowledgments',
        { acknowledgments: Array(10_001).fill({}) },
        'acknowledgments may hold at most 10000 items',
      ],
    ])('/ack/batch answers 400 for %s', async (_case, body, error) => {
      await expectRefused(client.post('/api/v1/ack/batch', body), 400, error);
    });

    it('/ack/batch refuses the whole batch, valid items included, when a later item is malformed', async () => {
      await expectRefused(
        client.post('/api/v1/ack/batch', { acknowledgments: [valid(), { ...valid(), partitionId: 'bad' }] }),
        400,
        'acknowledgments[1].partitionId must be a UUID',
      );
    });

    it('answers 400 "invalid JSON body" for malformed JSON', async () => {
      await expectRefused(
        client.post('/api/v1/ack').set('content-type', 'application/json').send('{"transactionId":'),
        400,
        'invalid JSON body',
      );
    });

    it('answers 200 with success false, not an error status, for a well-formed ack of an unknown partition', async () => {
      const before = await tenantSnapshot(dataSource, client.tenant);

      const response = await client.ack({ ...valid(), partitionId: '0198f2c1-9a7b-7d20-8e31-4c5d6e7f8a90' });

      expect(response.status).toBe(200);
      expect(response.body[0]).toMatchObject({ success: false, error: 'partition not found' });
      expect(await tenantSnapshot(dataSource, client.tenant)).toEqual(before);
    });
  });

  describe('POST /api/v1/configure', () => {
    it.each([
      ['no body', undefined, 'request body must be a JSON object'],
      ['a missing queue', { options: {} }, 'queue is required'],
      ['a queue name of 256 characters', { queue: LONG_NAME }, 'queue must be 1 to 255 characters long'],
      ['options as an array', { queue: 'orders', options: [] }, 'options must be a JSON object'],
      [
        'leaseTime 0',
        { queue: 'orders', options: { leaseTime: 0 } },
        'options.leaseTime must be an integer between 1 and 2147483647',
      ],
      [
        'leaseTime 1.5',
        { queue: 'orders', options: { leaseTime: 1.5 } },
        'options.leaseTime must be an integer between 1 and 2147483647',
      ],
      [
        'leaseTime as a string',
        { queue: 'orders', options: { leaseTime: '60' } },
        'options.leaseTime must be an integer between 1 and 2147483647',
      ],
      [
        'leaseTime null',
        { queue: 'orders', options: { leaseTime: null } },
        'options.leaseTime must be an integer between 1 and 2147483647',
      ],
      [
        'leaseTime 2^31',
        { queue: 'orders', options: { leaseTime: 2 ** 31 } },
        'options.leaseTime must be an integer between 1 and 2147483647',
      ],
      [
        'retryLimit -1',
        { queue: 'orders', options: { retryLimit: -1 } },
        'options.retryLimit must be an integer between 0 and 2147483647',
      ],
      [
        'deadLetterQueue "yes"',
        { queue: 'orders', options: { deadLetterQueue: 'yes' } },
        'options.deadLetterQueue must be true or false',
      ],
      [
        'an unknown option holding \\u0000',
        { queue: 'orders', options: { note: 'a\u0000' } },
        'options.note is not a supported option',
      ],
      [
        'an unknown option named with \\u0000',
        { queue: 'orders', options: { 'n\u0000': 1 } },
        'options contain an option name that is not supported',
      ],
    ])('answers 400 for %s', async (_case, body, error) => {
      await expectRefused(client.post('/api/v1/configure', body), 400, error);
    });

    it('answers 400 for a new queue with a bad option and does not create it', async () => {
      await expectRefused(
        client.post('/api/v1/configure', { queue: 'fresh', options: { retryLimit: 'x' } }),
        400,
        'options.retryLimit must be an integer between 0 and 2147483647',
      );
    });
  });

  describe('resources and dlq', () => {
    it.each([
      [
        'GET a queue name of 256 characters',
        () => client.get(`/api/v1/resources/queues/${LONG_NAME}`),
        400,
        'queue must be 1 to 255 characters long',
      ],
      ['GET an unknown queue', () => client.get('/api/v1/resources/queues/unknown'), 404, 'queue not found'],
      [
        'DELETE a queue name with a control character',
        () => client.delete('/api/v1/resources/queues/a%01b'),
        400,
        'queue must not contain control characters',
      ],
      [
        'dlq limit 0',
        () => client.get('/api/v1/dlq', { limit: 0 }),
        400,
        'limit must be an integer between 1 and 1000',
      ],
      [
        'dlq limit 1001',
        () => client.get('/api/v1/dlq', { limit: 1001 }),
        400,
        'limit must be an integer between 1 and 1000',
      ],
      [
        'dlq offset -1',
        () => client.get('/api/v1/dlq', { offset: -1 }),
        400,
        'offset must be an integer between 0 and 2147483647',
      ],
      [
        'dlq offset beyond int32',
        () => client.get('/api/v1/dlq', { offset: '2147483648' }),
        400,
        'offset must be an integer between 0 and 2147483647',
      ],
      [
        'dlq with an empty queue',
        () => client.get('/api/v1/dlq', { queue: '' }),
        400,
        'queue must be 1 to 255 characters long',
      ],
      ['dlq of an unknown queue', () => client.get('/api/v1/dlq', { queue: 'unknown' }), 404, 'queue not found'],
    ])('%s answers the right 4xx', async (_case, call, status, error) => {
      await expectRefused(call(), status, error);
    });
  });

  describe('error texts are fixed, never what the caller sent', () => {
    const hostile = `evil<b>${'x'.repeat(3000)}`;

    it.each([
      ['an unknown path', () => request(app.getHttpServer()).get(`/api/v1/${hostile}`), 404, 'not found'],
      ['an unknown method', () => request(app.getHttpServer()).put(`/api/v1/push?${hostile}`), 404, 'not found'],
      [
        'an unsupported content-encoding',
        () =>
          request(app.getHttpServer())
            .post('/api/v1/push')
            .set('content-type', 'application/json')
            .set('content-encoding', hostile)
            .send('{"items":[]}'),
        415,
        'unsupported content-encoding: send identity, gzip, deflate or br',
      ],
    ])('%s answers a fixed text', async (_case, call, status, error) => {
      const response = await call();
      expect(response.status).toBe(status);
      expect(response.body).toEqual({ error });
      expect(response.text).not.toContain('evil');
    });
  });

  describe('body size', () => {
    it('answers 413 "payload too large" to a push above BODY_LIMIT and stores nothing', async () => {
      const small = await createTestApp({ BODY_LIMIT: '1kb' });
      try {
        const smallClient = new BrokerClient(small, client.tenant);
        await expectRefused(
          smallClient.push([{ queue: 'orders', payload: 'x'.repeat(4096) }]),
          413,
          'payload too large',
        );
      } finally {
        await small.close();
      }
    });

    it.each([
      ['a push', '/api/v1/push'],
      ['an ack', '/api/v1/ack'],
      ['an ack batch', '/api/v1/ack/batch'],
      ['a configure', '/api/v1/configure'],
    ])('answers 413 "payload too large" to %s above BODY_LIMIT whatever its content-type', async (_case, path) => {
      const small = await createTestApp({ BODY_LIMIT: '1kb' });
      try {
        const smallClient = new BrokerClient(small, client.tenant);
        const body = JSON.stringify({ items: [{ queue: 'orders', payload: 'x'.repeat(4096) }] });
        for (const type of ['text/plain', 'application/octet-stream', 'application/x-www-form-urlencoded']) {
          await expectRefused(smallClient.post(path).set('content-type', type).send(body), 413, 'payload too large');
        }
      } finally {
        await small.close();
      }
    });
  });
});
