import { ParkedPolls } from '../src/wakeup/parked-polls';
import { BrokerClient } from './support/broker-client';
import request from 'supertest';
import { cursors } from './support/db-state';
import { newTenant, TENANT_HEADER } from './support/test-app';
import { useTestBroker } from './support/test-broker';
import { waitFor, within } from './support/wait';

const discover = (client: BrokerClient, query: Record<string, string | number | boolean>) =>
  client.get('/api/v1/pop', query);

describe('discovery pop and namespaces', () => {
  const broker = useTestBroker();

  async function billing(client: BrokerClient): Promise<void> {
    await client.configure({ queue: 'low', namespace: 'billing', task: 'invoices', options: { priority: 1 } });
    await client.configure({ queue: 'high', namespace: 'billing', task: 'refunds', options: { priority: 10 } });
    await client.configure({ queue: 'elsewhere', namespace: 'shipping', task: 'invoices' });
    await client.pushMany('low', 1);
    await client.pushMany('high', 1);
    await client.pushMany('elsewhere', 1);
  }

  it('serves the matching queues highest priority first, answering as a queue pop', async () => {
    const { client } = broker;
    await billing(client);

    const first = await discover(client, { namespace: 'billing' }).expect(200);
    expect(first.body).toMatchObject({ success: true, queue: 'high' });
    expect(first.body.messages.map((m: { transactionId: string }) => m.transactionId)).toEqual(['high-Default-0']);
    await client.ackAll(first.body).expect(200);

    const second = await discover(client, { namespace: 'billing' }).expect(200);
    expect(second.body.queue).toBe('low');
    await client.ackAll(second.body).expect(200);
    await discover(client, { namespace: 'billing' }).expect(204);

    expect((await discover(client, { task: 'invoices' }).expect(200)).body.queue).toBe('elsewhere');
    await discover(client, { namespace: 'billing', task: 'invoices' }).expect(204);
  });

  it('parks on every matching queue with wait=true and answers from the one that gets a message', async () => {
    const { client, app } = broker;
    await client.configure({ queue: 'a', namespace: 'ns', options: { priority: 5 } });
    await client.configure({ queue: 'b', namespace: 'ns' });
    const poll = discover(client, { namespace: 'ns', wait: true, timeout: 30_000 }).then((response) => response);
    const parked = app.get(ParkedPolls);
    await waitFor(
      () =>
        parked.parkedCount(client.tenant, 'a', '__QUEUE_MODE__') === 1 &&
        parked.parkedCount(client.tenant, 'b', '__QUEUE_MODE__') === 1,
      'the poll parks on both queues',
    );

    await client.pushMany('b', 1);

    const answer = await within(poll, 'the parked discovery pop answers', 15_000);
    expect(answer.status).toBe(200);
    expect(answer.body.queue).toBe('b');
    expect(parked.parkedCount(client.tenant, 'a', '__QUEUE_MODE__')).toBe(0);
  });

  it('refuses a pop with neither filter, and forgets a namespace set to ""', async () => {
    const { client } = broker;
    await billing(client);
    const neither = await discover(client, {});
    expect([neither.status, neither.body]).toEqual([400, { error: 'namespace or task is required' }]);
    const bad = await discover(client, { namespace: 'billing', batch: 0 });
    expect(bad.status).toBe(400);

    await client.configure({ queue: 'high', namespace: '' }).expect(200);
    await client.configure({ queue: 'low', namespace: null }).expect(200);

    expect((await discover(client, { namespace: 'billing' }).expect(200)).body.queue).toBe('low');
    const detail = (await client.get('/api/v1/resources/queues')).body.queues;
    expect(detail.map((q: { name: string; namespace: string | null }) => [q.name, q.namespace])).toEqual([
      ['elsewhere', 'shipping'],
      ['high', null],
      ['low', 'billing'],
    ]);
  });

  it('refuses HEAD, which would lease messages nobody receives', async () => {
    const { client, app, dataSource } = broker;
    await billing(client);

    const answer = await request(app.getHttpServer())
      .head('/api/v1/pop?namespace=billing')
      .set(TENANT_HEADER, client.tenant);

    expect(answer.status).toBe(405);
    expect((await cursors(dataSource, client.tenant, 'high')).some((row) => row.leaseLive)).toBe(false);
  });

  it('groups the queues by namespace and by task with their counts', async () => {
    const { client } = broker;
    await billing(client);
    await client.configure({ queue: 'plain' });

    const namespaces = await client.get('/api/v1/resources/namespaces').expect(200);
    const tasks = await client.get('/api/v1/resources/tasks').expect(200);

    expect(namespaces.body).toEqual({
      namespaces: [
        { name: 'billing', queues: 2, partitions: 2, messages: { total: 2, pending: 2 } },
        { name: 'shipping', queues: 1, partitions: 1, messages: { total: 1, pending: 1 } },
      ],
    });
    expect(tasks.body.tasks.map((task: { name: string; queues: number }) => [task.name, task.queues])).toEqual([
      ['invoices', 2],
      ['refunds', 1],
    ]);
  });

  it("never serves another tenant's queues", async () => {
    const { client, app } = broker;
    await billing(client);
    const stranger = new BrokerClient(app, newTenant());

    await discover(stranger, { namespace: 'billing' }).expect(204);
    expect((await stranger.get('/api/v1/resources/namespaces')).body).toEqual({ namespaces: [] });
  });
});
