import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { NestExpressApplication } from '@nestjs/platform-express';
import { Database } from '../src/database/database';
import { Reencryption } from '../src/encryption/reencryption';
import { BrokerClient } from './support/broker-client';
import { sql } from './support/db-state';
import { KEY_1, KEY_2, TEST_KEY_ID } from './support/encryption-keys';
import { ScratchDatabase } from './support/scratch-database';
import { createTestApp, newTenant, onEmbeddedDatabase } from './support/test-app';
import { useTestBroker } from './support/test-broker';

jest.setTimeout(300_000);

/** What a payload carries so that its plaintext can be looked for in the tables. */
const MARKER = 'plaintext-marker-7c1f';
/** Sent as text: keys out of order and a number jsonb would rewrite, so the answer must be the text sent. */
const SENT = `{"z":"${MARKER}","a":1.50,"nested":[1,{"k":"v"}]}`;

const stored = (dataSource: Database, tenant: string) =>
  sql<Array<{ transaction_id: string; payload: string; key_id: string | null; payload_bytes: number; size: number }>>(
    dataSource,
    `SELECT transaction_id, payload::text AS payload, key_id, payload_bytes, octet_length(payload::text) AS size
       FROM messages WHERE tenant_id = $1 ORDER BY partition_id, seq`,
    [tenant],
  );

async function pushText(client: BrokerClient, queue: string, transactionId: string, payload = SENT): Promise<void> {
  const response = await client.postText(
    '/api/v1/push',
    `{"items":[{"queue":"${queue}","transactionId":"${transactionId}","payload":${payload}}]}`,
  );
  expect(response.status).toBe(201);
  expect(response.body[0].status).toBe('queued');
}

