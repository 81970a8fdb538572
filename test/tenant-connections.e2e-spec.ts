import { AddressInfo, Socket } from 'node:net';
import { NestExpressApplication } from '@nestjs/platform-express';
import request from 'supertest';
import { ParkedPolls } from '../src/wakeup/parked-polls';
import { answerUntilClosed, openSocket } from './support/raw-socket';
import { createTestApp, newTenant, TENANT_HEADER } from './support/test-app';
import { waitFor, within } from './support/wait';

/** Headers of a push whose body (1000 bytes announced) has barely begun: the request stays in flight. */
function slowPush(tenant: string): string {
  return (
    `POST /api/v1/push HTTP/1.1\r\nHost: broker\r\n${TENANT_HEADER}: ${tenant}\r\n` +
    'Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n{'
  );
}

function poll(tenant: string, queue: string): string {
  return `GET /api/v1/pop/queue/${queue}?wait=true&timeout=30000 HTTP/1.1\r\nHost: broker\r\n${TENANT_HEADER}: ${tenant}\r\n\r\n`;
}

const status = (answer: string): number => Number(/^HTTP\/1\.1 (\d{3}) /.exec(answer)?.[1] ?? 0);

describe("one tenant's connections and requests in flight", () => {
  let app: NestExpressApplication;
  let port: number;
  const sockets: Socket[] = [];

  beforeAll(async () => {
    app = await createTestApp({
      HTTP_MAX_CONNECTIONS: '12',
      HTTP_TENANT_MAX_CONNECTIONS: '4',
      HTTP_TENANT_MAX_REQUESTS: '6',
      // Bodies that stop arriving are this test's way of holding requests: no rate cuts them.
      HTTP_BODY_MIN_BYTES_PER_SECOND: '0',
      HTTP_REQUEST_TIMEOUT_MS: '60000',
    });
    await app.listen(0, '127.0.0.1');
    port = (app.getHttpServer().address() as AddressInfo).port;
  });

  afterEach(() => sockets.splice(0).forEach((socket) => socket.destroy()));

  afterAll(async () => {
    await app.close();
  });

  async function open(): Promise<{ socket: Socket; answer: Promise<string> }> {
    const socket = await openSocket(port);
    sockets.push(socket);
    return { socket, answer: answerUntilClosed(socket) };
  }

  it('holds a slow tenant to its share of the connections, answering the rest 429 and closing them; another tenant gets in', async () => {
    const slow = newTenant();
    const opened = await Promise.all(Array.from({ length: 12 }, () => open()));
    const answers: string[] = [];
    for (const { socket, answer } of opened) {
      socket.write(slowPush(slow));
      void answer.then((text) => answers.push(text));
    }
    await waitFor(() => answers.length === 8, 'eight of the twelve are refused and closed', 20_000);

    for (const answer of answers) {
      expect(status(answer)).toBe(429);
      expect(answer).toMatch(/\r\nConnection: close\r\n/i);
      expect(answer).toMatch(/\r\nRetry-After: 1\r\n/i);
      expect(answer).toContain('{"error":"too many connections"}');
    }
    const other = newTenant();
    const pushed = await request(app.getHttpServer())
      .post('/api/v1/push')
      .set(TENANT_HEADER, other)
      .send({ items: [{ queue: 'calm', payload: 1 }] });
    expect(pushed.status).toBe(201);

    // Its held requests ended, the slow tenant has its share again.
    sockets.splice(0).forEach((socket) => socket.destroy());
    await waitFor(
      async () =>
        (
          await request(app.getHttpServer())
            .post('/api/v1/push')
            .set(TENANT_HEADER, slow)
            .send({ items: [{ queue: 'later', payload: 1 }] })
        ).status === 201,
      'the slow tenant pushes again',
    );
  });

  it('holds a tenant to its requests in flight, counting pipelined requests and parked polls', async () => {
    const tenant = newTenant();
    const connections = await Promise.all(Array.from({ length: 3 }, () => open()));
    // Two parked polls on each of three connections: six in flight, the tenant's whole share.
    for (const { socket } of connections) socket.write(poll(tenant, 'a') + poll(tenant, 'b'));
    await waitFor(() => app.get(ParkedPolls).total >= 6, 'six polls are parked');
    const fourth = await open();
    fourth.socket.write(poll(tenant, 'c'));
    let refused = '';
    fourth.socket.on('data', (chunk: string) => (refused += chunk));
    await waitFor(() => refused.includes('\r\n\r\n{'), 'the seventh request is answered');

    expect(status(refused)).toBe(429);
    expect(refused).toContain('{"error":"too many requests in flight"}');
    expect(refused).not.toMatch(/\r\nConnection: close\r\n/i);
  });
});

