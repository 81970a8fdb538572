import { Agent, request as httpRequest } from 'node:http';
import { AddressInfo, connect } from 'node:net';
import { NestExpressApplication } from '@nestjs/platform-express';
import { Client } from 'pg';
import { DrainService } from '../src/lifecycle/drain.service';
import { ParkedPolls } from '../src/wakeup/parked-polls';
import { KeptAliveConnection } from './support/kept-alive';
import { createLease } from './support/lease-fixture';
import { lockTenantRows, openSession } from './support/pg-session';
import { answerUntilClosed, openSocket } from './support/raw-socket';
import { createTestApp, newTenant, onEmbeddedDatabase, TENANT_HEADER } from './support/test-app';
import { ACK_ON_ITS_CURSOR, waitFor, waitForLockWaiter } from './support/wait';

interface Answer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: string;
}

function call(
  port: number,
  agent: Agent,
  method: string,
  path: string,
  headers: Record<string, string> = {},
  body?: string,
): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const outgoing = httpRequest({ host: '127.0.0.1', port, method, path, agent, headers }, (response) => {
      let text = '';
      response.setEncoding('utf8');
      response.on('data', (chunk: string) => (text += chunk));
      response.on('end', () => resolve({ status: response.statusCode!, headers: response.headers, body: text }));
    });
    outgoing.on('error', reject);
    outgoing.end(body);
  });
}

const refused = (port: number): Promise<boolean> =>
  new Promise((resolve) => {
    const probe = connect(port, '127.0.0.1');
    probe.on('connect', () => {
      probe.destroy();
      resolve(false);
    });
    probe.on('error', () => resolve(true));
  });

/** A push of one message, with its transactionId, as raw bytes for a kept-alive connection. */
function pushRequest(tenant: string, transactionId: string): string {
  const body = JSON.stringify({ items: [{ queue: 'drained', payload: {}, transactionId }] });
  return (
    `POST /api/v1/push HTTP/1.1\r\nHost: broker\r\n${TENANT_HEADER}: ${tenant}\r\n` +
    `Content-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`
  );
}

/** Read on a session of the test's own: the application's pool may be closed by then. */
async function storedIds(tenant: string): Promise<string[]> {
  const session = await openSession();
  try {
    // In a transaction: the embedded database's socket server keeps it together.
    await session.query('BEGIN');
    const { rows } = await session.query<{ transaction_id: string }>(
      'SELECT transaction_id FROM messages WHERE tenant_id = $1 ORDER BY transaction_id',
      [tenant],
    );
    await session.query('COMMIT');
    return rows.map((row) => row.transaction_id);
  } finally {
    await session.end();
  }
}

describe('kept-alive connections when draining begins', () => {
  it('answers 503 to requests already in their buffers, pipelined ones included, and closes a silent one after the grace', async () => {
    const app = await createTestApp({ SHUTDOWN_TIMEOUT_MS: '10000', SHUTDOWN_IDLE_GRACE_MS: '300' });
    const connections: KeptAliveConnection[] = [];
    let closing: Promise<void> | undefined;
    try {
      await app.listen(0, '127.0.0.1');
      const port = (app.getHttpServer().address() as AddressInfo).port;
      const tenant = newTenant();
      for (let index = 0; index < 4; index += 1) {
        const connection = await KeptAliveConnection.open(port);
        connections.push(connection);
        const [first] = connection.send([pushRequest(tenant, `before-${index}`)])!;
        expect((await first).status).toBe(201);
        expect(connection.open).toBe(true);
      }
      const [single, other, pipelining, silent] = connections;
      const silentClosed = silent.closed();

      // Written before draining begins, in the same turn: the bytes wait in the sockets' buffers, unread.
      const answers = [
        ...single.send([pushRequest(tenant, 'single')])!,
        ...other.send([pushRequest(tenant, 'other')])!,
        ...pipelining.send(['one', 'two', 'three'].map((id) => pushRequest(tenant, `pipelined-${id}`)))!,
      ];
      app.get(DrainService).begin();
      closing = app.close();

      const answered = await Promise.all(answers);
      expect(
        answered.map(({ status, body, lost, headers }) => ({ status, body, lost, retryAfter: headers['retry-after'] })),
      ).toEqual(
        answered.map(() => ({ status: 503, body: '{"error":"shutting down"}', lost: undefined, retryAfter: '1' })),
      );
      // Only the last answer on a connection says it closes: Node sends nothing queued behind that one.
      expect(answered.map(({ headers }) => headers.connection)).toEqual([
        'close',
        'close',
        'keep-alive',
        'keep-alive',
        'close',
      ]);
      await silentClosed;
      await closing;
      expect(await storedIds(tenant)).toEqual(['before-0', 'before-1', 'before-2', 'before-3']);
    } finally {
      for (const connection of connections) connection.destroy();
      await (closing ?? app.close());
    }
  });
});

