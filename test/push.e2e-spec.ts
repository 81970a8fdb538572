import { sql, storedCounts } from './support/db-state';
import { expectPayloadsAsSent, SENT_PAYLOADS, sentItems } from './support/sent-payloads';
import { useTestBroker } from './support/test-broker';

const UUID_V7 = /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

describe('POST /api/v1/push', () => {
  const broker = useTestBroker();

  it('returns 201 with one result per item in order, creating the queue and its partitions on first push', async () => {
    const response = await broker.client.push([
      { queue: 'orders', payload: { n: 1 }, transactionId: 'a' },
      { queue: 'orders', partition: 'eu', payload: { n: 2 }, transactionId: 'b' },
      { queue: 'audit', payload: 'text' },
    ]);

    expect(response.status).toBe(201);
    expect(response.body).toHaveLength(3);
    expect(response.body.map((result: object) => Object.keys(result))).toEqual(
      Array(3).fill(['index', 'message_id', 'transaction_id', 'queueName', 'status']),
    );
    expect(response.body).toMatchObject([
      { index: 0, transaction_id: 'a', queueName: 'orders', status: 'queued' },
      { index: 1, transaction_id: 'b', queueName: 'orders', status: 'queued' },
      { index: 2, queueName: 'audit', status: 'queued' },
    ]);
    for (const result of response.body) expect(result.message_id).toMatch(UUID_V7);
    // A transactionId is minted when absent.
    expect(response.body[2].transaction_id).toMatch(UUID_V7);
    const partitions = await sql(
      broker.dataSource,
      `SELECT q.name AS queue, p.name AS partition, p.last_offset::int AS last_offset
         FROM partitions p JOIN queues q ON q.tenant_id = p.tenant_id AND q.id = p.queue_id
        WHERE p.tenant_id = $1 ORDER BY q.name, p.name`,
      [broker.client.tenant],
    );
    expect(partitions).toEqual([
      { queue: 'audit', partition: 'Default', last_offset: 1 },
      { queue: 'orders', partition: 'Default', last_offset: 1 },
      { queue: 'orders', partition: 'eu', last_offset: 1 },
    ]);
  });

  it('reports a repeated transactionId in the same partition as duplicate with the original message_id and stores it once', async () => {
    const first = await broker.client.push([{ queue: 'orders', payload: 1, transactionId: 'tx-1' }]);
    const again = await broker.client.push([
      { queue: 'orders', payload: 2, transactionId: 'tx-1' },
      { queue: 'orders', payload: 3, transactionId: 'tx-2' },
      { queue: 'orders', payload: 4, transactionId: 'tx-2' },
    ]);

    expect(again.status).toBe(201);
    expect(again.body).toMatchObject([
      { index: 0, message_id: first.body[0].message_id, transaction_id: 'tx-1', status: 'duplicate' },
      { index: 1, transaction_id: 'tx-2', status: 'queued' },
      { index: 2, message_id: again.body[1].message_id, transaction_id: 'tx-2', status: 'duplicate' },
    ]);
    const stored = await sql(
      broker.dataSource,
      'SELECT transaction_id, seq::int AS seq, payload FROM messages WHERE tenant_id = $1 ORDER BY seq',
      [broker.client.tenant],
    );
    // Offsets stay gapless: duplicates take none.
    expect(stored).toEqual([
      { transaction_id: 'tx-1', seq: 1, payload: 1 },
      { transaction_id: 'tx-2', seq: 2, payload: 3 },
    ]);
  });

  it('stores the same transactionId separately in different partitions and queues', async () => {
    const response = await broker.client.push([
      { queue: 'orders', partition: 'a', payload: 1, transactionId: 'same' },
      { queue: 'orders', partition: 'b', payload: 2, transactionId: 'same' },
      { queue: 'other', payload: 3, transactionId: 'same' },
    ]);

    expect(response.body.map((result: { status: string }) => result.status)).toEqual(['queued', 'queued', 'queued']);
  });

  it('stores and delivers a 2.1 MB payload under the default MESSAGE_MAX_BYTES, as Queen clients expect', async () => {
    const payload = { blob: 'q'.repeat(2_100_000) };
    const pushed = await broker.client.push([{ queue: 'large', payload }]);
    expect(pushed.status).toBe(201);
    expect(pushed.body[0].status).toBe('queued');

    const popped = await broker.client.popLeased('large');
    expect(popped.messages[0].data).toEqual(payload);
  });

  it('answers 201 [] for an empty items array and stores nothing', async () => {
    const response = await broker.client.push([]);

    expect(response.status).toBe(201);
    expect(response.body).toEqual([]);
    expect(await storedCounts(broker.dataSource, broker.client.tenant)).toMatchObject({ queues: 0, messages: 0 });
  });

  it('stores a null payload and delivers it as data null, with traceId and a null producerSub when auth is off', async () => {
    await broker.client.push([{ queue: 'orders', payload: null, transactionId: 'n', traceId: 'trace-1' }]);

    const pop = await broker.client.pop('orders');

    expect(pop.status).toBe(200);
    expect(pop.body.messages[0]).toMatchObject({
      transactionId: 'n',
      data: null,
      traceId: 'trace-1',
      producerSub: null,
    });
  });

  it('delivers payloads of every JSON type unchanged', async () => {
    const payloads = [
      0,
      -1.5,
      'text',
      true,
      false,
      [],
      {},
      [1, 'two', { three: [3] }],
      { nested: { deep: [null] } },
      'ünïcödé ✓',
    ];
    await broker.client.push(payloads.map((payload, n) => ({ queue: 'types', payload, transactionId: `t${n}` })));

    const pop = await broker.client.pop('types', { batch: 100 });

    expect(pop.body.messages.map((message: { data: unknown }) => message.data)).toEqual(payloads);
    // Each message keeps its own payload's size in bytes, as sent, multi-byte characters included.
    const stored = await sql<{ transaction_id: string; payload_bytes: number }>(
      broker.dataSource,
      `SELECT transaction_id, payload_bytes FROM messages WHERE tenant_id = $1 AND transaction_id LIKE 't%' ORDER BY seq`,
      [broker.client.tenant],
    );
    expect(stored).toEqual(
      payloads.map((payload, n) => ({
        transaction_id: `t${n}`,
        payload_bytes: Buffer.byteLength(JSON.stringify(payload)),
      })),
    );
  });

  it('stores each payload as the text it was sent in, minified, and pop answers that text byte for byte', async () => {
    const pushed = await broker.client.postText('/api/v1/push', `{"items": ${sentItems('texts', 'p')}}`);
    expect(pushed.status).toBe(201);
    expect(pushed.body.map((result: { status: string }) => result.status)).toEqual(SENT_PAYLOADS.map(() => 'queued'));

    const stored = await sql<{ payload: string; payload_bytes: number }>(
      broker.dataSource,
      'SELECT payload::text AS payload, payload_bytes FROM messages WHERE tenant_id = $1 ORDER BY seq',
      [broker.client.tenant],
    );
    expect(stored).toEqual(
      SENT_PAYLOADS.map(({ stored: text }) => ({ payload: text, payload_bytes: Buffer.byteLength(text) })),
    );
    const pop = await broker.client.pop('texts', { batch: 100 });
    expect(pop.status).toBe(200);
    // The answer's own text: parsing it would hide reordered keys and rewritten numbers.
    expectPayloadsAsSent(pop.text, 'p');
  });

  it('assigns offsets in push order within a partition, across requests', async () => {
    await broker.client.pushMany('orders', 3, undefined, 'first');
    await broker.client.pushMany('orders', 2, undefined, 'second');

    const pop = await broker.client.pop('orders', { batch: 10 });

    expect(pop.body.messages.map((message: { transactionId: string }) => message.transactionId)).toEqual([
      'first-0',
      'first-1',
      'first-2',
      'second-0',
      'second-1',
    ]);
  });

  it('keeps a transactionId that is a duplicate under concurrent pushes to one copy', async () => {
    const responses = await Promise.all(
      Array.from({ length: 5 }, (_, n) =>
        broker.client.push([{ queue: 'race', payload: n, transactionId: 'only-once' }]),
      ),
    );

    const statuses = responses.map((response) => response.body[0].status).sort();
    expect(statuses).toEqual(['duplicate', 'duplicate', 'duplicate', 'duplicate', 'queued']);
    const ids = new Set(responses.map((response) => response.body[0].message_id));
    expect(ids.size).toBe(1);
    expect((await storedCounts(broker.dataSource, broker.client.tenant)).messages).toBe(1);
  });

  describe('400s, with nothing stored', () => {
    it.each([
      ['no body', undefined, 'request body must be a JSON object'],
      ['a body that is an array', [{ queue: 'q', payload: 1 }], 'request body must be a JSON object'],
      ['a body without items', {}, 'items must be an array'],
      ['items that is an object', { items: { queue: 'q', payload: 1 } }, 'items must be an array'],
      ['items that is a string', { items: 'q' }, 'items must be an array'],
      ['items null', { items: null }, 'items must be an array'],
      ['an item that is not an object', { items: [42] }, 'items[0] must be a JSON object'],
      ['a missing queue', { items: [{ payload: 1 }] }, 'items[0].queue is required'],
      ['a queue that is a number', { items: [{ queue: 7, payload: 1 }] }, 'items[0].queue must be a string'],
      [
        'an empty queue name',
        { items: [{ queue: '', payload: 1 }] },
        'items[0].queue must be 1 to 255 characters long',
      ],
      [
        'a queue name of 256 characters',
        { items: [{ queue: 'q'.repeat(256), payload: 1 }] },
        'items[0].queue must be 1 to 255 characters long',
      ],
      [
        'a queue name with a newline',
        { items: [{ queue: 'a\nb', payload: 1 }] },
        'items[0].queue must not contain control characters',
      ],
      ['a missing payload', { items: [{ queue: 'q' }] }, 'items[0].payload is required (null is allowed)'],
      [
        'a partition that is an object',
        { items: [{ queue: 'q', partition: {}, payload: 1 }] },
        'items[0].partition must be a string',
      ],
      [
        'a transactionId that is a number',
        { items: [{ queue: 'q', payload: 1, transactionId: 5 }] },
        'items[0].transactionId must be a string',
      ],
      [
        'a traceId that is an array',
        { items: [{ queue: 'q', payload: 1, traceId: ['t'] }] },
        'items[0].traceId must be a string',
      ],
      [
        'a payload with \\u0000',
        { items: [{ queue: 'q', payload: { text: 'a\u0000b' } }] },
        'items[0].payload must not contain the character \\u0000',
      ],
      [
        'a payload key with \\u0000',
        { items: [{ queue: 'q', payload: { 'a\u0000': 1 } }] },
        'items[0].payload must not contain the character \\u0000',
      ],
      // PostgreSQL stores text as UTF-8 and cannot decode an escaped \ud800: unchecked, these were 500s, and a
      // name would be stored as U+FFFD while the answer reported the name sent.
      [
        'a queue name with an unpaired surrogate',
        { items: [{ queue: 'q\ud800', payload: 1 }] },
        'items[0].queue must not contain an unpaired UTF-16 surrogate',
      ],
      [
        'a partition with an unpaired surrogate',
        { items: [{ queue: 'q', partition: 'p\udc00', payload: 1 }] },
        'items[0].partition must not contain an unpaired UTF-16 surrogate',
      ],
      [
        'a transactionId with an unpaired surrogate',
        { items: [{ queue: 'q', payload: 1, transactionId: 't\ud800' }] },
        'items[0].transactionId must not contain an unpaired UTF-16 surrogate',
      ],
      [
        'a payload with an unpaired surrogate',
        { items: [{ queue: 'q', payload: { text: 'a\ud800' } }] },
        'items[0].payload must not contain an unpaired UTF-16 surrogate',
      ],
      [
        'a payload key with an unpaired surrogate',
        { items: [{ queue: 'q', payload: { 'a\udc00': 1 } }] },
        'items[0].payload must not contain an unpaired UTF-16 surrogate',
      ],
    ])('answers 400 for %s', async (_case, body, error) => {
      const response = await broker.client.post('/api/v1/push', body);

      expect(response.status).toBe(400);
      expect(response.body).toEqual({ error });
      expect(await storedCounts(broker.dataSource, broker.client.tenant)).toMatchObject({ queues: 0, messages: 0 });
    });

    it('refuses the whole request when a later item is invalid: the valid ones before it are not stored', async () => {
      const response = await broker.client.push([
        { queue: 'orders', payload: 1 },
        { queue: 'orders', payload: 2 },
        { queue: 'orders' },
      ]);

      expect(response.status).toBe(400);
      expect(response.body).toEqual({ error: 'items[2].payload is required (null is allowed)' });
      expect(await storedCounts(broker.dataSource, broker.client.tenant)).toMatchObject({
        queues: 0,
        partitions: 0,
        messages: 0,
      });
    });

    it('refuses \\u0000 and half surrogate pairs as written in the payload text, escapes and spaces included', async () => {
      for (const [payload, error] of [
        ['{ "text" : "a\\u0000b" }', 'items[0].payload must not contain the character \\u0000'],
        ['[ "\\uD800" ]', 'items[0].payload must not contain an unpaired UTF-16 surrogate'],
      ]) {
        const response = await broker.client.postText(
          '/api/v1/push',
          `{"items":[{"queue":"q","payload": ${payload}}]}`,
        );

        expect([response.status, response.body]).toEqual([400, { error }]);
      }
      expect(await storedCounts(broker.dataSource, broker.client.tenant)).toMatchObject({ queues: 0, messages: 0 });
    });

    it('answers 400 naming the item for a payload nested 101 levels deep', async () => {
      const deep = '['.repeat(101) + ']'.repeat(101);

      const response = await broker.client
        .post('/api/v1/push')
        .set('content-type', 'application/json')
        .send(`{"items":[{"queue":"q","payload":1},{"queue":"q","payload":${deep}}]}`);

      expect(response.status).toBe(400);
      expect(response.body).toEqual({ error: 'items[1].payload is nested more than 100 levels deep' });
    });

    it('answers 400 for a body nested 10000 levels deep before parsing it', async () => {
      // Sent as text: serialising it on this side would overflow the test's own stack.
      const deep = '['.repeat(10_000) + ']'.repeat(10_000);

      const response = await broker.client
        .post('/api/v1/push')
        .set('content-type', 'application/json')
        .send(`{"items":[{"queue":"q","payload":${deep}}]}`);

      expect(response.status).toBe(400);
      expect(response.body).toEqual({ error: 'JSON body is nested more than 108 levels deep' });
    });

    it('answers 400 for more than 10000 items', async () => {
      const response = await broker.client.push(Array.from({ length: 10_001 }, () => ({ queue: 'q', payload: 1 })));

      expect(response.status).toBe(400);
      expect(response.body).toEqual({ error: 'items may hold at most 10000 messages' });
    });

    it('answers 400 "invalid JSON body" for malformed JSON', async () => {
      const response = await broker.client
        .post('/api/v1/push')
        .set('content-type', 'application/json')
        .send('{"items": [');

      expect(response.status).toBe(400);
      expect(response.body).toEqual({ error: 'invalid JSON body' });
    });
  });

  describe('MESSAGE_MAX_BYTES, counted on the stored text', () => {
    const small = useTestBroker({ MESSAGE_MAX_BYTES: '64' });

    it('counts a payload without the whitespace the push leaves out, and names the stored size past the limit', async () => {
      const spaced = `{ "text" :   "${'x'.repeat(40)}" ,\n   "n" : [ 1 , 2 ]   }`;
      const stored = `{"text":"${'x'.repeat(40)}","n":[1,2]}`;
      const over = `{"text": "${'x'.repeat(60)}"}`;

      const fits = await small.client.postText('/api/v1/push', `{"items":[{"queue":"q","payload":${spaced}}]}`);
      const refused = await small.client.postText('/api/v1/push', `{"items":[{"queue":"q","payload":${over}}]}`);

      expect(Buffer.byteLength(spaced)).toBeGreaterThan(64);
      expect(fits.status).toBe(201);
      expect((await small.client.pop('q')).text).toContain(`"data":${stored},`);
      expect([refused.status, refused.body]).toEqual([
        413,
        { error: `items[0].payload is larger than 64 bytes (${Buffer.byteLength(`{"text":"${'x'.repeat(60)}"}`)})` },
      ]);
    });
  });
});
