import { BrokerClient } from './support/broker-client';
import { storedCounts, tenantSnapshot } from './support/db-state';
import { newTenant } from './support/test-app';
import { useTestBroker } from './support/test-broker';
import { MetricsService } from '../src/metrics/metrics.service';

const refusal = (error: string) => ({ error: `quota exceeded: a tenant may have at most ${error}` });

describe('per-tenant quotas', () => {
  const broker = useTestBroker({ TENANT_MAX_QUEUES: '3', TENANT_MAX_PARTITIONS: '5', TENANT_MAX_CONSUMER_GROUPS: '2' });

  const refusals = async (quota: string): Promise<number> => {
    const { values } = await broker.app.get(MetricsService).quotaRefusals.get();
    return values.find((value) => value.labels.quota === quota)?.value ?? 0;
  };

  it('refuses a fourth queue with 403 naming TENANT_MAX_QUEUES, by configure or by push, and stores nothing of that push', async () => {
    const { client } = broker;
    for (const queue of ['a', 'b', 'c']) await client.configure({ queue }).expect(200);
    const before = await tenantSnapshot(broker.dataSource, client.tenant);
    const counted = await refusals('TENANT_MAX_QUEUES');

    await client.configure({ queue: 'd' }).expect(403, refusal('3 queues (TENANT_MAX_QUEUES)'));
    await client
      .push([
        { queue: 'a', payload: 1 },
        { queue: 'd', payload: 2 },
      ])
      .expect(403, refusal('3 queues (TENANT_MAX_QUEUES)'));

    expect(await tenantSnapshot(broker.dataSource, client.tenant)).toEqual(before);
    expect(await refusals('TENANT_MAX_QUEUES')).toBe(counted + 2);
    await client.push([{ queue: 'a', payload: 1 }]).expect(201);
    await client.configure({ queue: 'b', options: { leaseTime: 30 } }).expect(200);
  });

  it('makes room again once a queue is deleted', async () => {
    const { client } = broker;
    for (const queue of ['a', 'b', 'c']) await client.configure({ queue }).expect(200);
    await client.configure({ queue: 'd' }).expect(403);

    await client.delete('/api/v1/resources/queues/c').expect(200);

    await client.push([{ queue: 'd', payload: 1 }]).expect(201);
  });

  it('refuses a sixth partition with 403 naming TENANT_MAX_PARTITIONS, and the whole push with it', async () => {
    const { client } = broker;
    await client
      .push(['p1', 'p2', 'p3', 'p4', 'p5'].map((partition) => ({ queue: 'wide', partition, payload: 1 })))
      .expect(201);

    await client
      .push([
        { queue: 'wide', partition: 'p1', payload: 2 },
        { queue: 'wide', partition: 'p6', payload: 2 },
      ])
      .expect(403, refusal('5 partitions (TENANT_MAX_PARTITIONS)'));

    expect(await storedCounts(broker.dataSource, client.tenant)).toMatchObject({ partitions: 5, messages: 5 });
    await client.push([{ queue: 'wide', partition: 'p5', payload: 3 }]).expect(201);
  });

  it('refuses a third consumer group with 403 naming TENANT_MAX_CONSUMER_GROUPS, while the first two keep popping', async () => {
    const { client } = broker;
    await client.pushMany('grouped', 3);
    await client.pop('grouped', { consumerGroup: 'one', batch: 1, autoAck: true }).expect(200);
    await client.pop('grouped', { consumerGroup: 'two', batch: 1, autoAck: true }).expect(200);

    await client
      .pop('grouped', { consumerGroup: 'three' })
      .expect(403, refusal('2 consumer groups (TENANT_MAX_CONSUMER_GROUPS)'));

    expect(await storedCounts(broker.dataSource, client.tenant)).toMatchObject({ consumer_groups: 2 });
    await client.pop('grouped', { consumerGroup: 'two', batch: 1, autoAck: true }).expect(200);
  });

  it("counts each tenant on its own: one at its quota leaves another's creations alone", async () => {
    const { client } = broker;
    for (const queue of ['a', 'b', 'c']) await client.configure({ queue }).expect(200);
    await client.configure({ queue: 'd' }).expect(403);

    const other = new BrokerClient(broker.app, newTenant());
    for (const queue of ['a', 'b', 'c']) await other.configure({ queue }).expect(200);
  });
});
