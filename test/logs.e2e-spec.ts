import { createServer } from 'node:net';
import { sign } from 'jsonwebtoken';
import { BrokerProcess } from './faults/support/broker-process';
import { newTenant, onEmbeddedDatabase } from './support/test-app';
import { waitFor, within } from './support/wait';

jest.setTimeout(120_000);

const SECRET = 'log-test-secret-that-is-long-enough-for-hs256';
const PAYLOAD_MARKER = 'payload-that-must-never-be-logged';

type Line = Record<string, unknown>;

/**
 * The broker's own output, as an operator's log pipeline reads it: a broker
 * process started from the sources, its stdout parsed line by line. One
 * process per database run: the embedded database serves one.
 */
(onEmbeddedDatabase ? describe.skip : describe)('structured logs', () => {
  const tenant = newTenant();
  const token = sign({ role: 'admin', tenant }, SECRET, { algorithm: 'HS256', expiresIn: '1h' });
  const auth = { authorization: `Bearer ${token}` };

  async function start(env: Record<string, string> = {}): Promise<BrokerProcess> {
    return BrokerProcess.start({
      DATABASE_URL: process.env.DATABASE_URL!,
      JWT_ENABLED: 'true',
      JWT_SECRET: SECRET,
      DB_POOL_SIZE: '4',
      ...env,
    });
  }

  const parsed = (broker: BrokerProcess): Line[] =>
    broker.lines.filter((line) => line.trim() !== '').map((line) => JSON.parse(line) as Line);

  it('writes every line as JSON, one per request with its id, tenant, route, status and duration, and never a token or a payload', async () => {
    const broker = await start();
    try {
      const pushed = await fetch(`${broker.url}/api/v1/push`, {
        method: 'POST',
        headers: { ...auth, 'content-type': 'application/json' },
        body: JSON.stringify({ items: [{ queue: 'logged', payload: { note: PAYLOAD_MARKER } }] }),
      });
      expect(pushed.status).toBe(201);
      const popped = await fetch(`${broker.url}/api/v1/pop/queue/logged?leaseSeconds=60`, { headers: auth });
      const { leaseId } = (await popped.json()) as { leaseId: string };
      const extended = await fetch(`${broker.url}/api/v1/lease/${leaseId}/extend`, { method: 'POST', headers: auth });
      const refused = await fetch(`${broker.url}/api/v1/pop/queue/logged`, {
        headers: { authorization: 'Bearer not-a-token' },
      });
      expect(refused.status).toBe(401);
      await waitFor(() => parsed(broker).filter((line) => line.msg === 'request').length >= 4, 'four request lines');

      broker.kill('SIGTERM');
      await within(broker.exited, 'the broker exits');

      const lines = parsed(broker);
      const requests = lines.filter((line) => line.msg === 'request');
      expect(
        requests.map(({ requestId, tenant: who, method, route, status, level }) => ({
          requestId,
          tenant: who,
          method,
          route,
          status,
          level,
        })),
      ).toEqual([
        {
          requestId: pushed.headers.get('x-request-id'),
          tenant,
          method: 'POST',
          route: '/api/v1/push',
          status: 201,
          level: 30,
        },
        {
          requestId: popped.headers.get('x-request-id'),
          tenant,
          method: 'GET',
          route: '/api/v1/pop/queue/:queue',
          status: 200,
          level: 30,
        },
        {
          requestId: extended.headers.get('x-request-id'),
          tenant,
          method: 'POST',
          route: '/api/v1/lease/:leaseId/extend',
          status: 200,
          level: 30,
        },
        {
          requestId: refused.headers.get('x-request-id'),
          tenant: undefined,
          method: 'GET',
          route: '/api/v1/pop/queue/:queue',
          status: 401,
          level: 40,
        },
      ]);
      for (const line of requests) expect(typeof line.durationMs).toBe('number');
      const everything = broker.lines.join('\n');
      expect(everything).not.toContain(token);
      expect(everything).not.toContain('not-a-token');
      expect(everything).not.toContain(PAYLOAD_MARKER);
      expect(everything).not.toMatch(/authorization/i);
      // The lifecycle an operator follows.
      const messages = lines.map((line) => String(line.msg));
      expect(messages).toEqual(
        expect.arrayContaining([
          expect.stringMatching(/^Listening on http/),
          expect.stringMatching(/^SIGTERM: shutting down/),
          expect.stringMatching(/^Draining: /),
          'Stopped',
        ]),
      );
      expect(lines.filter((line) => (line.level as number) >= 40 && line.msg !== 'request')).toEqual([]);
    } finally {
      await broker.stop();
    }
  });

  it('honours LOG_LEVEL: at warn, a 2xx request writes nothing, a 4xx one a warning', async () => {
    const broker = await start({ LOG_LEVEL: 'warn', PORT: String(await freePort()) });
    try {
      expect((await fetch(`${broker.url}/health/live`)).status).toBe(200);
      expect((await fetch(`${broker.url}/api/v1/pop/queue/x`)).status).toBe(401);
      await waitFor(() => parsed(broker).some((line) => line.status === 401), 'the 401 line');
      expect(parsed(broker).filter((line) => (line.level as number) < 40)).toEqual([]);
    } finally {
      await broker.stop();
    }
  });
});

/** A port nothing listens on right now. */
function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const server = createServer().listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });
}
