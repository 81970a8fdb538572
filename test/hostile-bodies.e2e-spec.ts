import { AddressInfo } from 'node:net';
import { gzipSync } from 'node:zlib';
import { NestExpressApplication } from '@nestjs/platform-express';
import request from 'supertest';
import { Database } from '../src/database/database';
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
    expect(await storedCounts(app.get(Database), tenant)).toMatchObject({ queues: 0, messages: 0 });
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
      expect(await storedCounts(lenient.get(Database), tenant)).toMatchObject({ queues: 0, messages: 0 });
    } finally {
      await lenient.close();
    }
  });

  it('refuses a message above MESSAGE_MAX_BYTES with 413 naming the item, and stores none of the push', async () => {
    const big = 'x'.repeat(4 * 1024 * 1024);
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
    expect(response.body).toEqual({ error: `items[1].payload is larger than 4194304 bytes (${big.length + 2})` });
    expect(await storedCounts(app.get(Database), tenant)).toMatchObject({ queues: 0, messages: 0 });
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

/** `{"seconds":[{},{},...]}` of about `bytes` bytes. */
function secondsFlood(bytes: number): Buffer {
  const head = '{"seconds":[';
  const tail = '{}]}';
  return Buffer.from(`${head}${'{},'.repeat(Math.floor((bytes - head.length - tail.length) / 3))}${tail}`);
}

describe.each([
  ['ahead of the router', true],
  ['through the router', false],
])('the lease route reads a few bytes, %s (auth on)', (_path, fastPath) => {
  let app: NestExpressApplication;
  let port: number;
  let leaseId: string;
  const tenant = newTenant();
  const worker = () => `Bearer ${hsToken({ role: 'read-write', tenant })}`;
  const extendPath = () => `/api/v1/lease/${leaseId}/extend`;

  beforeAll(async () => {
    app = await createTestApp(
      { JWT_ENABLED: 'true', JWT_SECRET: TEST_JWT_SECRET, BODY_LIMIT: '16mb', BODY_MAX_JSON_VALUES: '10' },
      { fastPath },
    );
    await app.listen(0, '127.0.0.1');
    port = (app.getHttpServer().address() as AddressInfo).port;
    const http = request(app.getHttpServer());
    await http
      .post('/api/v1/push')
      .set('authorization', worker())
      .send({ items: [{ queue: 'held', payload: 1 }] })
      .expect(201);
    leaseId = (await http.get('/api/v1/pop/queue/held').set('authorization', worker()).expect(200)).body.leaseId;
  });

  afterAll(async () => {
    await app.close();
  });

  /** The request line and headers of an extend whose body comes framed as `framing` says. */
  const extendHead = (framing: string): string =>
    [
      `POST ${extendPath()} HTTP/1.1`,
      'Host: broker',
      `Authorization: ${worker()}`,
      'Content-Type: application/json',
      framing,
      '',
      '',
    ].join('\r\n');

  const renewedNormally = async (): Promise<void> => {
    const response = await request(app.getHttpServer())
      .post(extendPath())
      .set('authorization', worker())
      .send({ seconds: 30 });
    expect(response.status).toBe(200);
    expect(response.body.renewed).toBe(1);
  };

  it('refuses a 16 MB body from its declared length with 413, reading none of it, and closes the connection', async () => {
    const socket = await openSocket(port);
    const closed = answerUntilClosed(socket);
    socket.write(extendHead(`Content-Length: ${16 * 1024 * 1024}`));
    socket.write(secondsFlood(4096));

    const answer = await within(closed, 'the broker answers and closes the connection');
    expect(answer).toMatch(/^HTTP\/1\.1 413 /);
    expect(answer).toMatch(/\r\nConnection: close\r\n/i);
    expect(answer).toContain('{"error":"payload too large"}');
    await renewedNormally();
  });

  it('cuts a chunked body off with 413 as soon as it passes 1 KiB', async () => {
    const socket = await openSocket(port);
    const closed = answerUntilClosed(socket);
    socket.write(extendHead('Transfer-Encoding: chunked'));
    const chunk = secondsFlood(2048);
    socket.write(`${chunk.length.toString(16)}\r\n`);
    socket.write(chunk);
    socket.write('\r\n');
    // No terminating chunk: the broker must not wait for the rest.

    const answer = await within(closed, 'the broker answers and closes the connection');
    expect(answer).toMatch(/^HTTP\/1\.1 413 /);
    await renewedNormally();
  });

  it('refuses a gzip body that inflates past 1 KiB with 413', async () => {
    const response = await rawGzipRequest(
      app.getHttpServer(),
      'POST',
      extendPath(),
      { authorization: worker() },
      gzipSync(secondsFlood(16 * 1024 * 1024), { level: 9 }),
    );

    expect(response.status).toBe(413);
    expect(response.body).toEqual({ error: 'payload too large' });
  });

  it('does not parse a small body past BODY_MAX_JSON_VALUES: it renews by the default 60 s, never a 400', async () => {
    const response = await rawRequest(
      app.getHttpServer(),
      'POST',
      extendPath(),
      { authorization: worker(), 'content-type': 'application/json' },
      `{"seconds":3600,"x":[${'0,'.repeat(30)}0]}`,
    );

    expect(response.status).toBe(200);
    expect(response.body).toMatchObject({ renewed: 1 });
    const secondsLeft = (Date.parse((response.body as { newExpiresAt: string }).newExpiresAt) - Date.now()) / 1000;
    expect(secondsLeft).toBeLessThan(120);
  });
});

describe('routes that take no body', () => {
  let app: NestExpressApplication;

  beforeAll(async () => {
    app = await createTestApp({ BODY_LIMIT: '16mb' });
  });

  afterAll(async () => {
    await app.close();
  });

  it('refuse more than 64 KiB with 413, whatever BODY_LIMIT allows', async () => {
    const body = `{"x":"${'y'.repeat(100 * 1024)}"}`;
    const response = await rawRequest(
      app.getHttpServer(),
      'GET',
      '/api/v1/pop/queue/anything',
      { 'content-type': 'application/json', 'content-length': String(body.length) },
      body,
    );

    expect(response.status).toBe(413);
    expect(response.body).toEqual({ error: 'payload too large' });
  });
});
