import { NestExpressApplication } from '@nestjs/platform-express';
import { Database } from '../src/database/database';
import { BrokerClient, PopBody } from './support/broker-client';
import { sql } from './support/db-state';
import { createTestApp, newTenant } from './support/test-app';

const RESPONSE_MAX_BYTES = 4 * 1024 * 1024;

/** Answers that would be too large to build: fewer entries, never a failure. */
describe('answers bounded in bytes (RESPONSE_MAX_BYTES=4mb)', () => {
  let app: NestExpressApplication;
  let client: BrokerClient;

  beforeAll(async () => {
    app = await createTestApp({ RESPONSE_MAX_BYTES: '4mb', BODY_LIMIT: '16mb', RATE_LIMIT_MANAGE: '0' });
  });

  afterAll(async () => {
    await app.close();
  });

  beforeEach(() => {
    client = new BrokerClient(app, newTenant());
  });

  /** Twenty messages of about 900 KB in one partition, pushed in four requests. */
  async function pushLargeMessages(queue: string): Promise<string[]> {
    const ids: string[] = [];
    for (let request = 0; request < 4; request += 1) {
      const items = Array.from({ length: 5 }, (_, index) => {
        const n = request * 5 + index;
        ids.push(`large-${n}`);
        return { queue, payload: { n, filler: 'x'.repeat(900 * 1024) }, transactionId: `large-${n}` };
      });
      const response = await client.push(items);
      expect(response.status).toBe(201);
    }
    return ids;
  }

  it('hands out fewer messages than batch when they would not fit, in order, and the rest on the next pops', async () => {
    const ids = await pushLargeMessages('large');
    const delivered: string[] = [];
    const sizes: number[] = [];

    while (delivered.length < ids.length) {
      const response = await client.pop('large', { batch: 20 });
      expect(response.status).toBe(200);
      const body = response.body as PopBody;
      sizes.push(Buffer.byteLength(response.text));
      delivered.push(...body.messages.map((message) => message.transactionId));
      expect((await client.ackAll(body)).status).toBe(200);
    }

    expect(delivered).toEqual(ids);
    expect(Math.max(...sizes)).toBeLessThanOrEqual(RESPONSE_MAX_BYTES);
    // About four 900 KB messages fit in 4 MiB: the twenty take several pops, not twenty.
    expect(sizes.length).toBeGreaterThanOrEqual(5);
    expect(sizes.length).toBeLessThanOrEqual(7);
  });

  it('still hands out a single message larger than the budget on its own (one stored before the bound was lowered)', async () => {
    await client.push([{ queue: 'one', payload: 'x'.repeat(200 * 1024), transactionId: 'big' }]).expect(201);
    const small = await createTestApp({ RESPONSE_MAX_BYTES: '64kb' });
    try {
      const smallClient = new BrokerClient(small, client.tenant);

      const response = await smallClient.pop('one', { batch: 10 });
      expect(response.status).toBe(200);
      expect(response.body.messages.map((message: { transactionId: string }) => message.transactionId)).toEqual([
        'big',
      ]);
    } finally {
      await small.close();
    }
  });

  it('pages the dead-letter queue short of limit when the page would not fit', async () => {
    const ids = await pushLargeMessages('dead');
    while (true) {
      const response = await client.pop('dead', { batch: 20 });
      if (response.status === 204) break;
      const body = response.body as PopBody;
      await client.ackBatch({
        acknowledgments: body.messages.map(({ transactionId, partitionId }) => ({
          transactionId,
          partitionId,
          leaseId: body.leaseId,
          status: 'dlq',
        })),
      });
    }

    const first = await client.get('/api/v1/dlq', { queue: 'dead', limit: 20 });
    expect(first.status).toBe(200);
    expect(first.body.total).toBe(20);
    expect(first.body.messages.length).toBeGreaterThan(0);
    expect(first.body.messages.length).toBeLessThan(20);
    expect(Buffer.byteLength(first.text)).toBeLessThanOrEqual(RESPONSE_MAX_BYTES);

    const seen: string[] = [];
    for (let offset = 0; offset < 20;) {
      const page = await client.get('/api/v1/dlq', { queue: 'dead', limit: 20, offset });
      seen.push(...page.body.messages.map((message: { transactionId: string }) => message.transactionId));
      offset += page.body.messages.length;
    }
    expect(seen).toEqual(ids);
  });

  it('lists queues with large options short of limit, and the rest after the name it gives as next', async () => {
    // Options stored before the broker refused the ones it does not implement are still listed.
    const note = 'n'.repeat(60 * 1024);
    const names = Array.from({ length: 100 }, (_, index) => `q${String(index).padStart(3, '0')}`);
    for (const queue of names) await client.configure({ queue });
    await sql(
      app.get(Database),
      `UPDATE queues SET options = jsonb_build_object('note', $2::text) WHERE tenant_id = $1`,
      [client.tenant, note],
    );

    const listed: string[] = [];
    let after: string | undefined;
    let pages = 0;
    do {
      const page = await client.get('/api/v1/resources/queues', after === undefined ? {} : { after });
      expect(Buffer.byteLength(page.text)).toBeLessThanOrEqual(RESPONSE_MAX_BYTES);
      listed.push(...page.body.queues.map((queue: { name: string }) => queue.name));
      after = page.body.next ?? undefined;
      pages += 1;
    } while (after !== undefined);

    expect(listed).toEqual(names);
    expect(pages).toBeGreaterThan(1);
  });

  it("lists a queue's first 100 partitions by default and 1000 at most, says so, and counts lag over all", async () => {
    const items = Array.from({ length: 1_005 }, (_, index) => ({
      queue: 'wide',
      partition: `p${String(index).padStart(4, '0')}`,
      payload: index,
    }));
    expect((await client.push(items)).status).toBe(201);
    await client.pop('wide');

    const first = await client.get('/api/v1/resources/queues/wide');
    const detail = await client.get('/api/v1/resources/queues/wide', { limit: 1_000 });

    expect(first.body.partitions).toHaveLength(100);
    expect(first.body.partitionsNext).toBe('p0099');
    expect(first.body.consumerGroups[0].lag).toBe(1_005);
    expect(detail.body.partitionCount).toBe(1_005);
    expect(detail.body.partitions).toHaveLength(1_000);
    expect(detail.body.partitionsTruncated).toBe(true);
    const [group] = detail.body.consumerGroups;
    expect(group.partitions).toHaveLength(1_000);
    expect(group.lag).toBe(1_005);
    expect(group.liveLeases).toBe(1);
  });

  it('refuses a large option it does not support by a short error that does not echo it', async () => {
    const response = await client.configure({ queue: 'noisy', options: { ['n'.repeat(70 * 1024)]: 1 } });

    expect([response.status, response.body]).toEqual([
      400,
      { error: 'options contain an option name that is not supported' },
    ]);
  });
});
