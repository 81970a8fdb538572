import { newTenant, onEmbeddedDatabase, TENANT_HEADER } from './support/test-app';
import { waitFor, within } from './support/wait';
import { BrokerProcess } from './faults/support/broker-process';

/** Far past every bound below: an answer within a bound can only come from a wakeup. */
const PARKED_TIMEOUT_MS = 120_000;
/** Generous: the machine may be loaded; what matters is that it is not the poll's timeout. */
const WOKEN_WITHIN_MS = 20_000;

jest.setTimeout(120_000);

interface Answer {
  status: number;
  body: any;
}

/**
 * Two broker processes on one database: what one of them sees (a nack, a
 * lease it handed out) must wake a poll parked on the other, which only
 * NOTIFY and the expiry sweep can tell it. The embedded database is one
 * process by design.
 */
(onEmbeddedDatabase ? describe.skip : describe)(
  'a poll parked on one broker process, woken by what happens on another',
  () => {
    let a: BrokerProcess;
    let b: BrokerProcess;
    let tenant: string;

    beforeAll(async () => {
      const env = { DATABASE_URL: process.env.DATABASE_URL!, TENANT_HEADER, DB_POOL_SIZE: '4' };
      // On b a tenant may park one poll: a second one answering 429 proves the first is waiting there.
      [a, b] = await Promise.all([
        BrokerProcess.start(env),
        BrokerProcess.start({ ...env, POP_MAX_WAITING_PER_TENANT: '1' }),
      ]);
    });

    afterAll(async () => {
      await Promise.all([a?.stop(), b?.stop()]);
    });

    beforeEach(() => {
      tenant = newTenant();
    });

    async function call(broker: BrokerProcess, method: string, path: string, body?: unknown): Promise<Answer> {
      const response = await fetch(`${broker.url}${path}`, {
        method,
        headers: { [TENANT_HEADER]: tenant, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
        body: body === undefined ? undefined : JSON.stringify(body),
      });
      const text = await response.text();
      return { status: response.status, body: text ? JSON.parse(text) : undefined };
    }

    const push = (broker: BrokerProcess, count: number) =>
      call(broker, 'POST', '/api/v1/push', {
        items: Array.from({ length: count }, (_, i) => ({ queue: 'jobs', transactionId: `job-${i}`, payload: { i } })),
      });

    const pop = (broker: BrokerProcess, query: string, queue = 'jobs') =>
      call(broker, 'GET', `/api/v1/pop/queue/${queue}?consumerGroup=workers&batch=10&${query}`);

    /**
     * A long poll on b, once it is registered there: a probe poll of the same
     * tenant answers 429. A probe that got in first holds the one place for a
     * millisecond and turns the poll away instead; then the poll starts again.
     */
    async function parkedOnB(queue = 'jobs'): Promise<{ answer: Promise<Answer> }> {
      for (;;) {
        const poll = pop(b, `wait=true&timeout=${PARKED_TIMEOUT_MS}`, encodeURIComponent(queue));
        let answered: Answer | undefined;
        void poll.then((answer) => (answered = answer));
        await waitFor(
          async () => answered !== undefined || (await pop(b, 'wait=true&timeout=1', 'probe')).status === 429,
          'the poll parks on b',
        );
        if (answered === undefined) return { answer: poll };
        expect(answered.status).toBe(429);
      }
    }

    it('a batch nacked through one process goes at once to the consumer parked on the other', async () => {
      expect((await push(a, 2)).status).toBe(201);
      const held = await pop(a, 'leaseSeconds=60');
      expect(held.status).toBe(200);
      const parked = await parkedOnB();

      const nack = await call(a, 'POST', '/api/v1/ack/batch', {
        consumerGroup: 'workers',
        acknowledgments: [
          { transactionId: 'job-0', partitionId: held.body.partitionId, leaseId: held.body.leaseId, status: 'failed' },
        ],
      });

      expect(nack.status).toBe(200);
      const woken = await within(parked.answer, 'the poll parked on b answers', WOKEN_WITHIN_MS);
      expect(woken.status).toBe(200);
      expect(woken.body.messages.map((message: any) => [message.transactionId, message.deliveryAttempt])).toEqual([
        ['job-0', 2],
        ['job-1', 2],
      ]);
    });

    it('a batch acked through the process that handed it out, with more behind it, goes at once to the consumer parked on the other', async () => {
      expect((await push(a, 3)).status).toBe(201);
      const held = await call(a, 'GET', '/api/v1/pop/queue/jobs?consumerGroup=workers&batch=1&leaseSeconds=60');
      expect(held.status).toBe(200);
      const parked = await parkedOnB();

      const ack = await call(a, 'POST', '/api/v1/ack/batch', {
        consumerGroup: 'workers',
        acknowledgments: [{ transactionId: 'job-0', partitionId: held.body.partitionId, leaseId: held.body.leaseId }],
      });

      expect(ack.status).toBe(200);
      expect(ack.body).toMatchObject([{ success: true, leaseReleased: true }]);
      const woken = await within(parked.answer, 'the poll parked on b answers', WOKEN_WITHIN_MS);
      expect(woken.status).toBe(200);
      expect(woken.body.messages.map((message: any) => message.transactionId)).toEqual(['job-1', 'job-2']);
    });

    it('a push to names with quotes and backslashes wakes the consumer parked on the other, the names intact', async () => {
      const queue = `it's "q\\'; NOTIFY leasehold_push, 'x`;
      const partition = `p\\'"\\`;
      const parked = await parkedOnB(queue);

      const pushed = await call(a, 'POST', '/api/v1/push', {
        items: [{ queue, partition, transactionId: 'quoted-0', payload: 1 }],
      });

      expect(pushed.status).toBe(201);
      const woken = await within(parked.answer, 'the poll parked on b answers', WOKEN_WITHIN_MS);
      expect(woken.status).toBe(200);
      expect([woken.body.queue, woken.body.partition]).toEqual([queue, partition]);
      expect(woken.body.messages.map((message: any) => message.transactionId)).toEqual(['quoted-0']);
    });

    it('a transaction through one process wakes the consumer parked on the other with what it pushed', async () => {
      await call(a, 'POST', '/api/v1/push', { items: [{ queue: 'source', transactionId: 'in-0', payload: 1 }] });
      const input = await call(a, 'GET', '/api/v1/pop/queue/source?leaseSeconds=60');
      expect(input.status).toBe(200);
      const parked = await parkedOnB();

      const committed = await call(a, 'POST', '/api/v1/transaction', {
        operations: [
          { type: 'ack', transactionId: 'in-0', partitionId: input.body.partitionId, leaseId: input.body.leaseId },
          { type: 'push', items: [{ queue: 'jobs', transactionId: 'out-0', payload: 2 }] },
        ],
        requiredLeases: [input.body.leaseId],
      });

      expect(committed.body.success).toBe(true);
      const woken = await within(parked.answer, 'the poll parked on b answers', WOKEN_WITHIN_MS);
      expect(woken.status).toBe(200);
      expect(woken.body.messages.map((message: any) => message.transactionId)).toEqual(['out-0']);
    });

    it('a lease handed out by one process and left to expire is redelivered to the consumer parked on the other', async () => {
      expect((await push(a, 2)).status).toBe(201);
      const held = await pop(a, 'leaseSeconds=2');
      expect(held.status).toBe(200);
      const parked = await parkedOnB();

      const woken = await within(parked.answer, 'the poll parked on b answers', WOKEN_WITHIN_MS);

      expect(woken.status).toBe(200);
      expect(woken.body.leaseId).not.toBe(held.body.leaseId);
      expect(woken.body.messages.map((message: any) => [message.transactionId, message.deliveryAttempt])).toEqual([
        ['job-0', 2],
        ['job-1', 2],
      ]);
    });
  },
);
