import { Agent, IncomingMessage, request as httpRequest } from 'node:http';
import { AddressInfo, connect, Socket } from 'node:net';
import { NestExpressApplication } from '@nestjs/platform-express';
import request from 'supertest';
import { MAX_PIPELINED_REQUESTS } from '../src/http/connection-roster';
import { answerUntilClosed, openSocket } from './support/raw-socket';
import { createTestApp, newTenant } from './support/test-app';
import { hsToken, TEST_JWT_SECRET } from './support/tokens';
import { waitFor, within } from './support/wait';

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

  it('answers requests pipelined on one connection, in order', async () => {
    const socket = await openSocket(port);
    const answer = answerUntilClosed(socket);
    const paths = ['/health/live', '/health', '/health/live', '/nothing-here', '/health/live'];
    socket.write(
      paths
        .map(
          (path, index) =>
            `GET ${path} HTTP/1.1\r\nHost: broker\r\n${index === paths.length - 1 ? 'Connection: close\r\n' : ''}\r\n`,
        )
        .join(''),
    );

    const statuses = [...(await within(answer, 'every answer')).matchAll(/HTTP\/1\.1 (\d{3}) /g)].map((m) => m[1]);
    expect(statuses).toEqual(['200', '200', '200', '404', '200']);
  });

  it(`closes a connection that pipelines more than ${MAX_PIPELINED_REQUESTS} requests ahead, serving none past them`, async () => {
    const socket = await openSocket(port);
    let built = 0;
    const countBuilt = (incoming: IncomingMessage) => {
      if (incoming.socket.remotePort === socket.localPort) built += 1;
    };
    app.getHttpServer().prependListener('request', countBuilt);
    const answer = answerUntilClosed(socket);
    const count = 5_000;
    socket.write('GET /health/live HTTP/1.1\r\nHost: broker\r\n\r\n'.repeat(count - 1));
    socket.write('GET /health/live HTTP/1.1\r\nHost: broker\r\nConnection: close\r\n\r\n');

    const answered = (await within(answer, 'the server closes the connection')).match(/HTTP\/1\.1 200 /g) ?? [];
    app.getHttpServer().off('request', countBuilt);
    expect(answered.length).toBeLessThanOrEqual(MAX_PIPELINED_REQUESTS);
    // Node parses the rest of the chunk it was reading (about 1,400 requests here); none of it becomes a request.
    expect(built).toBeLessThan(100);
    // The next connection gets the cut one's pooled parser.
    await request(app.getHttpServer()).get('/health/live').expect(200);
  });

  it('at HTTP_MAX_CONNECTIONS, makes room for a newcomer by closing the oldest connection that never sent a request', async () => {
    const held = await Promise.all(Array.from({ length: 20 }, () => openSocket(port)));
    const oldestClosed = answerUntilClosed(held[0]);
    const newcomer = await openSocket(port);
    const answer = answerUntilClosed(newcomer);

    await within(oldestClosed, 'the oldest idle connection is closed');
    newcomer.write('GET /health/live HTTP/1.1\r\nHost: broker\r\nConnection: close\r\n\r\n');
    expect(await within(answer, 'the newcomer is answered')).toMatch(/^HTTP\/1\.1 200 /);
    held.forEach((socket) => socket.destroy());
  });
});

describe('a flood of anonymous connections that never finish their headers', () => {
  const CAP = 40;
  let app: NestExpressApplication;
  let port: number;
  let flooding = true;
  const flood: Socket[] = [];

  beforeAll(async () => {
    app = await createTestApp({
      JWT_ENABLED: 'true',
      JWT_SECRET: TEST_JWT_SECRET,
      HTTP_MAX_CONNECTIONS: String(CAP),
      HTTP_HEADERS_TIMEOUT_MS: '60000',
      HTTP_REQUEST_TIMEOUT_MS: '60000',
      HTTP_KEEP_ALIVE_TIMEOUT_MS: '60000',
    });
    await app.listen(0, '127.0.0.1');
    port = (app.getHttpServer().address() as AddressInfo).port;
  });

  afterAll(async () => {
    flooding = false;
    flood.forEach((socket) => socket.destroy());
    await app.close();
  });

  /** A socket that sends half a request line, and comes back as soon as it is cut. */
  function slowHeaders(): void {
    if (!flooding) return;
    const socket = connect(port, '127.0.0.1');
    flood.push(socket);
    socket.on('connect', () => socket.write('GET /health HTTP/1.1\r\nX-Slow: '));
    socket.on('error', () => undefined);
    socket.on('close', () => setImmediate(slowHeaders));
  }

  it("keeps an authenticated keep-alive client's connection and lets new clients in, however fast the flood reconnects", async () => {
    const tenant = newTenant();
    const auth = `Bearer ${hsToken({ role: 'read-write', tenant })}`;
    const agent = new Agent({ keepAlive: true, maxSockets: 1 });
    const first = await call(port, agent, auth);
    expect(first.status).toBe(204);

    for (let index = 0; index < CAP * 3; index += 1) slowHeaders();
    await waitFor(() => flood.length >= CAP * 3, 'the flood is under way');

    const kept: Array<{ status: number; socket?: Socket }> = [];
    const fresh: number[] = [];
    for (let round = 0; round < 10; round += 1) {
      kept.push(await call(port, agent, auth));
      const once = new Agent({ keepAlive: false });
      fresh.push((await call(port, once, auth).catch(() => ({ status: 0 }))).status);
    }

    expect(kept.map(({ status }) => status)).toEqual(kept.map(() => 204));
    // The same connection all along: the flood never took it.
    expect(kept.every(({ socket }) => socket === first.socket)).toBe(true);
    expect(fresh.filter((status) => status === 204).length).toBeGreaterThanOrEqual(8);
    agent.destroy();
  });
});

/** A pop of an empty queue (204) through the agent, and the connection that carried it. */
function call(port: number, agent: Agent, authorization: string): Promise<{ status: number; socket?: Socket }> {
  return new Promise((resolve, reject) => {
    const request = httpRequest(
      { host: '127.0.0.1', port, agent, path: '/api/v1/pop/queue/quiet', headers: { authorization } },
      (response) => {
        response.resume();
        response.on('end', () => resolve({ status: response.statusCode ?? 0, socket: response.socket }));
      },
    );
    request.on('error', reject);
    request.end();
  });
}

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
