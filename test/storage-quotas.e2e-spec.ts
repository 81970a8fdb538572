import { Database } from '../src/database/database';
import { MetricsService } from '../src/metrics/metrics.service';
import { RetentionService } from '../src/retention/retention.service';
import { BrokerClient, PopBody } from './support/broker-client';
import { ageMessages, sql, tenantSnapshot } from './support/db-state';
import { newTenant, onEmbeddedDatabase } from './support/test-app';
import { TestBroker, useTestBroker } from './support/test-broker';
import { waitFor } from './support/wait';

const MESSAGES_REFUSAL = {
  error: 'quota exceeded: a tenant may store at most 5 messages (TENANT_MAX_STORED_MESSAGES)',
};
const BYTES_REFUSAL = {
  error: 'quota exceeded: a tenant may store at most 100 payload bytes (TENANT_MAX_STORED_BYTES)',
};

/** What the tenant's counters say, and what its rows hold. */
async function usage(dataSource: Database, tenant: string) {
  const [row] = await sql(
    dataSource,
    `SELECT (SELECT COALESCE(sum(stored_messages), 0)::int FROM tenant_usage WHERE tenant_id = $1) AS counted_messages,
            (SELECT COALESCE(sum(stored_bytes), 0)::int FROM tenant_usage WHERE tenant_id = $1) AS counted_bytes,
            (SELECT count(*)::int FROM messages WHERE tenant_id = $1)
              + (SELECT count(*)::int FROM dead_letters WHERE tenant_id = $1) AS messages,
            (SELECT COALESCE(sum(payload_bytes), 0)::int FROM messages WHERE tenant_id = $1)
              + (SELECT COALESCE(sum(payload_bytes), 0)::int FROM dead_letters WHERE tenant_id = $1) AS bytes`,
    [tenant],
  );
  return row as { counted_messages: number; counted_bytes: number; messages: number; bytes: number };
}

function refusalsOf(broker: TestBroker) {
  return async (quota: string): Promise<number> => {
    const { values } = await broker.app.get(MetricsService).quotaRefusals.get();
    return values.find((value) => value.labels.quota === quota)?.value ?? 0;
  };
}

const items = (queue: string, count: number, partition = 'Default', prefix = queue) =>
  Array.from({ length: count }, (_, n) => ({ queue, partition, payload: { n }, transactionId: `${prefix}-${n}` }));

/** The (partitionId, transactionId) of the tenant's message. */
async function messageKey(dataSource: Database, tenant: string, transactionId: string): Promise<string> {
  const [row] = await sql(
    dataSource,
    'SELECT partition_id FROM messages WHERE tenant_id = $1 AND transaction_id = $2',
    [tenant, transactionId],
  );
  return `${row.partition_id}/${transactionId}`;
}