describe('encryption at rest', () => {
  const broker = useTestBroker();

  async function encrypted(queue: string, options: Record<string, unknown> = {}): Promise<void> {
    const response = await broker.client.configure({ queue, options: { encryptionEnabled: true, ...options } });
    expect(response.status).toBe(200);
    expect(response.body.options.encryptionEnabled).toBe(true);
  }

  it('round-trips push, pop and ack on an encrypted queue, answering the payload as its text was sent', async () => {
    await encrypted('secret');
    await pushText(broker.client, 'secret', 'm-1');

    const pop = await broker.client.pop('secret', { batch: 10 });

    expect(pop.status).toBe(200);
    expect(pop.text).toContain(`"data":${SENT}`);
    expect(pop.body.messages[0]).not.toHaveProperty('error');
    await broker.client.ackAll(pop.body).expect(200);
    await broker.client.pop('secret').expect(204);
  });

  it('stores no plaintext: the row holds sealed text under the key id, its size counted as stored', async () => {
    await encrypted('secret');
    await pushText(broker.client, 'secret', 'm-1');

    const [row] = await stored(broker.dataSource, broker.client.tenant);

    expect(row.payload).not.toContain(MARKER);
    expect(row.payload).toMatch(/^"[A-Za-z0-9+/]+=*"$/);
    expect(row.key_id).toBe(TEST_KEY_ID);
    expect(row.payload_bytes).toBe(row.size);
    const keys = await sql(broker.dataSource, 'SELECT key_id FROM tenant_encryption_keys WHERE tenant_id = $1', [
      broker.client.tenant,
    ]);
    expect(keys).toEqual([{ key_id: TEST_KEY_ID }]);
    // The quota counts what is stored, larger than what was sent.
    expect(row.size).toBeGreaterThan(SENT.length);
    const [usage] = await sql<Array<{ bytes: string }>>(
      broker.dataSource,
      'SELECT COALESCE(sum(stored_bytes), 0)::text AS bytes FROM tenant_usage WHERE tenant_id = $1',
      [broker.client.tenant],
    );
    expect(Number(usage.bytes)).toBe(row.size);
  });

  it('encrypts the pushes of a transaction, and answers the message listing and detail decrypted', async () => {
    await encrypted('secret');
    const response = await broker.client.postText(
      '/api/v1/transaction',
      `{"operations":[{"type":"push","items":[{"queue":"secret","transactionId":"t-1","payload":${SENT}}]}]}`,
    );
    expect(response.status).toBe(200);

    const [row] = await stored(broker.dataSource, broker.client.tenant);
    expect(row.payload).not.toContain(MARKER);
    expect(row.key_id).toBe(TEST_KEY_ID);
    const listing = await broker.client.get('/api/v1/messages', { queue: 'secret' }).expect(200);
    expect(listing.text).toContain(`"data":${SENT}`);
    const partitionId = listing.body.messages[0].partitionId as string;
    const detail = await broker.client.get(`/api/v1/messages/${partitionId}/t-1`).expect(200);
    expect(detail.text).toContain(`"data":${SENT}`);
  });

  it('keeps dead letters sealed, answers them decrypted, and a retried one is sealed again', async () => {
    await encrypted('secret', { retryLimit: 0 });
    await pushText(broker.client, 'secret', 'm-1');
    const pop = await broker.client.popLeased('secret');
    await broker.client.ackAll(pop, 'failed').expect(200);

    const letters = await sql<Array<{ payload: string; key_id: string }>>(
      broker.dataSource,
      'SELECT payload::text AS payload, key_id FROM dead_letters WHERE tenant_id = $1',
      [broker.client.tenant],
    );
    expect(letters).toHaveLength(1);
    expect(letters[0].payload).not.toContain(MARKER);
    expect(letters[0].key_id).toBe(TEST_KEY_ID);
    const listing = await broker.client.get('/api/v1/dlq', { queue: 'secret' }).expect(200);
    expect(listing.text).toContain(`"data":${SENT}`);

    await broker.client.post(`/api/v1/messages/${pop.messages[0].partitionId}/m-1/retry`).expect(200);
    const again = await stored(broker.dataSource, broker.client.tenant);
    expect(again.map((row) => [row.transaction_id, row.key_id])).toEqual([
      ['m-1', TEST_KEY_ID],
      ['dlq:m-1', TEST_KEY_ID],
    ]);
    expect(again[1].payload).not.toContain(MARKER);
    expect((await broker.client.pop('secret', { batch: 10 })).text).toContain(`"data":${SENT}`);
  });

  it('answers an altered payload as data null with an error, and the rest of the batch as usual', async () => {
    await encrypted('secret');
    await pushText(broker.client, 'secret', 'm-1');
    await pushText(broker.client, 'secret', 'm-2');
    // One bit of the ciphertext flipped: GCM's tag no longer matches.
    await sql(
      broker.dataSource,
      `UPDATE messages SET payload = to_json(translate(payload #>> '{}', 'ABCabc', 'BCAbca'))
        WHERE tenant_id = $1 AND transaction_id = 'm-1'`,
      [broker.client.tenant],
    );

    const pop = await broker.client.pop('secret', { batch: 10 });

    expect(pop.status).toBe(200);
    expect(pop.body.messages).toHaveLength(2);
    expect(pop.body.messages[0]).toMatchObject({
      transactionId: 'm-1',
      data: null,
      error: `payload cannot be decrypted: it does not authenticate under key ${TEST_KEY_ID}`,
    });
    expect(pop.text).toContain(`"data":${SENT}`);
    expect(pop.body.messages[1]).not.toHaveProperty('error');
    const listing = await broker.client.get('/api/v1/messages', { queue: 'secret' }).expect(200);
    expect(listing.body.messages.map((message: { error?: string }) => message.error !== undefined).sort()).toEqual([
      false,
      true,
    ]);
  });

  it('applies a change of encryptionEnabled to new messages only; the older ones still decrypt', async () => {
    await encrypted('secret');
    await pushText(broker.client, 'secret', 'sealed');
    const off = await broker.client.configure({ queue: 'secret', options: { encryptionEnabled: false } });
    expect(off.body.options).toEqual({ encryptionEnabled: false });
    await pushText(broker.client, 'secret', 'plain');

    const rows = await stored(broker.dataSource, broker.client.tenant);
    expect(rows.map((row) => [row.transaction_id, row.key_id])).toEqual([
      ['sealed', TEST_KEY_ID],
      ['plain', null],
    ]);
    expect(rows[1].payload).toBe(SENT);
    const pop = await broker.client.pop('secret', { batch: 10 });
    expect(pop.body.messages.map((message: { data: unknown }) => message.data)).toEqual([
      JSON.parse(SENT),
      JSON.parse(SENT),
    ]);
  });

  it('lists the option only for a queue that has it on', async () => {
    await encrypted('secret');
    await broker.client.configure({ queue: 'plain', options: { leaseTime: 30 } }).expect(200);

    const listing = await broker.client.get('/api/v1/resources/queues').expect(200);

    const options = Object.fromEntries(
      listing.body.queues.map((queue: { name: string; options: object }) => [queue.name, queue.options]),
    );
    expect(options.secret).toMatchObject({ encryptionEnabled: true });
    expect(options.plain).not.toHaveProperty('encryptionEnabled');
  });
});

/**
 * Keys are the deployment's: these start brokers with keys of their own on a database of their own, a scratch
 * database on PostgreSQL, an embedded one in a folder of its own otherwise.
 */
