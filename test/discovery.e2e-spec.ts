import { whenAnswered } from '../src/common/later-answer';
import { ClientRequest, IncomingMessage, request as httpRequest, ServerResponse } from 'node:http';
import { AddressInfo } from 'node:net';
import { NestExpressApplication } from '@nestjs/platform-express';
import { Database } from '../src/database/database';
import { Statement } from '../src/database/statement';
import { PopRepository } from '../src/pop/pop.repository';
import { UnitOfWork } from '../src/database/unit-of-work';
import { PopService } from '../src/pop/pop.service';
import { ParkedPolls } from '../src/wakeup/parked-polls';
import { BrokerClient } from './support/broker-client';
import request from 'supertest';
import { cursors } from './support/db-state';
import { createTestApp, newTenant, TENANT_HEADER } from './support/test-app';
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

  it("shares one lookup of a tenant's matching queues between the polls that wait on one filter", async () => {
    const { app, client } = broker;
    const polls = app.get(ParkedPolls);
    const before = polls.total;
    const lookups = jest.spyOn(app.get(PopRepository), 'discover');
    const waiting = Array.from({ length: 5 }, () =>
      discover(client, { namespace: 'nobody-yet', wait: true, timeout: 60_000 }).then((response) => response),
    );
    try {
      const calls = () => lookups.mock.calls.filter((call) => call[0] === client.tenant).length;
      // A poll counts from when it starts looking: the lookup may come a moment after all five are counted.
      await waitFor(() => polls.total === before + 5 && calls() >= 1, 'every poll is parked and one has looked');
      expect(calls()).toBeLessThan(5);
    } finally {
      lookups.mockRestore();
    }
    await client.configure({ queue: 'late', namespace: 'nobody-yet' }).expect(200);
    // One partition each: a partition serves one lease at a time.
    await client.push([0, 1, 2, 3, 4].map((n) => ({ queue: 'late', partition: `p${n}`, payload: n }))).expect(201);
    const answers = await within(Promise.all(waiting), 'every poll is served once its queue exists', 20_000);
    expect(answers.map((answer) => answer.status)).toEqual([200, 200, 200, 200, 200]);
  });

  it("never serves another tenant's queues", async () => {
    const { client, app } = broker;
    await billing(client);
    const stranger = new BrokerClient(app, newTenant());

    await discover(stranger, { namespace: 'billing' }).expect(204);
    expect((await stranger.get('/api/v1/resources/namespaces')).body).toEqual({ namespaces: [] });
  });
});

/** A poll on a connection of its own, which the test can close as a client that goes away does. */
function openPoll(
  app: NestExpressApplication,
  tenant: string,
  path: string,
): { close: () => void; answer: Promise<number> } {
  const server = app.getHttpServer();
  const { port } = server.address() as AddressInfo;
  let call: ClientRequest | undefined;
  const answer = new Promise<number>((resolve) => {
    call = httpRequest({ host: '127.0.0.1', port, path, headers: { [TENANT_HEADER]: tenant } }, (response) => {
      response.resume();
      response.on('end', () => resolve(response.statusCode ?? 0));
    });
    call.on('error', () => resolve(0));
    call.end();
  });
  return { close: () => call?.destroy(), answer };
}

describe('long polls whose clients go', () => {
  let app: NestExpressApplication;
  /** Closed server-side responses, by path: the moment the broker learns that a client has gone. */
  const closed = new Map<string, Array<() => void>>();

  beforeAll(async () => {
    app = await createTestApp({ POP_MAX_WAITING_PER_TENANT: '1' });
    await app.listen(0, '127.0.0.1');
    app.getHttpServer().on('request', (req: IncomingMessage, res: ServerResponse) => {
      res.once('close', () => {
        for (const notify of closed.get(req.url ?? '') ?? []) notify();
      });
    });
  });

  afterAll(async () => {
    await app.close();
  });

  const serverSawClose = (path: string) =>
    new Promise<void>((resolve) => closed.set(path, [...(closed.get(path) ?? []), resolve]));

  it('counts a discovery poll that matches no queue yet as one parked poll, and ends it when its client goes', async () => {
    const client = new BrokerClient(app, newTenant());
    const polls = app.get(ParkedPolls);
    const service = app.get(PopService);
    const discovering = jest.spyOn(service, 'discover');
    const path = `/api/v1/pop?namespace=nobody-yet&wait=true&timeout=60000`;
    const poll = openPoll(app, client.tenant, path);
    await waitFor(() => polls.total === 1, 'the poll counts as parked');
    const ended = discovering.mock.results[0].value as Promise<unknown>;

    const second = await discover(client, { namespace: 'nobody-yet', wait: true, timeout: 1000 });
    expect(second.status).toBe(429);
    expect(second.body).toEqual({ error: 'too many waiting pops' });

    poll.close();
    await within(ended, 'the poll ends once its client has gone', 10_000);
    expect(polls.total).toBe(0);
    discovering.mockRestore();
  });

  it.each([
    [
      'a discovery poll',
      (queue: string) => `/api/v1/pop?namespace=${queue}-ns&wait=true&timeout=60000&leaseSeconds=300`,
    ],
    ['a queue poll', (queue: string) => `/api/v1/pop/queue/${queue}?wait=true&timeout=60000&leaseSeconds=300`],
  ])('gives back what %s claimed after its client went, at once', async (_kind, pathOf) => {
    const client = new BrokerClient(app, newTenant());
    const queue = `gone-${newTenant().slice(0, 8)}`;
    await client.configure({ queue, namespace: `${queue}-ns` }).expect(200);
    await client.pushMany(queue, 3);
    const path = pathOf(queue);
    const run = UnitOfWork.prototype.run;
    let poll: ReturnType<typeof openPoll> | undefined;
    // The client goes while the claim is under way (before its target is read), once the broker has seen it go.
    const target = jest.spyOn(UnitOfWork.prototype, 'run').mockImplementation(async function <T>(
      this: UnitOfWork,
      statement: Statement<T>,
    ): Promise<T> {
      if (this.tenantId === client.tenant && statement.name === 'leasehold_pop_target' && poll) {
        const seen = serverSawClose(path);
        poll.close();
        await seen;
      }
      return run.call(this, statement) as Promise<T>;
    });
    const service = app.get(PopService);
    const served = [jest.spyOn(service, 'discover'), jest.spyOn(service, 'popOrPark')];
    try {
      poll = openPoll(app, client.tenant, path);
      await poll.answer;
      await waitFor(() => served.some((spy) => spy.mock.results.length > 0), 'the poll is served');
      const ended = served.flatMap((spy) =>
        spy.mock.results.map((result) => (result.value as Promise<unknown>).then(whenAnswered)),
      );
      await within(Promise.all(ended), 'the poll ends once its client has gone', 10_000);
      await waitFor(
        async () => (await cursors(app.get(Database), client.tenant, queue)).every((row) => row.leaseId === null),
        'the lease is released',
      );
    } finally {
      target.mockRestore();
      for (const spy of served) spy.mockRestore();
    }
    const next = await client.popLeased(queue, { batch: 10 });
    expect(next.messages.map((message) => message.transactionId)).toEqual(
      [0, 1, 2].map((n) => `${queue}-Default-${n}`),
    );
    expect(next.messages.map((message) => message.deliveryAttempt)).toEqual([2, 2, 2]);
  });
});