describe('the stored messages quota', () => {
  const broker = useTestBroker({ TENANT_MAX_STORED_MESSAGES: '5', TENANT_MAX_STORED_BYTES: '0' });
  const refusals = refusalsOf(broker);

  it('refuses a push past it whole with 403 naming TENANT_MAX_STORED_MESSAGES, stores nothing of it and counts it', async () => {
    const { client, dataSource } = broker;
    await client.push(items('a', 4)).expect(201);
    const before = await tenantSnapshot(dataSource, client.tenant);
    const counted = await refusals('TENANT_MAX_STORED_MESSAGES');

    await client.push([...items('a', 1, 'Default', 'late'), ...items('b', 1)]).expect(403, MESSAGES_REFUSAL);

    expect(await tenantSnapshot(dataSource, client.tenant)).toEqual(before);
    expect(await refusals('TENANT_MAX_STORED_MESSAGES')).toBe(counted + 1);
    await client.push(items('b', 1)).expect(201);
    await client.push(items('b', 1, 'Default', 'more')).expect(403, MESSAGES_REFUSAL);
    expect(await usage(dataSource, client.tenant)).toEqual({
      counted_messages: 5,
      counted_bytes: 35,
      messages: 5,
      bytes: 35,
    });
    // A push whose items are all stored already stores nothing more, so it is not refused.
    const again = await client.push(items('a', 2)).expect(201);
    expect(again.body.map((result: { status: string }) => result.status)).toEqual(['duplicate', 'duplicate']);
  });

  it('makes room again as messages go: deleted, cleared, by retention, or with their queue', async () => {
    const { client, dataSource } = broker;
    await client.push(items('q', 5)).expect(201);
    await client.push(items('q', 1, 'Default', 'extra')).expect(403, MESSAGES_REFUSAL);

    await client.delete(`/api/v1/messages/${await messageKey(dataSource, client.tenant, 'q-0')}`).expect(200);
    await client.push(items('q', 1, 'Default', 'extra')).expect(201);
    await client.push(items('q', 1, 'Default', 'more')).expect(403, MESSAGES_REFUSAL);

    await client.delete('/api/v1/queues/q/clear').expect(200);
    await client.push(items('q', 5, 'Default', 'after-clear')).expect(201);
    expect(await usage(dataSource, client.tenant)).toMatchObject({ counted_messages: 5, messages: 5 });

    // No refusal just before: the retention job of another test file's broker may do this round's deleting, and a
    // broker refuses for a second after a refusal without asking the database unless it deleted something itself.
    await client.configure({ queue: 'q', options: { retentionSeconds: 60 } }).expect(200);
    await ageMessages(dataSource, client.tenant, 61);
    await sql(dataSource, `UPDATE partitions SET retention_check_at = '-infinity' WHERE tenant_id = $1`, [
      client.tenant,
    ]);
    await broker.app.get(RetentionService).runOnce([client.tenant]);
    // Another file's broker may have claimed these partitions first: its round is the one to wait for then.
    await waitFor(async () => (await usage(dataSource, client.tenant)).messages === 0, 'retention deleting them');
    expect(await usage(dataSource, client.tenant)).toMatchObject({ counted_messages: 0, messages: 0 });
    await client.push(items('r', 5)).expect(201);
    await client.push(items('q', 1, 'Default', 'more')).expect(403, MESSAGES_REFUSAL);

    await client.delete('/api/v1/resources/queues/r').expect(200);
    await client.push(items('q', 5, 'Default', 'last')).expect(201);
    expect(await usage(dataSource, client.tenant)).toMatchObject({ counted_messages: 5, messages: 5 });
  });

  it('counts dead letters, never refuses dead-lettering, and holds a retry of a dead letter to the quota', async () => {
    const { client, dataSource } = broker;
    await client.push(items('jobs', 1)).expect(201);
    // One message failed by three groups: four rows stored, then a fifth message.
    for (const group of ['g1', 'g2', 'g3']) {
      await client.ackAll(await client.popLeased('jobs', { consumerGroup: group }), 'dlq').expect(200);
    }
    await client.push(items('jobs', 1, 'Default', 'second')).expect(201);
    expect(await usage(dataSource, client.tenant)).toMatchObject({ counted_messages: 5, messages: 5 });
    await client.push(items('jobs', 1, 'Default', 'third')).expect(403, MESSAGES_REFUSAL);

    // Failing the fifth for a group stores a sixth row: over the quota, but a consumer's failure must go somewhere.
    const failed = await client.popLeased('jobs', { consumerGroup: 'g1' });
    expect(failed.messages.map((message) => message.transactionId)).toEqual(['second-0']);
    await client.ackAll(failed, 'dlq').expect(200);
    expect(await usage(dataSource, client.tenant)).toMatchObject({ counted_messages: 6, messages: 6 });

    // A retry takes one dead letter and stores one message: still six, past five, so it is refused.
    const partitionId = failed.messages[0].partitionId;
    const before = await tenantSnapshot(dataSource, client.tenant);
    await client.post(`/api/v1/messages/${partitionId}/jobs-0/retry?consumerGroup=g1`).expect(403, MESSAGES_REFUSAL);
    expect(await tenantSnapshot(dataSource, client.tenant)).toEqual(before);

    // Deleting the first message takes its three dead letters with it: two left, and the retry fits.
    await client.delete(`/api/v1/messages/${partitionId}/jobs-0`).expect(200);
    await client.post(`/api/v1/messages/${partitionId}/second-0/retry`).expect(200);
    expect(await usage(dataSource, client.tenant)).toMatchObject({ counted_messages: 2, messages: 2 });
  });

  it("holds a transaction's pushes to it: 403, and none of its operations applies", async () => {
    const { client, dataSource } = broker;
    await client.push(items('in', 3)).expect(201);
    const popped: PopBody = await client.popLeased('in', { batch: 3 });
    const before = await tenantSnapshot(dataSource, client.tenant);
    const counted = await refusals('TENANT_MAX_STORED_MESSAGES');
    const transaction = (count: number) => ({
      operations: [
        {
          type: 'ack',
          transactionId: popped.messages[0].transactionId,
          partitionId: popped.messages[0].partitionId,
          leaseId: popped.leaseId,
          status: 'completed',
        },
        { type: 'push', items: items('out', count) },
      ],
      requiredLeases: [popped.leaseId],
    });

    await client.post('/api/v1/transaction', transaction(3)).expect(403, MESSAGES_REFUSAL);

    expect(await tenantSnapshot(dataSource, client.tenant)).toEqual(before);
    expect(await refusals('TENANT_MAX_STORED_MESSAGES')).toBe(counted + 1);
    const committed = await client.post('/api/v1/transaction', transaction(2)).expect(200);
    expect(committed.body.success).toBe(true);
  });

  it('shows each quota with what the tenant uses of it at GET /api/v1/resources/quotas', async () => {
    const { client } = broker;
    await client.push(items('a', 2)).expect(201);
    await client.pop('a', { consumerGroup: 'readers', autoAck: true }).expect(200);

    const answer = await client.get('/api/v1/resources/quotas').expect(200);

    expect(answer.body).toEqual({
      quotas: [
        { quota: 'queues', variable: 'TENANT_MAX_QUEUES', used: 1, limit: 1000 },
        { quota: 'partitions', variable: 'TENANT_MAX_PARTITIONS', used: 1, limit: 100000 },
        { quota: 'consumerGroups', variable: 'TENANT_MAX_CONSUMER_GROUPS', used: 1, limit: 1000 },
        { quota: 'storedBytes', variable: 'TENANT_MAX_STORED_BYTES', used: 14, limit: null },
        { quota: 'storedMessages', variable: 'TENANT_MAX_STORED_MESSAGES', used: 2, limit: 5 },
      ],
    });
  });

  it("counts each tenant on its own: one at its quota leaves another's pushes alone", async () => {
    const { client } = broker;
    await client.push(items('a', 5)).expect(201);
    await client.push(items('a', 1, 'Default', 'more')).expect(403);

    await new BrokerClient(broker.app, newTenant()).push(items('a', 5)).expect(201);
  });
});