describe('bodies that arrive too slowly', () => {
  let app: NestExpressApplication;
  let port: number;
  const timers: NodeJS.Timeout[] = [];
  const sockets: Socket[] = [];

  beforeAll(async () => {
    app = await createTestApp({
      HTTP_BODY_MIN_BYTES_PER_SECOND: '100',
      HTTP_BODY_MIN_RATE_GRACE_MS: '1000',
      HTTP_REQUEST_TIMEOUT_MS: '120000',
    });
    await app.listen(0, '127.0.0.1');
    port = (app.getHttpServer().address() as AddressInfo).port;
  });

  afterEach(() => {
    timers.splice(0).forEach(clearInterval);
    sockets.splice(0).forEach((socket) => socket.destroy());
  });

  afterAll(async () => {
    await app.close();
  });

  /** Sends `head`, then one byte of body every 100 ms (10 bytes a second) until the server closes the connection. */
  async function trickle(head: string): Promise<{ answer: string; sent: number }> {
    const socket = await openSocket(port);
    sockets.push(socket);
    const answer = answerUntilClosed(socket);
    socket.write(head);
    let sent = 0;
    timers.push(
      setInterval(() => {
        if (socket.writable) socket.write(' ', () => (sent += 1));
      }, 100),
    );
    return { answer: await within(answer, 'the server closes the connection', 30_000), sent };
  }

  it.each([
    ['a push', 'POST /api/v1/push', 'application/json'],
    ['an extend', 'POST /api/v1/lease/0198f2c1-9a7b-7d20-8e31-4c5d6e7f8a90/extend', 'application/json'],
  ])(
    'cuts %s whose body arrives slower than the minimum rate, with 408, long before the request timeout',
    async (_what, line) => {
      const { answer, sent } = await trickle(
        `${line} HTTP/1.1\r\nHost: broker\r\n${TENANT_HEADER}: ${newTenant()}\r\n` +
          'Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n{',
      );

      expect(status(answer)).toBe(408);
      expect(answer).toContain('{"error":"request body arrived too slowly"}');
      expect(answer).toMatch(/\r\nConnection: close\r\n/i);
      // Far from the 100,000 bytes announced: the rate cut it, not the end of the body or the request timeout.
      expect(sent).toBeLessThan(1_000);
    },
  );

  it('reads a body that arrives in pieces at a fair rate', async () => {
    const tenant = newTenant();
    const body = JSON.stringify({ items: [{ queue: 'pieces', payload: 'x'.repeat(2_000) }] });
    const socket = await openSocket(port);
    sockets.push(socket);
    const answer = answerUntilClosed(socket);
    socket.write(
      `POST /api/v1/push HTTP/1.1\r\nHost: broker\r\n${TENANT_HEADER}: ${tenant}\r\nConnection: close\r\n` +
        `Content-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n`,
    );
    // 200 bytes every 100 ms: 2,000 bytes a second, well above the minimum, for a second and more.
    for (let offset = 0; offset < body.length; offset += 200) {
      socket.write(body.slice(offset, offset + 200));
      await new Promise((resolve) => setTimeout(resolve, 100));
    }

    expect(status(await within(answer, 'the push is answered'))).toBe(201);
  });
});
