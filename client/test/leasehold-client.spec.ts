import { LeaseholdClient, LeaseholdError, type PopResponse } from '../src';
import { FakeBroker } from './fake-broker';

describe('LeaseholdClient', () => {
  let broker: FakeBroker;
  let client: LeaseholdClient;

  beforeEach(async () => {
    broker = await FakeBroker.start();
    client = new LeaseholdClient({ baseUrl: `${broker.baseUrl}/` });
  });

  afterEach(async () => {
    await broker.close();
  });

  async function pushAndPop(queue: string, leaseSeconds = 5): Promise<PopResponse<{ n: number }>> {
    await client.push([{ queue, payload: { n: 1 } }]);
    const pop = await client.pop<{ n: number }>(queue, { leaseSeconds });
    if (pop === null) {
      throw new Error('expected a batch');
    }
    return pop;
  }

  describe('push', () => {
    it('returns the 201 results and reports a repeated transactionId as a duplicate of the original', async () => {
      const first = await client.push([{ queue: 'jobs', payload: { n: 1 }, transactionId: 't-1' }]);
      const again = await client.push([
        { queue: 'jobs', payload: { n: 1 }, transactionId: 't-1' },
        { queue: 'jobs', payload: null },
      ]);

      expect(first).toEqual([
        expect.objectContaining({
          index: 0,
          transaction_id: 't-1',
          queueName: 'jobs',
          status: 'queued',
        }),
      ]);
      expect(again[0]).toMatchObject({
        status: 'duplicate',
        message_id: first[0].message_id,
      });
      expect(again[1]).toMatchObject({ index: 1, status: 'queued' });
    });
  });

  describe('trace', () => {
    it("records a trace of a popped message under the message's group, and throws what the broker refuses", async () => {
      await client.push([{ queue: 'jobs', payload: { n: 1 } }]);
      const pop = (await client.pop<{ n: number }>('jobs', { consumerGroup: 'workers' }))!;

      const result = await client.trace(pop.messages[0], { charged: 12 }, { eventType: 'processing' });

      expect(result).toEqual({ success: true, traceId: expect.any(String) });
      expect(broker.requestsTo('traces')[0].body).toEqual({
        transactionId: pop.messages[0].transactionId,
        partitionId: pop.messages[0].partitionId,
        consumerGroup: 'workers',
        eventType: 'processing',
        data: { charged: 12 },
      });
      await expect(
        client.trace({ transactionId: 't', partitionId: 'p', consumerGroup: null }, 1, { consumerGroup: 'other' }),
      ).resolves.toMatchObject({ success: true });
      expect(broker.requestsTo('traces')[1].body).toMatchObject({ consumerGroup: 'other' });
      broker.failNext('traces', 400, '{"error":"partitionId must be a UUID"}');
      await expect(client.trace(pop.messages[0], 1)).rejects.toBeInstanceOf(LeaseholdError);
    });
  });

  describe('pop', () => {
    it('returns null when the broker answers 204', async () => {
      await expect(client.pop('empty')).resolves.toBeNull();
    });

    it('sends its options as query parameters and returns the typed batch', async () => {
      await client.push([{ queue: 'jobs', partition: 'p1', payload: { n: 7 } }]);

      const pop = await client.pop<{ n: number }>('jobs', {
        partition: 'p1',
        batch: 10,
        leaseSeconds: 3,
        consumerGroup: 'billing',
        subscriptionMode: 'all',
      });

      const [request] = broker.requestsTo('pop');
      expect(request.path).toBe('/api/v1/pop/queue/jobs/partition/p1');
      expect(Object.fromEntries(request.query)).toEqual({
        batch: '10',
        leaseSeconds: '3',
        consumerGroup: 'billing',
        subscriptionMode: 'all',
      });
      expect(pop?.messages).toEqual([
        expect.objectContaining({
          data: { n: 7 },
          partition: 'p1',
          leaseId: pop?.leaseId,
          deliveryAttempt: 1,
          leaseEpoch: 1,
        }),
      ]);
      expect(pop?.claimedPartitions).toEqual([
        {
          partitionId: pop?.messages[0].partitionId,
          partition: 'p1',
          leaseEpoch: 1,
          messages: 1,
        },
      ]);
    });

    it('parks a wait=true pop until a push arrives', async () => {
      const parked = client.pop<string>('later', {
        wait: true,
        timeout: 5_000,
      });
      await new Promise((resolve) => setTimeout(resolve, 100));
      await client.push([{ queue: 'later', payload: 'hello' }]);

      const pop = await parked;

      expect(pop?.messages.map((message) => message.data)).toEqual(['hello']);
    });

    it('returns null when a wait=true pop times out empty', async () => {
      await expect(client.pop('quiet', { wait: true, timeout: 50 })).resolves.toBeNull();
    });
  });

  describe('extend', () => {
    it('asks for the given seconds and returns lost false with the expiry as a Date', async () => {
      const pop = await pushAndPop('jobs', 2);
      const before = Date.now();

      const result = await client.extend(pop.leaseId, 10);

      expect(broker.requestsTo('extend')[0].body).toEqual({ seconds: 10 });
      expect(result).toMatchObject({
        leaseId: pop.leaseId,
        success: true,
        renewed: 1,
        lost: false,
      });
      expect(result.expiresAt).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$/);
      expect(result.expiry).toBeInstanceOf(Date);
      expect(result.expiry?.getTime()).toBeGreaterThanOrEqual(before + 9_000);
      expect(result.expiry?.getTime()).toBeLessThanOrEqual(Date.now() + 10_000);
    });

    it('reports lost with a null expiry and no hints when a broker without them answers 200 with renewed 0 for an unknown id', async () => {
      const result = await client.extend('0198f2c1-9a7b-7d20-8e31-4c5d6e7f8a90', 10);

      expect(result).toEqual({
        leaseId: '0198f2c1-9a7b-7d20-8e31-4c5d6e7f8a90',
        success: false,
        renewed: 0,
        newExpiresAt: null,
        expiresAt: null,
        lease_expires_at: null,
        lost: true,
        busy: false,
        expiry: null,
        renewAfterSeconds: null,
        deadlineSeconds: null,
        leaseStatus: null,
      });
    });

    it('reports lost once an ack has released the lease', async () => {
      const pop = await pushAndPop('jobs');
      const [message] = pop.messages;
      await client.ack({
        transactionId: message.transactionId,
        partitionId: message.partitionId,
        leaseId: pop.leaseId,
      });

      const result = await client.extend(pop.leaseId, 10);

      expect(result.lost).toBe(true);
    });

    it('reads Renew-After and Deadline-After as seconds when the broker runs with a ceiling', async () => {
      broker.renewalHints = true;
      broker.leaseMaxTotalSeconds = 60;
      const pop = await pushAndPop('jobs', 5);

      const result = await client.extend(pop.leaseId, 9);

      // The fake asks for a third of the 9 s left, to the millisecond.
      expect(result.renewAfterSeconds).toBeGreaterThan(2.9);
      expect(result.renewAfterSeconds).toBeLessThanOrEqual(3);
      expect(result.deadlineSeconds).toBeGreaterThan(59);
      expect(result.deadlineSeconds).toBeLessThanOrEqual(60);
      expect(result.leaseStatus).toBeNull();
    });

    it('reports no Renew-After once a renewal has reached the ceiling, only the time left', async () => {
      broker.renewalHints = true;
      broker.leaseMaxTotalSeconds = 5;
      const pop = await pushAndPop('jobs', 5);

      const result = await client.extend(pop.leaseId, 10);

      expect(result.lost).toBe(false);
      expect(result.renewAfterSeconds).toBeNull();
      expect(result.deadlineSeconds).toBeGreaterThan(4);
      expect(result.deadlineSeconds).toBeLessThanOrEqual(5);
    });

    it('reads any case of the header names, as fetch does', async () => {
      const pop = await pushAndPop('jobs');
      broker.extendHeaders = {
        'LEASEHOLD-RENEW-AFTER': '2.5',
        'leasehold-deadline-after': '84.120',
      };

      const result = await client.extend(pop.leaseId, 10);

      expect(result).toMatchObject({
        renewAfterSeconds: 2.5,
        deadlineSeconds: 84.12,
      });
    });

    it.each([
      ['empty', ''],
      ['a word', 'soon'],
      ['negative', '-3'],
      ['an exponent', '1e3'],
      ['hexadecimal', '0x10'],
      ['Infinity', 'Infinity'],
      ['NaN', 'NaN'],
      ['a decimal comma', '12,5'],
      ['without an integer part', '.5'],
      ['a trailing point', '5.'],
      ['400 digits long', '9'.repeat(400)],
    ])('ignores a seconds hint that is %s: no hint rather than a guess', async (_label, value) => {
      const pop = await pushAndPop('jobs');
      broker.extendHeaders = {
        'Leasehold-Renew-After': value,
        'Leasehold-Deadline-After': value,
      };

      const result = await client.extend(pop.leaseId, 10);

      expect(result).toMatchObject({
        lost: false,
        renewAfterSeconds: null,
        deadlineSeconds: null,
      });
    });

    it('reports Lease-Status expired when the lease ran out unrenewed', async () => {
      broker.renewalHints = true;
      const pop = await pushAndPop('jobs', 1);
      broker.advanceClock(1_500);

      const result = await client.extend(pop.leaseId, 10);

      expect(result).toMatchObject({
        lost: true,
        leaseStatus: 'expired',
        renewAfterSeconds: null,
        deadlineSeconds: null,
      });
    });

    it('reports Lease-Status unknown once an ack has released the lease', async () => {
      broker.renewalHints = true;
      const pop = await pushAndPop('jobs');
      const [message] = pop.messages;
      await client.ack({
        transactionId: message.transactionId,
        partitionId: message.partitionId,
        leaseId: pop.leaseId,
      });

      const result = await client.extend(pop.leaseId, 10);

      expect(result).toMatchObject({ lost: true, leaseStatus: 'unknown' });
    });

    it('reports busy rows as not lost, with the hint to renew again, whether or not any row was renewed', async () => {
      const pop = await pushAndPop('jobs');
      broker.extendHeaders = { 'Leasehold-Lease-Status': 'busy', 'Leasehold-Renew-After': '0.213' };
      const nothing = await client.extend('0198f2c1-9a7b-7d20-8e31-4c5d6e7f8a90');
      const some = await client.extend(pop.leaseId, 10);

      expect(nothing).toMatchObject({
        renewed: 0,
        lost: false,
        busy: true,
        renewAfterSeconds: 0.213,
        leaseStatus: null,
      });
      expect(some).toMatchObject({ renewed: 1, lost: false, busy: true, renewAfterSeconds: 0.213, leaseStatus: null });
    });

    it('ignores a Lease-Status it does not know, and every hint that contradicts renewed', async () => {
      const pop = await pushAndPop('jobs');
      broker.extendHeaders = {
        'Leasehold-Renew-After': '5',
        'Leasehold-Deadline-After': '50',
        'Leasehold-Lease-Status': 'gone',
      };
      const lost = await client.extend('0198f2c1-9a7b-7d20-8e31-4c5d6e7f8a90');
      broker.extendHeaders = { 'Leasehold-Lease-Status': 'expired' };
      const renewed = await client.extend(pop.leaseId, 10);

      expect(lost).toMatchObject({
        lost: true,
        leaseStatus: null,
        renewAfterSeconds: null,
        deadlineSeconds: null,
      });
      expect(renewed).toMatchObject({ lost: false, leaseStatus: null });
    });

    it('sends 60 seconds explicitly when no duration is given', async () => {
      const pop = await pushAndPop('jobs');

      await client.extend(pop.leaseId);

      expect(broker.requestsTo('extend')[0].body).toEqual({ seconds: 60 });
    });

    it.each([1.5, 0, -3, 2 ** 31, Number.NaN])(
      'refuses %p seconds locally, because the route would silently turn it into 60 or 1',
      async (seconds) => {
        await expect(client.extend('any', seconds)).rejects.toBeInstanceOf(RangeError);
        expect(broker.requestsTo('extend')).toHaveLength(0);
      },
    );
  });

  describe('ack and nack', () => {
    it('acks a single message with its lease id and releases the lease', async () => {
      const pop = await pushAndPop('jobs');
      const [message] = pop.messages;

      const result = await client.ack({
        transactionId: message.transactionId,
        partitionId: message.partitionId,
        leaseId: pop.leaseId,
      });

      expect(result).toMatchObject({
        success: true,
        leaseReleased: true,
        transactionId: message.transactionId,
      });
      await expect(client.pop('jobs')).resolves.toBeNull();
    });

    it('acks a batch in one request with the consumer group', async () => {
      await client.push([
        { queue: 'jobs', payload: 1 },
        { queue: 'jobs', payload: 2 },
      ]);
      const pop = await client.pop('jobs', { consumerGroup: 'g' });

      const results = await client.ackBatch(
        (pop?.messages ?? []).map((message) => ({
          transactionId: message.transactionId,
          partitionId: message.partitionId,
          leaseId: pop?.leaseId,
          status: 'completed' as const,
        })),
        { consumerGroup: 'g' },
      );

      expect(broker.requestsTo('ack-batch')[0].body).toMatchObject({
        consumerGroup: 'g',
      });
      expect(results.map((result) => [result.index, result.success])).toEqual([
        [0, true],
        [1, true],
      ]);
    });

    it('nacks with status failed and the error text, and the batch redelivers under a new lease', async () => {
      const pop = await pushAndPop('jobs');
      const [message] = pop.messages;

      await client.nack(
        {
          transactionId: message.transactionId,
          partitionId: message.partitionId,
          leaseId: pop.leaseId,
        },
        'handler blew up',
      );
      const redelivered = await client.pop('jobs');

      expect(broker.requestsTo('ack')[0].body).toMatchObject({
        status: 'failed',
        error: 'handler blew up',
      });
      expect(redelivered?.leaseId).not.toBe(pop.leaseId);
      expect(redelivered?.messages[0]).toMatchObject({
        transactionId: message.transactionId,
        deliveryAttempt: 2,
      });
    });

    it('nacks a whole batch with one request', async () => {
      const pop = await pushAndPop('jobs');

      await client.nackBatch(
        pop.messages.map((message) => ({
          transactionId: message.transactionId,
          partitionId: message.partitionId,
        })),
        'bad batch',
      );

      expect(broker.requestsTo('ack-batch')[0].body).toEqual({
        acknowledgments: [
          expect.objectContaining({
            status: 'failed',
            error: 'bad batch',
            transactionId: pop.messages[0].transactionId,
          }),
        ],
      });
    });

    it('sends leaseEpoch on an ack, which the broker refuses once a later claim has moved past it', async () => {
      const first = await pushAndPop('jobs');
      const [message] = first.messages;
      await client.nack(
        {
          transactionId: message.transactionId,
          partitionId: message.partitionId,
          leaseId: first.leaseId,
          leaseEpoch: message.leaseEpoch,
        },
        'retry',
      );
      const second = await client.pop('jobs');
      const stale = { ...message, leaseId: second?.leaseId };

      const refused = await client.ack(stale);
      const accepted = await client.ack({
        ...stale,
        leaseEpoch: second?.messages[0].leaseEpoch,
      });

      expect(broker.requestsTo('ack')[1].body).toMatchObject({
        leaseEpoch: 1,
      });
      expect(second?.messages[0].leaseEpoch).toBe(2);
      expect(refused).toMatchObject({
        success: false,
        error: 'invalid or expired lease',
      });
      expect(accepted).toMatchObject({ success: true });
    });

    it('returns success false with "invalid or expired lease" when acking after the lease expired', async () => {
      const pop = await pushAndPop('jobs', 1);
      const [message] = pop.messages;
      broker.advanceClock(1_500);

      const result = await client.ack({
        transactionId: message.transactionId,
        partitionId: message.partitionId,
        leaseId: pop.leaseId,
      });

      expect(result).toMatchObject({
        success: false,
        error: 'invalid or expired lease',
      });
    });
  });

  describe('configure', () => {
    it('sends the queue options and returns the options in force', async () => {
      const answer = await client.configure('jobs', {
        leaseTime: 30,
        retryLimit: 5,
        deadLetterQueue: true,
      });

      expect(answer).toEqual({
        configured: true,
        queue: 'jobs',
        options: { leaseTime: 30, retryLimit: 5, deadLetterQueue: true },
      });
    });
  });

  describe('timeouts', () => {
    it('aborts a request that outlives timeoutMs with a TimeoutError', async () => {
      const impatient = new LeaseholdClient({
        baseUrl: broker.baseUrl,
        timeoutMs: 200,
      });
      broker.delay('configure', 1_000);

      await expect(impatient.configure('jobs', {})).rejects.toMatchObject({
        name: 'TimeoutError',
      });
    });

    it('waits as long as it takes when timeoutMs is Infinity', async () => {
      const patient = new LeaseholdClient({
        baseUrl: broker.baseUrl,
        timeoutMs: Infinity,
      });
      broker.delay('configure', 50);

      await expect(patient.configure('jobs', {})).resolves.toMatchObject({
        configured: true,
      });
    });

    it("does not count a long poll's wait against timeoutMs", async () => {
      const impatient = new LeaseholdClient({
        baseUrl: broker.baseUrl,
        timeoutMs: 100,
      });
      const started = performance.now();

      await expect(impatient.pop('quiet', { wait: true, timeout: 400 })).resolves.toBeNull();
      expect(performance.now() - started).toBeGreaterThanOrEqual(390);
    });

    it('lets the caller abort a request through its own signal', async () => {
      const caller = new AbortController();
      const parked = client.pop('quiet', {
        wait: true,
        timeout: 5_000,
        signal: caller.signal,
      });
      await new Promise((resolve) => setTimeout(resolve, 50));

      caller.abort(new Error('caller gave up'));

      await expect(parked).rejects.toThrow('caller gave up');
    });
  });

  describe('headers and errors', () => {
    it('sends the token as a bearer and the tenant in the default x-queen-tenant header', async () => {
      broker.token = 'secret';
      const authed = new LeaseholdClient({
        baseUrl: broker.baseUrl,
        token: 'secret',
        tenant: 'acme',
      });

      await authed.pop('jobs');

      const [request] = broker.requests;
      expect(request.headers.authorization).toBe('Bearer secret');
      expect(request.headers['x-queen-tenant']).toBe('acme');
    });

    it('sends the tenant in a configured header instead', async () => {
      const gateway = new LeaseholdClient({
        baseUrl: broker.baseUrl,
        tenant: 'acme',
        tenantHeader: 'X-Tenant-Id',
      });

      await gateway.pop('jobs');

      expect(broker.requests[0].headers['x-tenant-id']).toBe('acme');
      expect(broker.requests[0].headers['x-queen-tenant']).toBeUndefined();
    });

    it('raises a LeaseholdError with the status and the broker error text on 401', async () => {
      broker.token = 'secret';

      const error: unknown = await client.push([{ queue: 'jobs', payload: 1 }]).catch((caught: unknown) => caught);

      expect(error).toBeInstanceOf(LeaseholdError);
      expect(error).toMatchObject({
        status: 401,
        brokerError: 'Authentication required',
        method: 'POST',
        path: '/api/v1/push',
      });
    });

    it('raises a LeaseholdError on a 500 from the extend route instead of reporting a renewal', async () => {
      broker.failNext('extend', 500, JSON.stringify({ error: 'pool' }));

      await expect(client.extend('any-lease', 5)).rejects.toMatchObject({
        name: 'LeaseholdError',
        status: 500,
        brokerError: 'pool',
      });
    });

    it('keeps the raw body as the error text when a proxy answers with something that is not JSON', async () => {
      broker.failNext('pop', 502, '<html>Bad Gateway</html>');

      await expect(client.pop('jobs')).rejects.toMatchObject({
        status: 502,
        brokerError: '<html>Bad Gateway</html>',
      });
    });
  });
});
