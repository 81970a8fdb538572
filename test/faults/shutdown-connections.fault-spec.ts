import { Client } from 'pg';
import { openSession } from '../support/pg-session';
import { newTenant, onEmbeddedDatabase, TENANT_HEADER } from '../support/test-app';
import { waitFor, within } from '../support/wait';
import { BrokerProcess } from './support/broker-process';
import { Exchange, KeptAliveConnection } from '../support/kept-alive';

jest.setTimeout(180_000);

/**
 * How a client uses its kept-alive connection: one request at a time, or three pipelined, again and again; one, or
 * three pipelined, sent as the signal lands after a quiet spell; or nothing more at all.
 */
type Kind = 'steady' | 'pipelining' | 'late' | 'latePipelining' | 'quiet';

interface Sent {
  kind: Kind;
  connection: number;
  transactionId: string;
  sentAt: number;
  answeredAt?: number;
  answer?: Exchange;
}

const CONNECTIONS: Record<Kind, number> = { steady: 32, pipelining: 8, late: 8, latePipelining: 4, quiet: 4 };
const PIPELINED = 3;
/** Each client's pause between two exchanges: connections sit idle between requests, as real ones do. */
const THINK_MS = 20;
/** Longer than any pause of the clients' on a loaded machine, so every client that keeps sending hears the 503. */
const IDLE_GRACE_MS = 3_000;

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * SIGTERM to a broker process while kept-alive clients send steadily, some pipelining, some idle, some sending just as
 * the signal lands. Every request written on a connection the broker had accepted (each answered once before the
 * signal) must be answered: served (201, and stored), or 503 shutting down (and not stored). None may be reset or left
 * unanswered by a close, and a connection that says nothing is closed cleanly once the grace is over.
 */
(onEmbeddedDatabase ? describe.skip : describe)('SIGTERM and the kept-alive connections it finds', () => {
  let broker: BrokerProcess | undefined;
  let db: Client;
  const connections: KeptAliveConnection[] = [];

  beforeAll(async () => {
    db = await openSession();
  });

  afterEach(async () => {
    for (const connection of connections.splice(0)) connection.destroy();
    await broker?.stop();
    broker = undefined;
  });

  afterAll(async () => {
    await db.end();
  });

  it('answers every request that reached it, served or 503 shutting down, and resets none', async () => {
    broker = await BrokerProcess.start({
      DATABASE_URL: process.env.DATABASE_URL,
      TENANT_HEADER,
      DB_POOL_SIZE: '4',
      SHUTDOWN_TIMEOUT_MS: '10000',
      SHUTDOWN_IDLE_GRACE_MS: String(IDLE_GRACE_MS),
      // The quiet and late connections stay open until the signal, however long the others take to get going.
      HTTP_KEEP_ALIVE_TIMEOUT_MS: '120000',
      LOG_REQUESTS: 'false',
    });
    const port = Number(new URL(broker.url).port);
    const tenant = newTenant();
    const sent: Sent[] = [];

    const exchange = async (connection: KeptAliveConnection, index: number, kind: Kind, count: number) => {
      // One id per request: the requests of one pipelined write were once given the same, so when the drain began
      // between them, the 503s of the later ones found "their" message stored by the first.
      const requests = Array.from({ length: count }, (_, position) => {
        const transactionId = `${kind}-${index}-${sent.length + position}`;
        const body = JSON.stringify({ items: [{ queue: 'draining', partition: kind, payload: {}, transactionId }] });
        const record: Sent = { kind, connection: index, transactionId, sentAt: performance.now() };
        return {
          record,
          text:
            `POST /api/v1/push HTTP/1.1\r\nHost: broker\r\n${TENANT_HEADER}: ${tenant}\r\n` +
            `Content-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
        };
      });
      const answers = connection.send(requests.map((request) => request.text));
      if (!answers) return false;
      sent.push(...requests.map((request) => request.record));
      await Promise.all(
        answers.map(async (answer, at) => {
          requests[at].record.answer = await answer;
          requests[at].record.answeredAt = performance.now();
        }),
      );
      return connection.open;
    };
    // Accepted, and answered once, before the signal.
    const open = (kind: Kind): Promise<KeptAliveConnection[]> =>
      Promise.all(
        Array.from({ length: CONNECTIONS[kind] }, async (_, index) => {
          const connection = await KeptAliveConnection.open(port);
          connections.push(connection);
          expect(await exchange(connection, index, kind, 1)).toBe(true);
          return connection;
        }),
      );
    const steady = await open('steady');
    const pipelining = await open('pipelining');
    const late = await open('late');
    const latePipelining = await open('latePipelining');
    const quiet = await open('quiet');

    const loops = [
      ...steady.map(async (connection, index) => {
        while (await exchange(connection, index, 'steady', 1)) await sleep(Math.random() * THINK_MS);
      }),
      ...pipelining.map(async (connection, index) => {
        while (await exchange(connection, index, 'pipelining', PIPELINED)) await sleep(Math.random() * THINK_MS);
      }),
    ];
    await waitFor(() => sent.length >= 300, 'the clients get going', 60_000);

    broker.kill('SIGTERM');
    const signalledAt = performance.now();
    const lateAnswers = [
      ...late.map((connection, index) => exchange(connection, index, 'late', 1)),
      ...latePipelining.map((connection, index) => exchange(connection, index, 'latePipelining', PIPELINED)),
    ];
    const quietClosed = Promise.all(quiet.map((connection) => connection.closed()));
    const exit = await within(broker.exited, 'the broker exits', 30_000);
    await within(Promise.all([...loops, ...lateAnswers, quietClosed]), 'every client hears the end');
    expect(exit.code).toBe(0);

    const stored = new Set(
      (
        await db.query<{ transaction_id: string }>('SELECT transaction_id FROM messages WHERE tenant_id = $1', [tenant])
      ).rows.map((row) => row.transaction_id),
    );
    // The requests at stake: written on a connection the broker had accepted, and not answered before the signal.
    const atStake = sent.filter((request) => (request.answeredAt ?? Infinity) >= signalledAt);
    const lost = atStake.filter((request) => request.answer!.status === undefined);
    expect({
      atStake: atStake.length,
      lost: lost.map(({ kind, sentAt, answer }) => ({
        kind,
        writtenMs: Math.round(sentAt - signalledAt),
        how: answer!.lost,
      })),
    }).toEqual({
      atStake: atStake.length,
      lost: [],
    });
    for (const request of sent) {
      const { status, headers, body } = request.answer!;
      if (status === 503) {
        expect({ status, body, retryAfter: headers['retry-after'] }).toEqual({
          status: 503,
          body: '{"error":"shutting down"}',
          retryAfter: '1',
        });
      } else {
        expect(status).toBe(201);
      }
      // A request answered 201 is stored; one answered 503 was not served.
      expect({ id: request.transactionId, stored: stored.has(request.transactionId) }).toEqual({
        id: request.transactionId,
        stored: status === 201,
      });
    }
  });
});
