import { Database } from '../src/database/database';
import { RetentionService } from '../src/retention/retention.service';
import { BrokerClient, PopBody } from './support/broker-client';
import { ageMessages, sql } from './support/db-state';
import { onEmbeddedDatabase } from './support/test-app';
import { useTestBroker } from './support/test-broker';
import { waitFor } from './support/wait';

interface Usage {
  bytes: number;
  messages: number;
}

/** The tenant's counters, and the same two figures summed over its rows, which no request ever does. */
async function countedAndTrue(dataSource: Database, tenant: string): Promise<{ counted: Usage; truth: Usage }> {
  const [row] = await sql(
    dataSource,
    `SELECT (SELECT COALESCE(sum(stored_bytes), 0) FROM tenant_usage WHERE tenant_id = $1)::bigint AS counted_bytes,
            (SELECT COALESCE(sum(stored_messages), 0) FROM tenant_usage WHERE tenant_id = $1)::bigint AS counted_messages,
            (SELECT COALESCE(sum(COALESCE(payload_bytes, octet_length(payload::text))), 0) FROM messages
              WHERE tenant_id = $1)
              + (SELECT COALESCE(sum(COALESCE(payload_bytes, octet_length(payload::text))), 0) FROM dead_letters
                  WHERE tenant_id = $1) AS bytes,
            (SELECT count(*) FROM messages WHERE tenant_id = $1)
              + (SELECT count(*) FROM dead_letters WHERE tenant_id = $1) AS messages`,
    [tenant],
  );
  return {
    counted: { bytes: Number(row.counted_bytes), messages: Number(row.counted_messages) },
    truth: { bytes: Number(row.bytes), messages: Number(row.messages) },
  };
}

const payload = (n: number) => ({ n, text: 'é'.repeat(n % 7), list: Array.from({ length: n % 5 }, (_, i) => i) });