// A request is held in flight by a row lock from another session: real PostgreSQL only.
(onEmbeddedDatabase ? describe.skip : describe)('draining on shutdown', () => {
  let blocker: Client;
  let observer: Client;
  let agent: Agent;

  beforeEach(async () => {
    blocker = await openSession();
    observer = await openSession();
    agent = new Agent({ keepAlive: true });
  });

  afterEach(async () => {
    agent.destroy();
    await blocker.end();
    await observer.end();
  });

  /** An ack held in flight by a row lock until the test rolls the blocker back (a renewal would not wait for it). */
  async function holdAnAck(app: NestExpressApplication, port: number): Promise<{ answer: Promise<Answer> }> {
    const tenant = newTenant();
    const lease = await createLease(app, tenant, [30]);
    await lockTenantRows(blocker, 'consumers', tenant);
    const answer = call(
      port,
      agent,
      'POST',
      '/api/v1/ack',
      {
        [TENANT_HEADER]: tenant,
        'content-type': 'application/json',
      },
      JSON.stringify({ ...lease.messages[0], leaseId: lease.leaseId }),
    );
    answer.catch(() => undefined);
    await waitForLockWaiter(observer, ACK_ON_ITS_CURSOR);
    return { answer };
  }

  it('takes no new request on any connection, kept-alive idle ones included, lets the one in flight finish with Connection: close, then closes', async () => {
    const app = await createTestApp({ SHUTDOWN_TIMEOUT_MS: '20000' });
    await app.listen(0, '127.0.0.1');
    const port = (app.getHttpServer().address() as AddressInfo).port;

    // A kept-alive connection with no request on it (its own agent: the extend must not reuse it).
    const idleAgent = new Agent({ keepAlive: true });
    expect((await call(port, idleAgent, 'GET', '/health')).status).toBe(200);
    const idle = Object.values(idleAgent.freeSockets).flat()[0]!;
    const idleClosed = new Promise<void>((resolve) => idle.once('close', () => resolve()));
    // A request whose headers are still arriving when draining begins.
    const slow = await openSocket(port);
    slow.write('GET /health HTTP/1.1\r\nHost: broker\r\n');
    const slowAnswer = answerUntilClosed(slow);
    const inFlight = (await holdAnAck(app, port)).answer;

    const closing = app.close();
    await waitFor(() => refused(port), 'the listener closes');
    // While a request is in flight, an idle kept-alive connection stays open: what its client sends is answered 503.
    const onIdle = await call(port, idleAgent, 'GET', '/health');
    expect({ status: onIdle.status, connection: onIdle.headers.connection }).toEqual({
      status: 503,
      connection: 'close',
    });
    await idleClosed;
    slow.write('\r\n');
    const refusedRequest = await slowAnswer;
    expect(refusedRequest).toMatch(/^HTTP\/1\.1 503 /);
    expect(refusedRequest).toMatch(/\r\nConnection: close\r\n/i);
    expect(refusedRequest).toMatch(/\r\nRetry-After: 1\r\n/i);
    expect(refusedRequest).toContain('{"error":"shutting down"}');

    await blocker.query('ROLLBACK');
    const finished = await inFlight;
    expect(finished.status).toBe(200);
    expect(JSON.parse(finished.body)).toEqual([expect.objectContaining({ success: true, leaseReleased: true })]);
    expect(finished.headers.connection).toBe('close');
    await closing;
    expect(app.get(DrainService).requestsCut).toBe(0);
    idleAgent.destroy();
  });

  it('answers a request pipelined behind one in flight: the connection closes only after its answer', async () => {
    const app = await createTestApp({ SHUTDOWN_TIMEOUT_MS: '20000', SHUTDOWN_IDLE_GRACE_MS: '300' });
    await app.listen(0, '127.0.0.1');
    const port = (app.getHttpServer().address() as AddressInfo).port;
    const tenant = newTenant();
    const lease = await createLease(app, tenant, [30]);
    await lockTenantRows(blocker, 'consumers', tenant);
    const connection = await KeptAliveConnection.open(port);
    try {
      const ack = JSON.stringify({ ...lease.messages[0], leaseId: lease.leaseId });
      const [acked, pushed] = connection.send([
        `POST /api/v1/ack HTTP/1.1\r\nHost: broker\r\n${TENANT_HEADER}: ${tenant}\r\n` +
          `Content-Type: application/json\r\nContent-Length: ${Buffer.byteLength(ack)}\r\n\r\n${ack}`,
        pushRequest(tenant, 'behind-the-ack'),
      ])!;
      // The ack waits for the row lock; the push behind it is served, its answer queued behind the ack's.
      await waitForLockWaiter(observer, ACK_ON_ITS_CURSOR);
      await waitFor(async () => (await storedIds(tenant)).includes('behind-the-ack'), 'the push is stored');

      const closing = app.close();
      await blocker.query('ROLLBACK');
      expect((await acked).status).toBe(200);
      const push = await pushed;
      expect({ status: push.status, lost: push.lost }).toEqual({ status: 201, lost: undefined });
      await connection.closed();
      await closing;
    } finally {
      connection.destroy();
    }
  });

  it('cuts a request still running at SHUTDOWN_TIMEOUT_MS and counts it', async () => {
    const app = await createTestApp({ SHUTDOWN_TIMEOUT_MS: '500' });
    await app.listen(0, '127.0.0.1');
    const port = (app.getHttpServer().address() as AddressInfo).port;
    const inFlight = (await holdAnAck(app, port)).answer;

    const started = Date.now();
    const closing = app.close();
    await expect(inFlight).rejects.toThrow(/socket hang up|ECONNRESET/);
    expect(Date.now() - started).toBeGreaterThanOrEqual(450);
    await blocker.query('ROLLBACK');
    await closing;
    expect(app.get(DrainService).requestsCut).toBe(1);
  });

  it('does not wait for answers that were queued behind a pipelined long poll when the client hung up', async () => {
    const app = await createTestApp({ SHUTDOWN_TIMEOUT_MS: '5000' });
    await app.listen(0, '127.0.0.1');
    const port = (app.getHttpServer().address() as AddressInfo).port;
    const socket = await openSocket(port);
    const closed = answerUntilClosed(socket);
    const tenant = `${TENANT_HEADER}: ${newTenant()}\r\n`;
    socket.write(
      `GET /api/v1/pop/queue/pipelined?wait=true&timeout=30000 HTTP/1.1\r\nHost: broker\r\n${tenant}\r\n` +
        `GET /api/v1/pop/queue/pipelined HTTP/1.1\r\nHost: broker\r\n${tenant}\r\n` +
        `GET /health/live HTTP/1.1\r\nHost: broker\r\n\r\n`,
    );
    await waitFor(() => app.get(ParkedPolls).total === 1, 'the long poll parks');
    socket.destroy();
    await closed;
    await waitFor(() => app.get(ParkedPolls).total === 0, 'the long poll ends with its connection');

    const started = Date.now();
    await app.close();
    expect(app.get(DrainService).requestsCut).toBe(0);
    expect(Date.now() - started).toBeLessThan(4_000);
  });
});
