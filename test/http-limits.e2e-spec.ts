import { AddressInfo } from 'node:net';
import { NestExpressApplication } from '@nestjs/platform-express';
import request from 'supertest';
import { answerUntilClosed, openSocket } from './support/raw-socket';
import { createTestApp } from './support/test-app';
import { within } from './support/wait';

describe('HTTP server limits', () => {
  let app: NestExpressApplication;
  let port: number;
  const timers: NodeJS.Timeout[] = [];

  beforeAll(async () => {
    app = await createTestApp({
      HTTP_HEADERS_TIMEOUT_MS: '1000',
      HTTP_REQUEST_TIMEOUT_MS: '2000',
      HTTP_KEEP_ALIVE_TIMEOUT_MS: '500',
      HTTP_MAX_CONNECTIONS: '20',
    });
    await app.listen(0, '127.0.0.1');
    port = (app.getHttpServer().address() as AddressInfo).port;
  });

  afterEach(() => timers.splice(0).forEach(clearInterval));

  afterAll(async () => {
    await app.close();
  });

  it('cuts off a client that sends one header line at a time, at the header timeout (408), not after a minute', async () => {
    const socket = await openSocket(port);
    const answer = answerUntilClosed(socket);
    socket.write('GET /health HTTP/1.1\r\n');
    let line = 0;
    timers.push(setInterval(() => socket.writable && socket.write(`X-Slow-${(line += 1)}: a\r\n`), 200));
    const started = Date.now();

    expect(await within(answer, 'the server closes the connection', 10_000)).toMatch(/^HTTP\/1\.1 408 /);
    // 1 s of timeout and up to 1 s until the server's next check, with room for a loaded machine.
    expect(Date.now() - started).toBeLessThan(6_000);
  });

  it('cuts off a client that sends its body too slowly, at the request timeout (408)', async () => {
    const socket = await openSocket(port);
    const answer = answerUntilClosed(socket);
    socket.write(
      'POST /api/v1/push HTTP/1.1\r\nHost: broker\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{',
    );
    timers.push(setInterval(() => socket.writable && socket.write(' '), 200));
    const started = Date.now();

    expect(await within(answer, 'the server closes the connection', 10_000)).toMatch(/408/);
    expect(Date.now() - started).toBeLessThan(7_000);
  });

  it('closes a kept-alive connection that stays idle past the keep-alive timeout', async () => {
    const socket = await openSocket(port);
    const answer = answerUntilClosed(socket);
    socket.write('GET /health HTTP/1.1\r\nHost: broker\r\n\r\n');

    expect(await within(answer, 'the server closes the idle connection', 10_000)).toMatch(/^HTTP\/1\.1 200 /);
  });

  it('closes connections beyond HTTP_MAX_CONNECTIONS as they arrive, and serves again once they are gone', async () => {
    const held = await Promise.all(Array.from({ length: 20 }, () => openSocket(port)));
    const extra = await openSocket(port);

    await within(answerUntilClosed(extra), 'the connection past the cap is closed');
    held.forEach((socket) => socket.destroy());
    await within(
      (async () => {
        for (;;) {
          const response = await request(app.getHttpServer())
            .get('/health')
            .catch(() => undefined);
          if (response?.status === 200) return;
        }
      })(),
      'the broker serves again',
    );
  });
});

describe('DOCS_ENABLED=false', () => {
  it('serves neither Swagger UI nor the OpenAPI document', async () => {
    const app = await createTestApp({ DOCS_ENABLED: 'false' });
    try {
      expect((await request(app.getHttpServer()).get('/docs')).status).toBe(404);
      expect((await request(app.getHttpServer()).get('/docs-json')).status).toBe(404);
    } finally {
      await app.close();
    }
  });
});
