import { AddressInfo } from 'node:net';
import { gzipSync } from 'node:zlib';
import { NestExpressApplication } from '@nestjs/platform-express';
import request from 'supertest';
import { DataSource } from 'typeorm';
import { storedCounts } from './support/db-state';
import { rawGzipRequest, rawRequest } from './support/raw-request';
import { answerUntilClosed, openSocket } from './support/raw-socket';
import { createTestApp, newTenant } from './support/test-app';
import { hsToken, TEST_JWT_SECRET } from './support/tokens';
import { within } from './support/wait';

const SIXTEEN_MIB = 16 * 1024 * 1024;

/** `{"items":[{"queue":"q","payload":[{},{},...]}]}` inflating to about 16 MiB, gzipped to some 16 KB. */
function gzipBomb(): Buffer {
  const head = '{"items":[{"queue":"q","payload":[';
  const tail = '{}]}]}';
  const count = Math.floor((SIXTEEN_MIB - 64 - head.length - tail.length) / 3);
  return gzipSync(Buffer.from(`${head}${'{},'.repeat(count)}${tail}`), { level: 9 });
}

describe('bodies sent to hurt the broker (auth on)', () => {
  let app: NestExpressApplication;
  let port: number;
  let bomb: Buffer;
  const tenant = newTenant();
  const writer = () => `Bearer ${hsToken({ role: 'write-only', tenant })}`;

  beforeAll(async () => {
    app = await createTestApp({ JWT_ENABLED: 'true', JWT_SECRET: TEST_JWT_SECRET, BODY_LIMIT: '16mb' });
    await app.listen(0, '127.0.0.1');
    port = (app.getHttpServer().address() as AddressInfo).port;
    bomb = gzipBomb();
  });

  afterAll(async () => {
    await app.close();
  });

  it('refuses an anonymous push with 401 from its headers, before its body has even arrived, and closes the connection', async () => {
    const socket = await openSocket(port);
    const closed = answerUntilClosed(socket);
    socket.write(
      [
        'POST /api/v1/push HTTP/1.1',
        'Host: broker',
        'Content-Type: application/json',
        'Content-Encoding: gzip',
        `Content-Length: ${bomb.length}`,
        '',
        '',
      ].join('\r\n'),
    );
    // A first kilobyte only: the rest is never sent.
    socket.write(bomb.subarray(0, 1024));

    const answer = await within(closed, 'the broker answers and closes the connection');
    expect(answer).toMatch(/^HTTP\/1\.1 401 /);
    expect(answer).toMatch(/\r\nConnection: close\r\n/i);
    expect(answer).toContain('{"error":"Authentication required"}');
  });

  it('refuses a push whose gzip body inflates more than 100 times with 413, and stores nothing', async () => {
    const response = await rawGzipRequest(
      app.getHttpServer(),
      'POST',
      '/api/v1/push',
      { authorization: writer() },
      bomb,
    );

    expect(response.status).toBe(413);
    expect(response.body).toEqual({ error: 'compressed body inflates more than 100 times' });
    expect(await storedCounts(app.get(DataSource), tenant)).toMatchObject({ queues: 0, messages: 0 });
  });

  it('refuses a payload of millions of values with 413 before parsing it, and keeps serving', async () => {
    const lenient = await createTestApp({
      JWT_ENABLED: 'true',
      JWT_SECRET: TEST_JWT_SECRET,
      BODY_LIMIT: '16mb',
      BODY_MAX_INFLATE_RATIO: '100000',
    });
    try {
      const response = await rawGzipRequest(
        lenient.getHttpServer(),
        'POST',
        '/api/v1/push',
        { authorization: writer() },
        bomb,
      );

      expect(response.status).toBe(413);
      expect(response.body).toEqual({ error: 'JSON body has more than 500000 elements' });
      expect((await request(lenient.getHttpServer()).get('/health')).status).toBe(200);
      expect(await storedCounts(lenient.get(DataSource), tenant)).toMatchObject({ queues: 0, messages: 0 });
    } finally {
      await lenient.close();
    }
  });

  it('refuses a message above MESSAGE_MAX_BYTES with 413 naming the item, and stores none of the push', async () => {
    const big = 'x'.repeat(1024 * 1024);
    const response = await request(app.getHttpServer())
      .post('/api/v1/push')
      .set('authorization', writer())
      .send({
        items: [
          { queue: 'big', payload: 'small' },
          { queue: 'big', payload: big },
        ],
      });

    expect(response.status).toBe(413);
    expect(response.body).toEqual({ error: `items[1].payload is larger than 1048576 bytes (${big.length + 2})` });
    expect(await storedCounts(app.get(DataSource), tenant)).toMatchObject({ queues: 0, messages: 0 });
  });

  it.each([
    ['deflate', 'deflate'],
    ['an unknown encoding', 'compress'],
  ])('answers %s bodies it cannot inflate with a 4xx, never a 500', async (_case, encoding) => {
    const response = await rawRequest(
      app.getHttpServer(),
      'POST',
      '/api/v1/push',
      {
        authorization: writer(),
        'content-type': 'application/json',
        'content-encoding': encoding,
      },
      Buffer.from('not compressed at all'),
    );

    expect(response.status).toBeGreaterThanOrEqual(400);
    expect(response.status).toBeLessThan(500);
    expect(response.body).toEqual({ error: expect.any(String) });
  });
});