describe('the stored usage counters', () => {
  const broker = useTestBroker();
  const retention = () => broker.app.get(RetentionService);

  async function expectExact(what: string): Promise<Usage> {
    const { counted, truth } = await countedAndTrue(broker.dataSource, broker.client.tenant);
    expect({ what, ...counted }).toEqual({ what, ...truth });
    return counted;
  }

  /** A retention round with this tenant's partitions first in line (other files share the database). */
  async function retentionRound(): Promise<void> {
    await sql(broker.dataSource, `UPDATE partitions SET retention_check_at = '-infinity' WHERE tenant_id = $1`, [
      broker.client.tenant,
    ]);
    await retention().runOnce([broker.client.tenant]);
  }

  async function push(client: BrokerClient, queue: string, partition: string, from: number, count: number) {
    const items = Array.from({ length: count }, (_, i) => ({
      queue,
      partition,
      payload: payload(from + i),
      transactionId: `${queue}-${partition}-${from + i}`,
    }));
    await client.push(items).expect(201);
  }

  it('equal the sums over the rows they count after every kind of write and deletion', async () => {
    const { client, dataSource } = broker;
    await client.configure({ queue: 'jobs', options: { retryLimit: 0, completedRetentionSeconds: 60 } }).expect(200);
    await client.configure({ queue: 'events', options: { dlqRetentionSeconds: 120 } }).expect(200);
    await client.configure({ queue: 'stale', options: { maxWaitTimeSeconds: 300 } }).expect(200);

    for (const partition of ['a', 'b', 'c']) await push(client, 'jobs', partition, 0, 6);
    await push(client, 'events', 'Default', 0, 10);
    await push(client, 'stale', 'Default', 0, 4);
    // Duplicates store nothing.
    await push(client, 'jobs', 'a', 0, 6);
    expect(await expectExact('pushes')).toMatchObject({ messages: 32 });

    // Consumed and acked, nacked into the dead-letter queue, dead-lettered by hand.
    const first: PopBody = await client.popLeased('jobs', { batch: 6, consumerGroup: 'workers' }, 'a');
    await client.ackAll(first).expect(200);
    const failing: PopBody = await client.popLeased('jobs', { batch: 2, consumerGroup: 'workers' }, 'b');
    await client.ackAll(failing, 'failed').expect(200);
    const popped: PopBody = await client.popLeased('events', { batch: 4, consumerGroup: 'audit' });
    await client.ackAll(popped, 'dlq').expect(200);
    const event = popped.messages[0];
    await client.post(`/api/v1/messages/${event.partitionId}/events-Default-5/dlq?consumerGroup=audit`).expect(200);
    expect((await expectExact('acks and dead letters')).messages).toBeGreaterThan(32);

    // A transaction: acks its input, pushes its output.
    const input: PopBody = await client.popLeased('jobs', { batch: 2, consumerGroup: 'workers' }, 'c');
    const committed = await client
      .post('/api/v1/transaction', {
        operations: [
          ...input.messages.map((message) => ({
            type: 'ack',
            transactionId: message.transactionId,
            partitionId: message.partitionId,
            leaseId: input.leaseId,
            consumerGroup: 'workers',
            status: 'completed',
          })),
          { type: 'push', items: [{ queue: 'events', payload: payload(50), transactionId: 'from-tx' }] },
        ],
        requiredLeases: [input.leaseId],
      })
      .expect(200);
    expect(committed.body).toMatchObject({ success: true });
    await expectExact('transaction');

    // Retry of a dead letter, deletion of a message with its dead letters.
    await client.post(`/api/v1/messages/${event.partitionId}/${event.transactionId}/retry`).expect(200);
    await client.delete(`/api/v1/messages/${event.partitionId}/events-Default-5`).expect(200);
    await expectExact('retry and delete');

    // Retention: completed, then eviction into dead letters for two groups, then dead-letter retention.
    await client.popLeased('stale', { batch: 1, consumerGroup: 'one', autoAck: true });
    await client.pop('stale', { batch: 1, consumerGroup: 'two', autoAck: true }).expect(200);
    await ageMessages(dataSource, client.tenant, 301);
    await retentionRound();
    // Another file's broker may have claimed these partitions first: its round is the one to wait for then.
    await waitFor(async () => {
      const [evicted] = await sql(
        dataSource,
        `SELECT count(*)::int AS n FROM dead_letters WHERE tenant_id = $1 AND error_message LIKE 'evicted%'`,
        [client.tenant],
      );
      return evicted.n === 6;
    }, 'three messages evicted for two groups');
    await expectExact('completed retention and eviction');
    await ageMessages(dataSource, client.tenant, 200);
    await retentionRound();
    await expectExact('dead-letter retention');

    // Clearing one queue, deleting another.
    await client.delete('/api/v1/queues/jobs/clear?partition=c').expect(200);
    await expectExact('clear');
    await client.delete('/api/v1/resources/queues/events').expect(200);
    await expectExact('queue delete');
    await client.delete('/api/v1/resources/queues/jobs').expect(200);
    await client.delete('/api/v1/resources/queues/stale').expect(200);
    expect(await expectExact('every queue deleted')).toEqual({ bytes: 0, messages: 0 });
  });

  (onEmbeddedDatabase ? it.skip : it)(
    'stay exact while pushes, consumers, the retention job, deletions and a queue delete run at once (PostgreSQL)',
    async () => {
      const { client, dataSource } = broker;
      await client.configure({ queue: 'busy', options: { completedRetentionSeconds: 1 } }).expect(200);
      await client.configure({ queue: 'doomed', options: { completedRetentionSeconds: 1 } }).expect(200);
      for (const queue of ['busy', 'doomed']) {
        for (const partition of ['p0', 'p1', 'p2', 'p3']) await push(client, queue, partition, 0, 10);
      }
      let running = true;
      const rounds = { pushes: 0, retention: 0 };
      const loop = async (step: (round: number) => Promise<unknown>) => {
        for (let round = 0; running; round++) await step(round);
      };
      const consume = (queue: string) => async () => {
        const popped = await client.pop(queue, { batch: 5, consumerGroup: 'g' });
        if (popped.status === 200) await client.ackAll(popped.body as PopBody);
      };
      const workers = [
        loop(async (round) => {
          await Promise.all(['p0', 'p1', 'p2', 'p3'].map((p) => push(client, 'busy', p, 100 + round * 3, 3)));
          rounds.pushes += 1;
        }),
        // A push racing the queue's delete may be told to retry (409): it stored nothing.
        loop((round) => push(client, 'doomed', `p${round % 4}`, 100 + round, 1).catch(() => undefined)),
        loop(consume('busy')),
        loop(consume('doomed')),
        loop(async () => {
          await ageMessages(dataSource, client.tenant, 2);
          await retentionRound();
          rounds.retention += 1;
        }),
      ];
      const after = async (wanted: typeof rounds) =>
        waitFor(
          () => rounds.pushes >= wanted.pushes && rounds.retention >= wanted.retention,
          'workload rounds',
          60_000,
        );
      await after({ pushes: 5, retention: 3 });
      const deleted = await client.delete('/api/v1/resources/queues/doomed');
      const cleared = await client.delete('/api/v1/queues/busy/clear?partition=p3');
      expect([deleted.status, deleted.body, cleared.status]).toEqual([
        200,
        expect.objectContaining({ existed: true }),
        200,
      ]);
      await after({ pushes: rounds.pushes + 5, retention: rounds.retention + 3 });
      running = false;
      await Promise.all(workers);

      await expectExact('after the concurrent workload');
      await client.delete('/api/v1/resources/queues/busy').expect(200);
      await client.delete('/api/v1/resources/queues/doomed').expect(200);
      expect(await expectExact('every queue deleted')).toEqual({ bytes: 0, messages: 0 });
    },
  );
});