describe('the stored bytes quota', () => {
  const broker = useTestBroker({ TENANT_MAX_STORED_BYTES: '100', TENANT_MAX_STORED_MESSAGES: '0' });
  const refusals = refusalsOf(broker);
  /** A payload whose JSON text is `bytes` long: a string of bytes - 2 characters within quotes. */
  const sized = (bytes: number, transactionId: string) => ({
    queue: 'q',
    payload: 'x'.repeat(bytes - 2),
    transactionId,
  });

  it('refuses a push that would pass it with 403 naming TENANT_MAX_STORED_BYTES, and takes one that fills it exactly', async () => {
    const { client, dataSource } = broker;
    await client.push([sized(60, 'a')]).expect(201);
    const before = await tenantSnapshot(dataSource, client.tenant);
    const counted = await refusals('TENANT_MAX_STORED_BYTES');

    await client.push([sized(20, 'b'), sized(21, 'c')]).expect(403, BYTES_REFUSAL);

    expect(await tenantSnapshot(dataSource, client.tenant)).toEqual(before);
    expect(await refusals('TENANT_MAX_STORED_BYTES')).toBe(counted + 1);
    await client.push([sized(20, 'b'), sized(20, 'c')]).expect(201);
    await client.push([sized(3, 'd')]).expect(403, BYTES_REFUSAL);
    expect(await usage(dataSource, client.tenant)).toMatchObject({ counted_bytes: 100, bytes: 100 });
  });

  it('counts multi-byte characters as the bytes of their UTF-8 text', async () => {
    const { client, dataSource } = broker;
    // 48 three-byte characters and the quotes: 146 bytes.
    await client.push([{ queue: 'q', payload: '€'.repeat(48) }]).expect(403, BYTES_REFUSAL);
    await client.push([{ queue: 'q', payload: '€'.repeat(32) }]).expect(201);
    expect(await usage(dataSource, client.tenant)).toMatchObject({ counted_bytes: 98, bytes: 98 });
  });
});

const describeOnPostgres = onEmbeddedDatabase ? describe.skip : describe;

describeOnPostgres('the storage quotas under concurrent pushes of one tenant (PostgreSQL)', () => {
  // DB_POOL_SIZE 4 gives a tenant 3 connections: at most 3 pushes of it write at once.
  const broker = useTestBroker({ TENANT_MAX_STORED_MESSAGES: '50', DB_POOL_SIZE: '4' });
  const refusals = refusalsOf(broker);

  it('lets them pass it by at most what the other pushes in flight carry, and refuses the rest whole', async () => {
    const { client, dataSource } = broker;
    const counted = await refusals('TENANT_MAX_STORED_MESSAGES');

    const answers = await Promise.all(
      Array.from({ length: 30 }, (_, n) => client.push(items('wide', 5, `p${n}`, `push${n}`))),
    );

    const stored = answers.filter((answer) => answer.status === 201).length;
    const refused = answers.filter((answer) => answer.status === 403).length;
    expect(stored + refused).toBe(30);
    expect(stored * 5).toBeGreaterThanOrEqual(50);
    // The documented slack: DB_TENANT_MAX_CONNECTIONS - 1 = 2 other pushes of 5 in flight.
    expect(stored * 5).toBeLessThanOrEqual(50 + 2 * 5);
    expect(await refusals('TENANT_MAX_STORED_MESSAGES')).toBe(counted + refused);
    expect(await usage(dataSource, client.tenant)).toMatchObject({
      counted_messages: stored * 5,
      messages: stored * 5,
    });
  });
});