describe('encryption keys across restarts', () => {
  let env: Record<string, string | undefined>;
  let drop: () => Promise<void>;
  let open: NestExpressApplication | undefined;
  const tenant = newTenant();

  beforeAll(async () => {
    if (onEmbeddedDatabase) {
      const dir = mkdtempSync(join(tmpdir(), 'leasehold-encryption-'));
      env = { DATABASE_URL: undefined, DATA_DIR: dir };
      drop = async () => rmSync(dir, { recursive: true, force: true });
    } else {
      const scratch = await ScratchDatabase.create('leasehold_encryption');
      env = { DATABASE_URL: scratch.url };
      drop = () => scratch.drop();
    }
  });

  afterEach(async () => {
    await open?.close();
    open = undefined;
  });

  afterAll(async () => {
    await drop();
  });

  async function start(keys: Record<string, string | undefined>): Promise<BrokerClient> {
    open = await createTestApp({ ...env, ENCRYPTION_KEYS: undefined, ...keys });
    return new BrokerClient(open, tenant);
  }

  /** The start-up's error; the app it began is closed. */
  async function failedStart(keys: Record<string, string | undefined>): Promise<string> {
    let begun: NestExpressApplication | undefined;
    try {
      await createTestApp({ ...env, ENCRYPTION_KEYS: undefined, ...keys }, {}, (app) => (begun = app));
    } catch (error) {
      return (error as Error).message;
    } finally {
      await begun?.close();
    }
    throw new Error('the broker started');
  }

  const keyIds = async () =>
    (
      await sql<Array<{ key_id: string }>>(open!.get(Database), 'SELECT key_id FROM tenant_encryption_keys ORDER BY 1')
    ).map((row) => row.key_id);
  const rowKeys = async (table: 'messages' | 'dead_letters') =>
    (
      await sql<Array<{ transaction_id: string; key_id: string }>>(
        open!.get(Database),
        `SELECT transaction_id, key_id FROM ${table} WHERE tenant_id = $1 ORDER BY transaction_id`,
        [tenant],
      )
    ).map((row) => `${row.transaction_id}:${row.key_id}`);

  it('step 1: answers 400 to encryptionEnabled true on a broker without a key, naming the setting', async () => {
    const client = await start({});

    const response = await client.configure({ queue: 'secret', options: { encryptionEnabled: true } });

    expect(response.status).toBe(400);
    expect(response.body).toEqual({
      error:
        'options.encryptionEnabled needs an encryption key on the broker: set ENCRYPTION_KEYS (or QUEEN_ENCRYPTION_KEY)',
    });
  });

  it('step 2: seals under k1, with Queen\'s QUEEN_ENCRYPTION_KEY format accepted as key "default" beside it', async () => {
    const client = await start({ ENCRYPTION_KEYS: `k1:${KEY_1}`, QUEEN_ENCRYPTION_KEY: KEY_2 });
    await client.configure({ queue: 'secret', options: { encryptionEnabled: true, retryLimit: 0 } }).expect(200);
    for (const id of ['a', 'b', 'c', 'd']) await pushText(client, 'secret', id);
    // One of them dead-lettered: dead letters move with the messages.
    const pop = await client.popLeased('secret', { batch: 1 });
    await client.ackAll(pop, 'failed').expect(200);

    expect(await rowKeys('messages')).toEqual(['a:k1', 'b:k1', 'c:k1', 'd:k1']);
    expect(await rowKeys('dead_letters')).toEqual(['a:k1']);
    expect(await keyIds()).toEqual(['k1']);
  });

  it('step 3: refuses to start without a key, and without a key stored payloads use, naming them', async () => {
    expect(await failedStart({})).toContain(
      'queue "secret" has encryptionEnabled but no encryption key is configured: set ENCRYPTION_KEYS',
    );
    expect(await failedStart({ ENCRYPTION_KEYS: `k2:${KEY_2}` })).toContain(
      'stored payloads are encrypted under key k1, which ENCRYPTION_KEYS does not hold',
    );
  });

  it('step 4: with k2 first and k1 kept, reads every message, seals new ones under k2', async () => {
    const client = await start({ ENCRYPTION_KEYS: `k2:${KEY_2},k1:${KEY_1}` });
    await pushText(client, 'secret', 'e');

    expect(await rowKeys('messages')).toEqual(['a:k1', 'b:k1', 'c:k1', 'd:k1', 'e:k2']);
    const pop = await client.popLeased('secret', { batch: 2 });
    expect(pop.messages.map((message) => message.data)).toEqual([JSON.parse(SENT), JSON.parse(SENT)]);
    expect(await keyIds()).toEqual(['k1', 'k2']);
  });

  it('step 5: the re-encryption moves every k1 row to k2 in batches, then retires k1', async () => {
    await start({ ENCRYPTION_KEYS: `k2:${KEY_2},k1:${KEY_1}` });

    const report = await open!.get(Reencryption).run(2);

    expect(report).toEqual({
      keyId: 'k2',
      messages: 4,
      deadLetters: 1,
      left: 0,
      retired: [{ tenantId: tenant, keyId: 'k1' }],
    });
    expect(await rowKeys('messages')).toEqual(['a:k2', 'b:k2', 'c:k2', 'd:k2', 'e:k2']);
    expect(await rowKeys('dead_letters')).toEqual(['a:k2']);
    expect(await keyIds()).toEqual(['k2']);
  });

  it('step 6: starts with k2 alone and answers every message and dead letter as sent', async () => {
    const client = await start({ ENCRYPTION_KEYS: `k2:${KEY_2}` });

    // A group of its own reads from the start: a stays stored for groups that did not dead-letter it.
    const pop = await client.pop('secret', { batch: 10, consumerGroup: 'late' }).expect(200);
    expect(pop.body.messages.map((message: { transactionId: string }) => message.transactionId)).toEqual([
      'a',
      'b',
      'c',
      'd',
      'e',
    ]);
    for (const message of pop.body.messages) expect(message.data).toEqual(JSON.parse(SENT));
    const letters = await client.get('/api/v1/dlq', { queue: 'secret' }).expect(200);
    expect(letters.text).toContain(`"data":${SENT}`);
  });
});
